package transformertest

import (
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// Step zeroes m's gradients and runs one training Forward of batch (dropout from seed, the logits copied to the
// host) and Backward(1), failing t on any error; it returns the Forward's output.
func Step(t testing.TB, m transformer.Model, batch *loaders.Batch, seed uint64) transformer.Output {
	t.Helper()
	if err := m.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	return out
}
