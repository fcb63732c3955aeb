//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestOpSuiteUnderPhiloxBase runs the shared op suite (every dropout op against the CPU reference: Dropout,
// the residual LayerNorms, fused attention in every dtype) with the Philox base far from 0 (philox.go): each
// kernel must draw the masks of its absolute offsets, as without a base.
func TestOpSuiteUnderPhiloxBase(t *testing.T) {
	b := openOrSkip(t)
	if err := b.SetPhiloxBase(0x9e3779b97f4a7c15); err != nil {
		t.Fatal(err)
	}
	defer b.SetPhiloxBase(0)
	tensortest.RunOpSuite(t, b)
}
