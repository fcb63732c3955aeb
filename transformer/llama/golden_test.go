package llama

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
)

// goldenScript makes every file these tests read.
const goldenScript = "python3 tools/reference/decoder_goldens.py testdata/decoder (on the GPU machine: torch + transformers + peft)"

// goldenSeed is decoder_goldens.py's detweights seed.
const goldenSeed = 20261201

// golden is one file of decoder_goldens.py.
type golden struct {
	t  *testing.T
	ck *loaders.Checkpoint
}

func openGolden(t *testing.T, rel ...string) *golden {
	t.Helper()
	path := testutil.Testdata(t, append([]string{"decoder"}, rel...)...)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		t.Skipf("golden %s not generated yet: run %s", path, goldenScript)
	}
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		t.Fatalf("%v (regenerate with %s)", err, goldenScript)
	}
	t.Cleanup(func() { ck.Close() })
	return &golden{t: t, ck: ck}
}

func (g *golden) has(name string) bool { _, ok := g.ck.Info(name); return ok }

func (g *golden) f32(name string) []float32 {
	g.t.Helper()
	ht, err := g.ck.Get(name)
	if err != nil {
		g.t.Fatalf("golden %s: %v", g.ck.Path, err)
	}
	v, err := ht.Float32()
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func (g *golden) i64(name string) []int64 {
	g.t.Helper()
	ht, err := g.ck.Get(name)
	if err != nil {
		g.t.Fatalf("golden %s: %v", g.ck.Path, err)
	}
	v, err := ht.Int64()
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

// config parses the config.json (transformers 5 layout) the script stored in the metadata.
func (g *golden) config() Config {
	g.t.Helper()
	cfg, err := ParseConfig([]byte(g.ck.Metadata()["config"]))
	if err != nil {
		g.t.Fatalf("%s metadata config: %v", g.ck.Path, err)
	}
	return cfg
}

// batch rebuilds the inputs (with labels) the script fed transformers.
func (g *golden) batch() *loaders.Batch {
	g.t.Helper()
	ht, err := g.ck.Get("inputs/input_ids")
	if err != nil {
		g.t.Fatal(err)
	}
	toI32 := func(v []int64) []int32 {
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	}
	return &loaders.Batch{B: ht.Shape[0], T: ht.Shape[1], InputIDs: toI32(g.i64("inputs/input_ids")),
		AttentionMask: toI32(g.i64("inputs/attention_mask")), Labels: g.i64("inputs/labels")}
}

// detModel builds cfg on b with DecoderValues weights.
func detModel(t testing.TB, b tensor.Backend, cfg Config) *ForCausalLM {
	t.Helper()
	m, err := build(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.namedParameters() {
		if err := b.Upload(np.Param.Value, detweights.DecoderValues(goldenSeed, np.Name, np.Param.Value.Shape)); err != nil {
			t.Fatal(err)
		}
	}
	m.WeightsUpdated()
	return m
}

var goldenPolicies = map[string]amp.Policy{"fp32": amp.FP32, "bf16": amp.BF16, "fp16": amp.FP16}

// goldenTolerance is the bound: 1e-5 relative in FP32, BERT's 1e-2 under autocast.
func goldenTolerance(mode string) float64 {
	if mode == "fp32" {
		return 1e-5
	}
	return 1e-2
}

// TestGoldens runs every case of decoder_goldens.py on the CPU backend in FP32, BF16 and FP16 and compares the
// logits (all B·T·V), the loss and, where recorded, every parameter's gradient with transformers': Llama with
// llama3 rope scaling and GQA (untied), Qwen2 with q/k/v biases and a padding id used as a token (tied),
// Qwen3 with q/k norms and explicit head_dim (tied), Mistral (untied, sliding window ≥ T).
func TestGoldens(t *testing.T) {
	for _, name := range []string{"llama_rope3", "qwen2_bias", "qwen3_qknorm", "mistral"} {
		t.Run(name, func(t *testing.T) {
			tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
				runGolden(t, b, openGolden(t, name+".safetensors"))
			})
		})
	}
}

func runGolden(t *testing.T, b tensor.Backend, g *golden) {
	cfg := g.config()
	m := detModel(t, b, cfg)
	batch := g.batch()
	for _, mode := range []string{"fp32", "bf16", "fp16"} {
		t.Run(mode, func(t *testing.T) {
			m.SetPolicy(goldenPolicies[mode])
			out, err := m.Forward(batch, transformer.ForwardOptions{Train: true, HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			tol := goldenTolerance(mode)
			if e, i := tensortest.RelErr(out.Logits, g.f32(mode+"/logits")); e > tol {
				t.Errorf("logits: relative error %.3g > %.0e at %d", e, tol, i)
			} else {
				t.Logf("logits: relative error %.3g", e)
			}
			want := g.f32(mode + "/loss")[0]
			if e := math.Abs(float64(out.Loss-want)) / math.Abs(float64(want)); e > tol {
				t.Errorf("loss %v, transformers %v (relative error %.3g > %.0e)", out.Loss, want, e, tol)
			}
			if err := m.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(1); err != nil {
				t.Fatal(err)
			}
			if !g.has(mode + "/grad/model.norm.weight") {
				return
			}
			compareGrads(t, g, m, mode)
		})
	}
}

// compareGrads checks every gradient against transformers' (max|Δ|/max|ref| per tensor). Under autocast a
// tensor that misses 1e-2 still passes when tune's error against transformers-FP32 is at most 2× transformers'
// own autocast error against its FP32 (both round at the half type's precision, differently), as the BERT
// goldens decide.
func compareGrads(t *testing.T, g *golden, m *ForCausalLM, mode string) {
	t.Helper()
	tol := goldenTolerance(mode)
	worst, worstName := 0.0, ""
	for _, np := range m.namedParameters() {
		ours := tensortest.Download(t, m.Backend(), np.Param.Grad)
		theirs := g.f32(mode + "/grad/" + np.Name)
		e, _ := tensortest.RelErr(ours, theirs)
		if e > worst {
			worst, worstName = e, np.Name
		}
		if e <= tol {
			continue
		}
		if mode != "fp32" {
			truth := g.f32("fp32/grad/" + np.Name)
			mine, _ := tensortest.RelErr(ours, truth)
			own, _ := tensortest.RelErr(theirs, truth)
			if mine <= 2*own {
				t.Logf("%s: error vs transformers-%s %.3g > %.0e, but vs FP32 tune %.3g <= 2 x transformers %.3g", np.Name, mode, e, tol, mine, own)
				continue
			}
			t.Errorf("%s: gradient error %.3g > %.0e (vs FP32: tune %.3g, transformers %.3g)", np.Name, e, tol, mine, own)
			continue
		}
		t.Errorf("%s: gradient error %.3g > %.0e", np.Name, e, tol)
	}
	t.Logf("worst gradient: %s, error %.3g", worstName, worst)
}

// TestCheckpointsSavedByTransformers loads the checkpoints transformers saved — Llama in BF16 with a v5
// config.json and a generation_config.json, Qwen2 in F32 with a v4 config.json, Mistral in F16 in shards — and
// compares the FP32 logits with from_pretrained's, and the weights with the detweights values rounded to the
// checkpoint's dtype. Saving writes the generation config back, and the saved directory loads again to the
// same logits (sharded with a small shard limit).
func TestCheckpointsSavedByTransformers(t *testing.T) {
	logits := openGolden(t, "checkpoints.safetensors")
	for _, c := range []struct{ dir, golden string }{
		{"llama_v5_bf16", "llama_rope3"}, {"qwen2_v4_f32", "qwen2_bias"}, {"mistral_sharded_f16", "mistral"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := testutil.Testdata(t, "decoder", "ckpt", c.dir)
			b := cpuBackend()
			m, report, err := LoadPretrained(dir, b, transformer.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", report.LoadReport)
			batch := openGolden(t, c.golden+".safetensors").batch()
			out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			want := logits.f32(c.dir + "/logits")
			if e, i := tensortest.RelErr(out.Logits, want); e > 1e-5 {
				t.Errorf("logits: relative error %.3g > 1e-5 at %d", e, i)
			}
			saved := t.TempDir()
			if err := m.SaveSharded(saved, 8000); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(saved + "/" + loaders.SafetensorsIndexName); err != nil {
				t.Errorf("SaveSharded(8000) wrote no index: %v", err)
			}
			_, hadGen := os.Stat(dir + "/" + GenerationConfigName)
			if _, err := os.Stat(saved + "/" + GenerationConfigName); (err == nil) != (hadGen == nil) {
				t.Errorf("generation_config.json kept: %v, source has one: %v", err == nil, hadGen == nil)
			}
			back, _, err := LoadPretrained(saved, b, transformer.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if back.Config.Rope != m.Config.Rope || back.Config.RopeTheta != m.Config.RopeTheta || back.Config.TieWordEmbeddings != m.Config.TieWordEmbeddings {
				t.Errorf("config after a save round trip: %+v, want %+v", back.Config, m.Config)
			}
			again, err := back.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again.Logits, out.Logits) {
				t.Error("the saved checkpoint gives other logits")
			}
		})
	}
}
