package lora

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
	"github.com/tune-ml/tune/transformer/llama"
)

var updateDecoder = flag.Bool("update-decoder", false,
	"rewrite testdata/decoder/saved_by_tune_lora, the tune-saved CAUSAL_LM adapter decoder_goldens.py --check-tune loads into PEFT")

const decoderScript = "python3 tools/reference/decoder_goldens.py testdata/decoder (on the GPU machine)"

// decoderGoldenSeed is decoder_goldens.py's detweights seed.
const decoderGoldenSeed = 20261201

// openDecoderGolden opens a file of testdata/decoder, skipping when it has not been generated.
func openDecoderGolden(t *testing.T, rel ...string) *loaders.Checkpoint {
	t.Helper()
	path := testutil.Testdata(t, append([]string{"decoder"}, rel...)...)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		t.Skipf("golden %s not generated yet: run %s", path, decoderScript)
	}
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func ckF32(t *testing.T, ck *loaders.Checkpoint, name string) []float32 {
	t.Helper()
	ht, err := ck.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ht.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ckI32(t *testing.T, ck *loaders.Checkpoint, name string) []int32 {
	t.Helper()
	ht, err := ck.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ht.Int64()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// decoderBase builds decoder_goldens.py's llama_rope3 (detweights values) on b and the golden's inputs.
func decoderBase(t *testing.T, b tensor.Backend) (*llama.ForCausalLM, *loaders.Batch) {
	t.Helper()
	g := openDecoderGolden(t, "llama_rope3.safetensors")
	cfg, err := llama.ParseConfig([]byte(g.Metadata()["config"]))
	if err != nil {
		t.Fatal(err)
	}
	m, err := llama.New(b, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.NamedParameters() {
		if err := b.Upload(np.Value, detweights.DecoderValues(decoderGoldenSeed, np.Name, np.Value.Shape)); err != nil {
			t.Fatal(err)
		}
	}
	m.WeightsUpdated()
	info, _ := g.Info("inputs/input_ids")
	batch := &loaders.Batch{B: info.Shape[0], T: info.Shape[1], InputIDs: ckI32(t, g, "inputs/input_ids"),
		AttentionMask: ckI32(t, g, "inputs/attention_mask")}
	return m, batch
}

func hostLogits(t *testing.T, m transformer.Model, batch *loaders.Batch) []float32 {
	t.Helper()
	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	return out.Logits
}

// TestDecoderAdaptersWrittenByPEFT loads PEFT's CAUSAL_LM adapters of the golden Llama (target_modules unset,
// which PEFT resolves to q_proj and v_proj, and "all-linear"; lora_B non-zero) and requires PEFT's logits
// (FP32, 1e-5 relative), the targets PEFT chose, and for all-linear the logits of merge_and_unload after
// Merge, and the adapter's again after Unmerge.
func TestDecoderAdaptersWrittenByPEFT(t *testing.T) {
	want := openDecoderGolden(t, "peft.safetensors")
	for _, c := range []struct {
		name    string
		targets []string // leaf names every layer must have adapted
	}{
		{"qv", []string{"q_proj", "v_proj"}},
		{"all", []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := cpu.New()
			base, batch := decoderBase(t, b)
			m, err := LoadAdapter(base, testutil.Testdata(t, "decoder", "peft", c.name))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(m.Targets()); got != len(c.targets)*len(base.Layers) {
				t.Errorf("targets %v, want %v in each of %d layers", m.Targets(), c.targets, len(base.Layers))
			}
			for _, path := range m.Targets() {
				if !slices.ContainsFunc(c.targets, func(leaf string) bool { return filepath.Ext(path) == "."+leaf }) {
					t.Errorf("unexpected target %s", path)
				}
			}
			got := hostLogits(t, m, batch)
			if e, i := tensortest.RelErr(got, ckF32(t, want, c.name+"/logits")); e > 1e-5 {
				t.Errorf("logits vs PEFT: relative error %.3g > 1e-5 at %d", e, i)
			}
			if c.name != "all" {
				return
			}
			if err := m.Merge(); err != nil {
				t.Fatal(err)
			}
			if e, i := tensortest.RelErr(hostLogits(t, m, batch), ckF32(t, want, "all/merged_logits")); e > 1e-5 {
				t.Errorf("merged logits vs PEFT merge_and_unload: relative error %.3g > 1e-5 at %d", e, i)
			}
			if err := m.Unmerge(); err != nil {
				t.Fatal(err)
			}
			if e, _ := tensortest.RelErr(hostLogits(t, m, batch), got); e > 1e-5 {
				t.Errorf("unmerged logits differ from the adapter's: %.3g", e)
			}
		})
	}
}

// TestDecoderAdapterSavedByTune applies a CAUSAL_LM LoRA with PEFT's defaults to the golden Llama (targets
// from the model type: q_proj, v_proj), sets lora_B non-zero, and checks that what Save writes is
// testdata/decoder/saved_by_tune_lora (the adapter decoder_goldens.py --check-tune loads with
// PeftModel.from_pretrained, with the logits tune computes in tune_logits.safetensors); with -update-decoder
// it rewrites that directory. When the device run's report peft_loads_tune.json exists, PEFT must have loaded it
// with the same logits.
func TestDecoderAdapterSavedByTune(t *testing.T) {
	b := cpu.New()
	base, batch := decoderBase(t, b)
	cfg := DefaultConfig()
	cfg.R, cfg.LoraAlpha, cfg.TaskType = 4, 8, "CAUSAL_LM"
	m, err := Apply(base, cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Config().TargetModules.Names; !slices.Equal(got, []string{"q_proj", "v_proj"}) {
		t.Errorf("default targets for llama %v, want PEFT's [q_proj v_proj]", got)
	}
	for _, path := range m.Targets() {
		l := m.Adapter(path)
		vals := detweights.Values(5, path+".lora_B", l.B.Value.Shape)
		if err := b.Upload(l.B.Value, vals); err != nil {
			t.Fatal(err)
		}
	}
	m.WeightsUpdated()
	logits := hostLogits(t, m, batch)
	dir := testutil.Testdata(t, "decoder", "saved_by_tune_lora")
	if *updateDecoder {
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(batch.InputIDs))
		mask := make([]int64, len(batch.AttentionMask))
		for i := range ids {
			ids[i], mask[i] = int64(batch.InputIDs[i]), int64(batch.AttentionMask[i])
		}
		hl, err := loaders.NewHostTensor("logits", tensor.F32, []int{batch.B, batch.T, base.Config.VocabSize}, logits)
		if err != nil {
			t.Fatal(err)
		}
		hi, _ := loaders.NewHostTensorInt64("inputs/input_ids", []int{batch.B, batch.T}, ids)
		hm, _ := loaders.NewHostTensorInt64("inputs/attention_mask", []int{batch.B, batch.T}, mask)
		if err := loaders.WriteSafetensors(filepath.Join(dir, "tune_logits.safetensors"), []loaders.HostTensor{hl, hi, hm}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, AdapterWeightsName)); err != nil {
		t.Skipf("%s not written yet: go test ./lora -run TestDecoderAdapterSavedByTune -update-decoder", dir)
	}
	saved := t.TempDir()
	if err := m.Save(saved); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{AdapterWeightsName, AdapterConfigName} {
		a, err1 := os.ReadFile(filepath.Join(dir, f))
		c, err2 := os.ReadFile(filepath.Join(saved, f))
		if err1 != nil || err2 != nil || string(a) != string(c) {
			t.Errorf("%s differs from testdata/decoder/saved_by_tune_lora (rerun with -update-decoder and the device check)", f)
		}
	}
	tl := openDecoderGolden(t, "saved_by_tune_lora", "tune_logits.safetensors")
	if e, _ := tensortest.RelErr(logits, ckF32(t, tl, "logits")); e > 1e-6 {
		t.Errorf("tune_logits.safetensors is stale: %.3g", e)
	}
	report := testutil.Testdata(t, "decoder", "peft_loads_tune.json")
	data, err := os.ReadFile(report)
	if err != nil {
		t.Skipf("%s not generated yet: run %s --check-tune testdata/decoder/saved_by_tune_lora", report, decoderScript)
	}
	var r struct {
		OK           bool     `json:"ok"`
		RelErr       float64  `json:"logits_rel_err"`
		Error        string   `json:"error"`
		TargetModule []string `json:"target_modules"`
		TaskType     string   `json:"task_type"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if !r.OK {
		t.Errorf("PeftModel.from_pretrained on tune's adapter: %+v", r)
	}
	t.Logf("PEFT loads tune's adapter: logits relative error %.3g, task %s, targets %v", r.RelErr, r.TaskType, r.TargetModule)
}
