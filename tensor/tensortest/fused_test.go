package tensortest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestFusedOpsMatchTheirParts checks on every backend that a fused op gives, bit for bit, what its unfused
// parts give on the same backend: GELUBackwardRecompute is GELUBackward plus GELU. The sizes cover the
// vectorised path (a multiple of four) and a ragged tail.
func TestFusedOpsMatchTheirParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(3, 5))
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, n := range []int{4096, 4099} {
				x, d := make([]float32, n), make([]float32, n)
				for i := range x {
					x[i], d[i] = float32(3*rng.NormFloat64()), float32(rng.NormFloat64())
				}
				xt, dt1, dt2 := Upload(t, b, dt, x, n), Upload(t, b, dt, d, n), Upload(t, b, dt, d, n)
				g1, g2 := Alloc(t, b, dt, n), Alloc(t, b, dt, n)
				if err := b.GELU(g1, xt); err != nil {
					t.Fatal(err)
				}
				if err := b.GELUBackward(dt1, dt1, xt); err != nil {
					t.Fatal(err)
				}
				if err := b.GELUBackwardRecompute(dt2, g2, dt2, xt); err != nil {
					t.Fatal(err)
				}
				sameBits(t, dt.String()+" GELU output", Download(t, b, g1), Download(t, b, g2))
				sameBits(t, dt.String()+" GELU gradient", Download(t, b, dt1), Download(t, b, dt2))
				for _, x := range []*tensor.Tensor{xt, dt1, dt2, g1, g2} {
					b.Free(x)
				}
			}
		}
	})
}

func sameBits(t *testing.T, what string, want, got []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s[%d] = %v fused, %v unfused", what, i, got[i], want[i])
		}
	}
}
