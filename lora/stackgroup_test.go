package lora

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer/bert"
)

// stackRun is what one configuration of TestStackedAdapterGroup computes: the evaluation logits, the losses of
// three AdamW steps, every trainable gradient of the first, and how many layers ran their adapter terms as one
// group inside the query/key/value LinearStack.
type stackRun struct {
	logits  []float32
	losses  []float32
	names   []string
	grads   [][]float32
	grouped int
}

// runStacked builds the tiny BERT with query and value adapted (non-zero lora_B), under pol, and trains it.
func runStacked(t *testing.T, b tensor.Backend, pol amp.Policy, dropout float32, ckpt, off bool) stackRun {
	t.Helper()
	groupingOff = off
	defer func() { groupingOff = false }()
	cfg := tinyConfig()
	lc := seqCls()
	lc.LoraDropout = float64(dropout)
	base := newBase(t, b, cfg, 3)
	m, err := Apply(base, lc, 3)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, m, 9, trained)
	m.SetPolicy(pol)
	m.SetGradientCheckpointing(ckpt)
	batch := testBatch(3, 9, cfg.VocabSize, []int{9, 5, 3})
	var r stackRun
	r.logits = forward(t, m, batch)
	opt, err := trainer.NewAdamW(m, 0.9, 0.999, 1e-8, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r.losses = append(r.losses, step(t, m, batch, uint64(11+i)))
		if i == 0 {
			for _, np := range m.NamedParameters() {
				if np.Trainable {
					r.names, r.grads = append(r.names, np.Name), append(r.grads, download(t, m, np))
				}
			}
			r.grouped = groupedLayers(base)
		}
		must(t, opt.Step(1e-3))
		m.WeightsUpdated()
	}
	return r
}

// groupedLayers counts the layers whose query/key/value stack runs its adapters' terms as one group.
func groupedLayers(m *bert.BertForSequenceClassification) int {
	n := 0
	for _, l := range m.Layers {
		if st := l.Attention.Stack(); st != nil && st.GroupedDeltas() {
			n++
		}
	}
	return n
}

// compareRuns reports where got differs from want by more than tol (0: bit for bit).
func compareRuns(t *testing.T, what string, got, want stackRun, tol float64) {
	t.Helper()
	check := func(name string, g, w []float32) {
		if len(g) != len(w) {
			t.Fatalf("%s %s: %d values, want %d", what, name, len(g), len(w))
		}
		if tol == 0 {
			for j := range g {
				if math.Float32bits(g[j]) != math.Float32bits(w[j]) {
					t.Errorf("%s %s: element %d is %v, want %v bit for bit", what, name, j, g[j], w[j])
					return
				}
			}
			return
		}
		if e, j := tensortest.RelErr(g, w); e > tol {
			t.Errorf("%s %s: relative error %.3g > %.3g at %d (%v, want %v)", what, name, e, tol, j, g[j], w[j])
		}
	}
	check("logits", got.logits, want.logits)
	for i := range want.losses {
		check("loss of step "+string(rune('1'+i)), got.losses[i:i+1], want.losses[i:i+1])
	}
	if len(got.names) != len(want.names) || len(want.names) == 0 {
		t.Fatalf("%s: %d trainable parameters, want %d (> 0)", what, len(got.names), len(want.names))
	}
	for i, name := range want.names {
		check(name, got.grads[i], want.grads[i])
	}
}

// TestStackedAdapterGroup: BERT's query and value adapters inside the packed query/key/value LinearStack run
// their terms as one group (one x·[A_q; A_v]ᵀ GEMM, one dA and one dIn GEMM, the B products on their column
// blocks of the packed buffers) and give the logits, the gradients of every trainable parameter and the
// losses of three AdamW steps of every adapter on its own (groupingOff), within the GEMM blocking's rounding
// (1e-5 in FP32, the dtype's tolerance under autocast); with gradient checkpointing the grouped run is the
// same bit for bit; with lora_dropout > 0 the stack refuses the group and runs each adapter's own terms,
// bit for bit the per-adapter reference.
func TestStackedAdapterGroup(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		layers := tinyConfig().NumHiddenLayers
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
			t.Run(pol.String(), func(t *testing.T) {
				tol := 1e-5
				if pol != amp.FP32 {
					tol = tensortest.Tolerance(pol.GemmDType())
				}
				ref := runStacked(t, b, pol, 0, false, true)
				got := runStacked(t, b, pol, 0, false, false)
				if ref.grouped != 0 || got.grouped != layers {
					t.Fatalf("%d layers grouped with groupingOff, %d of %d without", ref.grouped, got.grouped, layers)
				}
				compareRuns(t, "grouped", got, ref, tol)
				ckpt := runStacked(t, b, pol, 0, true, false)
				if ckpt.grouped != layers {
					t.Fatalf("with gradient checkpointing %d of %d layers grouped", ckpt.grouped, layers)
				}
				compareRuns(t, "grouped with gradient checkpointing", ckpt, got, 0)
				dropRef := runStacked(t, b, pol, 0.1, false, true)
				drop := runStacked(t, b, pol, 0.1, false, false)
				if drop.grouped != 0 {
					t.Fatalf("lora_dropout 0.1: %d layers grouped, want none", drop.grouped)
				}
				compareRuns(t, "lora_dropout 0.1", drop, dropRef, 0)
			})
		}
	})
}

// TestStackedAdapterGroupMerged: merging the grouped adapters makes the stack compute the merged bases alone
// (the group falls back to each adapter's term, which a merged adapter skips): the logits equal those of the
// merged per-adapter model bit for bit and, after Unmerge, the unmerged logits within FP32 rounding.
func TestStackedAdapterGroupMerged(t *testing.T) {
	cfg := tinyConfig()
	batch := testBatch(3, 9, cfg.VocabSize, []int{9, 5, 3})
	var logits [2][3][]float32 // [off][unmerged, merged, unmerged again]
	for i, off := range []bool{true, false} {
		groupingOff = off
		m, err := Apply(newBase(t, cpuBackend(), cfg, 3), seqCls(), 3)
		if err != nil {
			t.Fatal(err)
		}
		setParams(t, m, 9, trained)
		logits[i][0] = forward(t, m, batch)
		must(t, m.Merge())
		logits[i][1] = forward(t, m, batch)
		must(t, m.Unmerge())
		logits[i][2] = forward(t, m, batch)
	}
	groupingOff = false
	for j, what := range []string{"unmerged", "merged", "unmerged again"} {
		if e := relErr(logits[1][j], logits[0][j]); e > 1e-5 || (j == 1 && e != 0) {
			t.Errorf("%s: grouped logits differ from per-adapter ones by %.3g", what, e)
		}
	}
	if e := relErr(logits[1][2], logits[1][0]); e > 1e-5 {
		t.Errorf("grouped: logits after Merge and Unmerge differ by %.3g", e)
	}
}
