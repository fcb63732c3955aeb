package bert

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer/detweights"
)

// tinyConfig is a small BERT for fast tests: V 50, C 16, 2 layers, 2 heads, I 32, 3 labels.
func tinyConfig() BertConfig {
	c := DefaultBertConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 50, 16, 2, 2, 32
	c.MaxPositionEmbeddings, c.ID2Label = 16, DefaultLabels(3)
	c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0, 0
	return c
}

// newTestModel builds a model for cfg with detweights values from seed.
func newTestModel(t testing.TB, b tensor.Backend, cfg BertConfig, seed uint64) *BertForSequenceClassification {
	t.Helper()
	m, err := newBert(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := setDeterministic(m, seed); err != nil {
		t.Fatal(err)
	}
	return m
}

// setDeterministic loads detweights.Values(seed, name, shape) into every parameter.
func setDeterministic(m *BertForSequenceClassification, seed uint64) error {
	for _, np := range m.namedParameters() {
		v := np.Param.Value
		if err := m.Backend().Upload(v, detweights.Values(seed, np.Name, v.Shape)); err != nil {
			return fmt.Errorf("%s: %w", np.Name, err)
		}
	}
	m.WeightsUpdated()
	return nil
}

// testBatch returns a (b, t) batch whose row i has lens[i] real tokens (then padding id 0), token types 0 for
// the first half and 1 for the rest, ids drawn deterministically from [1, vocab), and labels (one −100 when
// b > 2).
func testBatch(b, t, vocab, labels int, lens []int) *loaders.Batch {
	bt := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), TokenTypeIDs: make([]int32, b*t),
		AttentionMask: make([]int32, b*t), Labels: make([]int64, b)}
	x := uint64(12345)
	for i := 0; i < b; i++ {
		for j := 0; j < lens[i]; j++ {
			x = detweights.SplitMix64(x)
			bt.InputIDs[i*t+j] = int32(1 + x%uint64(vocab-1))
			bt.AttentionMask[i*t+j] = 1
			if j >= lens[i]/2 {
				bt.TokenTypeIDs[i*t+j] = 1
			}
		}
		bt.Labels[i] = int64(i % labels)
	}
	if b > 2 {
		bt.Labels[1] = -100
	}
	return bt
}

// cpuBackend opens the CPU reference backend.
func cpuBackend() tensor.Backend { return cpu.New() }

// gradErrors compares two sets of gradients (same names, same order) tensor by tensor and returns each
// tensor's error max|a−b| / max(max|b|, floor) and the worst tensor. floor is 1% of G, the largest |b| over all
// tensors, so a tensor whose gradient is tiny is held to 1% of the model's gradient scale rather than to its own
// rounding noise; attention.self.key.bias, whose exact gradient is 0 (softmax is invariant to adding q·b_k to every
// score of a row), so that both sides hold only rounding noise, is measured against G itself.
func gradErrors(names []string, a, b [][]float32) (errs []float64, worst int) {
	var g float64
	for _, t := range b {
		for _, x := range t {
			g = math.Max(g, math.Abs(float64(x)))
		}
	}
	errs = make([]float64, len(names))
	for i := range names {
		floor := 0.01 * g
		if strings.HasSuffix(names[i], "attention.self.key.bias") {
			floor = g
		}
		var maxDiff, maxRef float64
		for j := range b[i] {
			maxDiff = math.Max(maxDiff, math.Abs(float64(a[i][j])-float64(b[i][j])))
			if math.IsNaN(float64(a[i][j])) {
				maxDiff = math.Inf(1)
			}
			maxRef = math.Max(maxRef, math.Abs(float64(b[i][j])))
		}
		errs[i] = maxDiff / math.Max(maxRef, floor)
		if errs[i] > errs[worst] {
			worst = i
		}
	}
	return errs, worst
}

// modelGrads downloads every gradient of m with its name (frozen parameters give nil).
func modelGrads(t testing.TB, m *BertForSequenceClassification) (names []string, grads [][]float32) {
	t.Helper()
	for _, np := range m.namedParameters() {
		names = append(names, np.Name)
		var g []float32
		if np.Param.Grad != nil {
			g = tensortest.Download(t, m.Backend(), np.Param.Grad)
		}
		grads = append(grads, g)
	}
	return names, grads
}

// must returns the first of two results (for logging relErr's error).
func must[A, B any](a A, _ B) A { return a }
