package lora

import (
	"errors"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// TestMergeUnmergeB28 checks PEFT's merge and unmerge (peft/tuners/lora/layer.py): r 4, alpha 8 on query, value and the non-square intermediate.dense
// (64→128), B filled from a normal distribution. Merged and unmerged logits agree within 1e-6 in FP32, and the
// base weights after merge → unmerge are within 1e-6 of the originals (the reference measured 6e−8 for both).
func TestMergeUnmergeB28(t *testing.T) {
	cfg := tinyConfig()
	lc := seqCls()
	lc.TargetModules = TargetModules{Names: []string{"query", "value", "intermediate.dense"}}
	m, err := Apply(newBase(t, cpuBackend(), cfg, 28), lc, 28)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Targets()) != 6 {
		t.Fatalf("targets %v, want 6", m.Targets())
	}
	rng := rand.New(rand.NewPCG(28, 28))
	for _, np := range m.NamedParameters() {
		if strings.Contains(np.Name, "lora_B") {
			v := make([]float32, np.Value.Numel())
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			must(t, m.Backend().Upload(np.Value, v))
		}
	}
	m.WeightsUpdated()
	batch := testBatch(3, 10, cfg.VocabSize, []int{10, 6, 8})
	base := forward(t, newBase(t, cpuBackend(), cfg, 28), batch)
	unmerged := forward(t, m, batch)
	if d, _ := tensortest.MaxAbsDiff(unmerged, base); d < 1e-2 {
		t.Fatalf("the adapters change the logits by only %g", d)
	}
	weights := map[string][]float32{}
	for _, np := range m.NamedParameters() {
		if strings.HasSuffix(np.Name, "base_layer.weight") {
			weights[np.Name] = tensortest.Download(t, m.Backend(), np.Value)
		}
	}
	must(t, m.Merge())
	merged := forward(t, m, batch)
	dLogits, _ := tensortest.MaxAbsDiff(merged, unmerged)
	if dLogits > 1e-6 {
		t.Errorf("merged vs unmerged logits: max abs diff %g > 1e-6", dLogits)
	}
	moved := 0
	for name, w := range weights {
		if d, _ := tensortest.MaxAbsDiff(tensortest.Download(t, m.Backend(), param(t, m, name).Value), w); d > 1e-3 {
			moved++
		}
	}
	if moved != len(weights) {
		t.Errorf("merge changed %d of %d base weights", moved, len(weights))
	}
	must(t, m.Unmerge())
	dWeights := 0.0
	for name, w := range weights {
		d, _ := tensortest.MaxAbsDiff(tensortest.Download(t, m.Backend(), param(t, m, name).Value), w)
		dWeights = math.Max(dWeights, d)
	}
	if dWeights > 1e-6 {
		t.Errorf("base weights after merge → unmerge: max abs diff %g > 1e-6", dWeights)
	}
	if d, _ := tensortest.MaxAbsDiff(forward(t, m, batch), unmerged); d > 1e-6 {
		t.Errorf("logits after unmerge differ by %g", d)
	}
	t.Logf("merged vs unmerged logits %.3g, weights after merge → unmerge %.3g", dLogits, dWeights)
}

