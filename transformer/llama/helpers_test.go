package llama

import (
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// tinyConfig is a small Llama with grouped-query attention (4 query heads over 2 key/value heads), an explicit
// head_dim that does not divide hidden_size, and llama3 rope scaling.
func tinyConfig(t testing.TB, modelType string) Config {
	t.Helper()
	c, err := NewConfig(modelType, 37, 16, 24, 2, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	c.HeadDim = 6
	c.RopeTheta = 500
	c.Rope = RopeScaling{Type: RopeLlama3, Factor: 4, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8}
	c.InitializerRange = 0.2
	return c
}

func cpuBackend() tensor.Backend { return cpu.New() }

func newModel(t testing.TB, b tensor.Backend, cfg Config, seed uint64) *ForCausalLM {
	t.Helper()
	m, err := New(b, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	// Non-trivial norm weights and biases, so that their gradients and roles are exercised.
	for i, np := range m.namedParameters() {
		if len(np.Param.Value.Shape) == 1 {
			rng := rand.New(rand.NewPCG(seed, uint64(i)+1000))
			h := make([]float32, np.Param.Value.Numel())
			for j := range h {
				h[j] = float32(1 + 0.3*rng.NormFloat64())
			}
			if err := b.Upload(np.Param.Value, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.WeightsUpdated()
	return m
}

// testBatch returns B rows of T tokens; row r has lens[r] real tokens (right padding, labels −100 there), and
// one extra ignored label in row 0.
func testBatch(b, t, vocab int, lens []int) *loaders.Batch {
	rng := rand.New(rand.NewPCG(5, 6))
	batch := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), AttentionMask: make([]int32, b*t), Labels: make([]int64, b*t)}
	for r := range b {
		for j := range t {
			i := r*t + j
			if j < lens[r] {
				batch.InputIDs[i] = int32(rng.IntN(vocab))
				batch.AttentionMask[i] = 1
				batch.Labels[i] = int64(batch.InputIDs[i])
			} else {
				batch.Labels[i] = -100
			}
		}
	}
	batch.Labels[2] = -100
	return batch
}
