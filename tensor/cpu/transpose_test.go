package cpu

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestTranspose12(t *testing.T) {
	b := New()
	const A, B, C, D = 2, 3, 5, 7
	x := make([]float32, A*B*C*D)
	for i := range x {
		x[i] = float32(i)
	}
	for _, dts := range [][2]tensor.DType{{tensor.F32, tensor.F32}, {tensor.BF16, tensor.BF16}, {tensor.F32, tensor.F16}} {
		t.Run(dts[0].String()+"→"+dts[1].String(), func(t *testing.T) {
			X := put(t, b, dts[0], x, A, B, C, D)
			Y := mustAlloc(t, b, dts[1], A, C, B, D)
			if err := b.Transpose12(Y, X, A, B, C, D); err != nil {
				t.Fatal(err)
			}
			got := get(t, b, Y)
			for i := 0; i < A; i++ {
				for j := 0; j < B; j++ {
					for k := 0; k < C; k++ {
						for l := 0; l < D; l++ {
							want := tensor.RoundTo(dts[1], tensor.RoundTo(dts[0], x[((i*B+j)*C+k)*D+l]))
							if g := got[((i*C+k)*B+j)*D+l]; g != want {
								t.Fatalf("out[%d,%d,%d,%d] = %v, want %v", i, k, j, l, g, want)
							}
						}
					}
				}
			}
			// The backward is the same op with b and c exchanged: it must restore x.
			Z := mustAlloc(t, b, dts[1], A, B, C, D)
			if err := b.Transpose12(Z, Y, A, C, B, D); err != nil {
				t.Fatal(err)
			}
			want := make([]float64, len(x))
			for i, v := range x {
				want[i] = float64(tensor.RoundTo(dts[1], tensor.RoundTo(dts[0], v)))
			}
			near(t, "round trip", get(t, b, Z), want, 0)
		})
	}
	if err := b.Transpose12(mustAlloc(t, b, tensor.F32, 10), mustAlloc(t, b, tensor.F32, 10), 1, 2, 3, 2); !errorIs(err, tensor.ErrShape) {
		t.Errorf("extents that do not match the element count: err = %v, want ErrShape", err)
	}
}

func TestTranspose12Gradients(t *testing.T) {
	rng := newRNG(t)
	for range 4 {
		a, bb, c, d := pick(rng), pick(rng), pick(rng), pick(rng)
		if a*bb*c*d > 5000 {
			continue
		}
		x, g := randn(rng, a*bb*c*d, 1), randn(rng, a*bb*c*d, 1)
		y, dx := make([]float64, len(x)), make([]float64, len(x))
		transpose12Kernel(dx, g, a, c, bb, d)
		checkGrad(t, rng, func() float64 { transpose12Kernel(y, x, a, bb, c, d); return dot(g, y) }, gradInput{"x", x, dx})
	}
}