// TestAddDeltaFanInFanOut checks the fan_in_fan_out rule of B28 on square and non-square weights: a weight stored
// transposed (In, Out) gets (B·A)ᵀ·scaling, a standard one (Out, In) gets B·A·scaling, each against a float64
// computation, and subtracting restores the weight within 1e-6. A delta whose shape does not fit the weight is
// an error (the PEFT bug crashed on non-square weights and corrupted square ones).
func TestAddDeltaFanInFanOut(t *testing.T) {
	bk := cpuBackend()
	for _, c := range []struct {
		name           string
		in, out, r     int
		fanInFanOut    bool
		wrongLayoutErr bool // passing the other layout is a shape error (only non-square weights can tell)
	}{
		{"square, standard (out, in)", 8, 8, 3, false, false},
		{"square, transposed (in, out)", 8, 8, 3, true, false},
		{"non-square 64→128, standard", 64, 128, 4, false, true},
		{"non-square 64→128, transposed", 64, 128, 4, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.in), uint64(c.out)))
			normal := func(n int, std float64) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64() * std)
				}
				return v
			}
			// BERT-like scales: W ~ N(0, 0.05²), A at its init scale 1/√in, B ~ N(0, 1).
			a, bm := normal(c.r*c.in, 1/math.Sqrt(float64(c.in))), normal(c.out*c.r, 1)
			wShape := []int{c.out, c.in}
			if c.fanInFanOut {
				wShape = []int{c.in, c.out}
			}
			w0 := normal(c.in*c.out, 0.05)
			w := tensortest.Upload(t, bk, tensor.F32, w0, wShape...)
			at, bt := tensortest.Upload(t, bk, tensor.F32, a, c.r, c.in), tensortest.Upload(t, bk, tensor.F32, bm, c.out, c.r)
			const s = 2
			must(t, AddDelta(bk, w, at, bt, s, c.fanInFanOut))
			ba := matmul(f64(bm), f64(a), c.out, c.r, c.in) // (out, in)
			want := make([]float64, len(w0))
			for o := range c.out {
				for i := range c.in {
					k := o*c.in + i
					if c.fanInFanOut {
						k = i*c.out + o
					}
					want[k] = float64(w0[k]) + s*ba[o*c.in+i]
				}
			}
			if e := relErr64(tensortest.Download(t, bk, w), want); e > 1e-6 {
				t.Errorf("merged weight: relative error %.3g", e)
			}
			must(t, AddDelta(bk, w, at, bt, -s, c.fanInFanOut))
			if d, _ := tensortest.MaxAbsDiff(tensortest.Download(t, bk, w), w0); d > 1e-6 {
				t.Errorf("after merge → unmerge: max abs diff %g", d)
			}
			err := AddDelta(bk, w, at, bt, s, !c.fanInFanOut)
			if c.wrongLayoutErr && (err == nil || !strings.Contains(err.Error(), "fan_in_fan_out")) {
				t.Errorf("the other layout on a non-square weight: %v, want a shape error", err)
			}
		})
	}
}

// TestFanInFanOutOnLinearWarns: fan_in_fan_out true on BERT's standard Linears is reset to false with PEFT's
// warning (B28), and the adapter then merges as a standard layer.
func TestFanInFanOutOnLinearWarns(t *testing.T) {
	cfg := seqCls()
	cfg.FanInFanOut = true
	m, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Warnings, FanInFanOutWarning) || m.Config().FanInFanOut {
		t.Errorf("warnings %q, fan_in_fan_out %v; want PEFT's warning and false", m.Warnings, m.Config().FanInFanOut)
	}
	must(t, m.Merge())
}

// TestMergeAndUnload: the unloaded model has transformers' parameter names again (no base_layer, no lora_),
// gives the merged logits bit for bit, and saves a checkpoint that LoadPretrained reads with nothing missing,
// unexpected or mis-shaped; the LoRA model refuses further use.
func TestMergeAndUnload(t *testing.T) {
	cfg := tinyConfig()
	plain := newBase(t, cpuBackend(), cfg, 7)
	var wantNames []string
	for _, np := range plain.NamedParameters() {
		wantNames = append(wantNames, np.Name)
	}
	m, err := Apply(plain, seqCls(), 7)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, m, 70, trained)
	batch := testBatch(2, 8, cfg.VocabSize, []int{8, 3})
	lora := forward(t, m, batch)
	must(t, m.Merge())
	merged := forward(t, m, batch)
	base, err := m.MergeAndUnload()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, np := range base.NamedParameters() {
		names = append(names, np.Name)
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("names after unload %v, want %v", names, wantNames)
	}
	if got := forward(t, base, batch); !slices.Equal(got, merged) {
		t.Errorf("unloaded logits differ from the merged ones")
	}
	dir := t.TempDir()
	must(t, base.Save(dir))
	re, report, err := bert.LoadPretrained(dir, cpuBackend(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Missing)+len(report.Unexpected)+len(report.Mismatched)+len(report.Initialized) != 0 {
		t.Errorf("reloading the merged checkpoint: %v", report)
	}
	if d, _ := tensortest.MaxAbsDiff(forward(t, re, batch), lora); d > 1e-5 {
		t.Errorf("merged checkpoint vs LoRA model logits: %g", d)
	}
	if _, err := m.Forward(batch, trainerOpts()); err == nil || errors.Is(err, ErrMerged) {
		t.Errorf("the unloaded LoRA model still runs: %v", err)
	}
}

func trainerOpts() trainer.ForwardOptions { return trainer.ForwardOptions{HostLogits: true} }
