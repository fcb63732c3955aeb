package lora

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer/detweights"
)

// The golden files of tools/reference/peft_goldens.py (see its docstring). The base model is built from
// detweights on both sides, so the files hold only the adapter, the inputs and the outputs.
const (
	goldenScript = "tools/reference/peft_goldens.py"
	goldenSeed   = 20261129 // detweights seed of the base model (as bert_goldens.py's)
	adapterSeed  = 6        // detweights seed of the adapter and head values, keyed by their saved names
)

var updateTuneAdapters = flag.Bool("update-tune-adapters", false,
	"rewrite testdata/lora/saved_by_tune, the tune-saved adapters that "+goldenScript+" check-tune loads into PEFT")

// goldenConfig is the base model of the goldens: bert_goldens.py's make_config(128, 2): C 64, 2 layers, 4 heads,
// I 128, V 128, 64 positions, 2 labels, dropout 0.
func goldenConfig() bert.BertConfig {
	c := bert.DefaultBertConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 128, 64, 2, 4, 128
	c.MaxPositionEmbeddings = 64
	c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0, 0
	return c
}

// openGolden opens testdata/lora/<name> or skips naming the script that writes it.
func openGolden(t *testing.T, name string) *loaders.Checkpoint {
	t.Helper()
	path := testutil.Testdata(t, "lora", name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is missing: run python3 %s testdata/lora on the GPU machine (PEFT 0.21, transformers 5.17)", path, goldenScript)
	}
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// goldenF32 reads an F32 tensor of the golden file.
func goldenF32(t *testing.T, ck *loaders.Checkpoint, name string) []float32 {
	t.Helper()
	ht, err := ck.Get(name)
	if err != nil {
		t.Fatalf("%s: %v (regenerate with %s)", name, err, goldenScript)
	}
	v, err := ht.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// goldenBatch reads inputs/* of the golden file into a batch.
func goldenBatch(t *testing.T, ck *loaders.Checkpoint) *loaders.Batch {
	t.Helper()
	get := func(name string) ([]int64, []int) {
		ht, err := ck.Get("inputs/" + name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ht.Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v, ht.Shape
	}
	ids, shape := get("input_ids")
	types, _ := get("token_type_ids")
	mask, _ := get("attention_mask")
	b := &loaders.Batch{B: shape[0], T: shape[1]}
	for i := range ids {
		b.InputIDs = append(b.InputIDs, int32(ids[i]))
		b.TokenTypeIDs = append(b.TokenTypeIDs, int32(types[i]))
		b.AttentionMask = append(b.AttentionMask, int32(mask[i]))
	}
	if _, ok := ck.Info("inputs/labels"); ok {
		b.Labels, _ = get("labels")
	}
	return b
}

// TestPEFTGoldens loads the adapter PEFT wrote (r 4, alpha 8, query/value, SEQ_CLS, non-zero B and head) onto
// the detweights base and compares with PEFT's FP32 results: logits and loss within 1e-5 relative, the gradient
// of every lora_A, lora_B and of the classifier within 1e-4 relative (per tensor, max|a−b| / max|b|), the merged
// logits within 1e-5 of PEFT's merge_and_unload; and tune re-saves the adapter under PEFT's exact key set.
func TestPEFTGoldens(t *testing.T) {
	tensortest.ForEachBackend(t, peftGoldens)
}

func peftGoldens(t *testing.T, b tensor.Backend) {
	ck := openGolden(t, "peft_goldens.safetensors")
	adapterDir := testutil.Testdata(t, "lora", "peft_adapter")
	t.Logf("goldens: %v", ck.Metadata())
	m, err := LoadAdapter(newBase(t, b, goldenConfig(), goldenSeed), adapterDir)
	if err != nil {
		t.Fatal(err)
	}
	batch := goldenBatch(t, ck)
	check := func(what string, got, want []float32, tol float64) {
		t.Helper()
		e := relErr(got, want)
		t.Logf("%s: relative error %.3g", what, e)
		if e > tol || math.IsNaN(e) {
			t.Errorf("%s: relative error %.3g > %.0e (tune %v, PEFT %v)", what, e, tol, got[:min(4, len(got))], want[:min(4, len(want))])
		}
	}
	check("logits", forward(t, m, batch), goldenF32(t, ck, "fp32/logits"), 1e-5)
	loss := step(t, m, batch, 0)
	check("loss", []float32{loss}, goldenF32(t, ck, "fp32/loss"), 1e-5)
	grads := 0
	for _, name := range ck.Names() {
		key, ok := strings.CutPrefix(name, "fp32/grad/")
		if !ok {
			continue
		}
		mem, _ := memoryName(key)
		check("gradient of "+key, tensortest.Download(t, m.Backend(), param(t, m, mem).Grad), goldenF32(t, ck, name), 1e-4)
		grads++
	}
	if grads != 10 {
		t.Errorf("%d gradients in the golden file, want 10 (8 adapters and the head)", grads)
	}

	tmp := t.TempDir()
	must(t, m.Save(tmp))
	peftKeys, tuneKeys := adapterKeys(t, adapterDir), adapterKeys(t, tmp)
	if !slices.Equal(peftKeys, tuneKeys) {
		t.Errorf("tune saves keys %v, PEFT wrote %v", tuneKeys, peftKeys)
	}

	unmerged := forward(t, m, batch)
	must(t, m.Merge())
	merged := forward(t, m, batch)
	check("merged logits", merged, goldenF32(t, ck, "merged/logits"), 1e-5)
	check("merged vs unmerged logits", merged, unmerged, 1e-5)
}

// adapterKeys returns the sorted tensor names of dir's adapter file.
func adapterKeys(t *testing.T, dir string) []string {
	t.Helper()
	ck, err := loaders.OpenCheckpoint(filepath.Join(dir, AdapterWeightsName))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	names := ck.Names()
	slices.Sort(names)
	return names
}

// tuneAdapterCase is one adapter in testdata/lora/saved_by_tune that PEFT must load (peft_goldens.py
// check-tune): the common case, and one with a regex target, rslora, lora_only biases and a non-square module.
type tuneAdapterCase struct {
	name string
	cfg  func() Config
}

var tuneAdapterCases = []tuneAdapterCase{
	{"basic", seqCls},
	{"extended", func() Config {
		c := seqCls()
		c.TargetModules = TargetModules{Regex: `.*\.(query|value|intermediate\.dense)`}
		c.UseRSLoRA, c.Bias, c.LoraDropout = true, BiasLoRAOnly, 0.1
		return c
	}},
}

// tuneAdapter builds the adapter of a case on the golden base: every trained parameter (adapters, head, trained
// biases) set to detweights values keyed by its saved name, and fixed inputs.
func tuneAdapter(t *testing.T, c tuneAdapterCase) (*Model, *loaders.Batch) {
	t.Helper()
	cfg := goldenConfig()
	m, err := Apply(newBase(t, cpuBackend(), cfg, goldenSeed), c.cfg(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.NamedParameters() {
		if np.Trainable {
			must(t, m.Backend().Upload(np.Value, detweights.Values(adapterSeed, savedKey(np.Name), np.Value.Shape)))
		}
	}
	m.WeightsUpdated()
	batch := testBatch(2, 10, cfg.VocabSize, []int{10, 6})
	batch.Labels = nil
	return m, batch
}

// TestSavedByTuneAdapters keeps testdata/lora/saved_by_tune (what peft_goldens.py check-tune loads into PEFT)
// in step with tune: each case saved again gives the same tensors and adapter_config.json, and loading the
// checked-in adapter gives the recorded logits. Run with -update-tune-adapters to rewrite the files (then rerun
// the PEFT check).
func TestSavedByTuneAdapters(t *testing.T) {
	for _, c := range tuneAdapterCases {
		t.Run(c.name, func(t *testing.T) {
			dir := testutil.Testdata(t, "lora", "saved_by_tune", c.name)
			m, batch := tuneAdapter(t, c)
			logits := forward(t, m, batch)
			if *updateTuneAdapters {
				must(t, os.MkdirAll(dir, 0o755))
				must(t, m.Save(dir))
				writeExpected(t, filepath.Join(dir, "expected.safetensors"), batch, logits)
			}
			if _, err := os.Stat(filepath.Join(dir, AdapterConfigName)); err != nil {
				t.Fatalf("%v (create it with go test ./lora -run TestSavedByTuneAdapters -update-tune-adapters)", err)
			}
			tmp := t.TempDir()
			must(t, m.Save(tmp))
			if a, b := readBytes(t, filepath.Join(tmp, AdapterConfigName)), readBytes(t, filepath.Join(dir, AdapterConfigName)); a != b {
				t.Errorf("adapter_config.json differs from the checked-in one:\n%s\nwant\n%s", a, b)
			}
			if a, b := readBytes(t, filepath.Join(tmp, AdapterWeightsName)), readBytes(t, filepath.Join(dir, AdapterWeightsName)); a != b {
				t.Errorf("adapter_model.safetensors differs from the checked-in one (rerun with -update-tune-adapters if intended)")
			}
			re, err := LoadAdapter(newBase(t, cpuBackend(), goldenConfig(), goldenSeed), dir)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := loaders.OpenCheckpoint(filepath.Join(dir, "expected.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if e := relErr(forward(t, re, goldenBatch(t, ck)), goldenF32(t, ck, "fp32/logits")); e > 1e-6 {
				t.Errorf("the checked-in adapter gives logits %g away from the recorded ones", e)
			}
		})
	}
}

// writeExpected writes the inputs (I64) and the logits (F32) tune computed, for the PEFT check.
func writeExpected(t *testing.T, path string, b *loaders.Batch, logits []float32) {
	t.Helper()
	ids, types, mask := make([]int64, len(b.InputIDs)), make([]int64, len(b.InputIDs)), make([]int64, len(b.InputIDs))
	for i := range ids {
		ids[i], types[i], mask[i] = int64(b.InputIDs[i]), int64(b.TokenTypeIDs[i]), int64(b.AttentionMask[i])
	}
	var hosts []loaders.HostTensor
	for _, x := range []struct {
		name string
		v    []int64
	}{{"inputs/input_ids", ids}, {"inputs/token_type_ids", types}, {"inputs/attention_mask", mask}} {
		h, err := loaders.NewHostTensorInt64(x.name, []int{b.B, b.T}, x.v)
		must(t, err)
		hosts = append(hosts, h)
	}
	h, err := loaders.NewHostTensor("fp32/logits", tensor.F32, []int{b.B, len(logits) / b.B}, logits)
	must(t, err)
	must(t, loaders.WriteSafetensors(path, append(hosts, h), map[string]string{
		"format": "pt", "base": "detweights seed 20261129, bert_goldens.py make_config(128, 2)",
		"writer": "go test ./lora -run TestSavedByTuneAdapters -update-tune-adapters",
	}))
}

func readBytes(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

// peftChecks is testdata/lora/peft_checks.json, the record peft_goldens.py writes of PEFT loading tune's
// adapters (check-tune) and transformers loading `tune merge`'s checkpoint (check-merged).
type peftChecks struct {
	Versions map[string]string `json:"versions"`
	Results  []struct {
		Check        string            `json:"check"`
		Adapter      string            `json:"adapter"`
		Merged       string            `json:"merged"`
		Pass         bool              `json:"pass"`
		MaxAbsDiff   float64           `json:"max_abs_diff"`
		RelativeDiff float64           `json:"relative_diff"`
		Problems     []string          `json:"problems"`
		SHA256       map[string]string `json:"sha256"`
	} `json:"results"`
}

// TestPEFTChecks reads the recorded interop checks: every adapter in testdata/lora/saved_by_tune loaded by PEFT
// with the logits tune recorded (relative difference ≤ 1e-5, every tensor bit-exact, no key warning), and
// testdata/lora/merged_by_tune loaded by transformers with no missing or unexpected key and PEFT's logits. The
// files checked must still be the ones in testdata (same sha256), else the record is stale.
func TestPEFTChecks(t *testing.T) {
	path := testutil.Testdata(t, "lora", "peft_checks.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s is missing: run python3 %s testdata/lora on the GPU machine", path, goldenScript)
	}
	var rec peftChecks
	must(t, json.Unmarshal(raw, &rec))
	t.Logf("checked with %v", rec.Versions)
	seen := map[string]bool{}
	for _, r := range rec.Results {
		dir := filepath.Join("saved_by_tune", r.Adapter)
		if r.Check == "check-merged" {
			dir = r.Merged
		}
		seen[r.Check+" "+dir] = true
		t.Logf("%s %s: pass %v, max abs diff %.3g, relative %.3g", r.Check, dir, r.Pass, r.MaxAbsDiff, r.RelativeDiff)
		if !r.Pass {
			t.Errorf("%s %s failed: relative diff %.3g, problems %v", r.Check, dir, r.RelativeDiff, r.Problems)
		}
		for f, sum := range r.SHA256 {
			data, err := os.ReadFile(testutil.Testdata(t, "lora", dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != sum {
				t.Errorf("testdata/lora/%s/%s changed since PEFT checked it: rerun python3 %s testdata/lora", dir, f, goldenScript)
			}
		}
	}
	for _, c := range tuneAdapterCases {
		if !seen["check-tune "+filepath.Join("saved_by_tune", c.name)] {
			t.Errorf("no PEFT check recorded for saved_by_tune/%s", c.name)
		}
	}
	if !seen["check-merged merged_by_tune"] {
		t.Errorf("no transformers check recorded for merged_by_tune")
	}
}
