package cpu

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestEmbeddingGradients(t *testing.T) {
	rng := newRNG(t)
	for _, v := range []int{1, 3, 7} {
		for _, c := range oddSizes {
			n := pick(rng)
			ids := make([]int, n)
			for i := range ids {
				ids[i] = rng.IntN(v) // repeats are likely: the backward must add them up
			}
			table, g := randn(rng, v*c, 1), randn(rng, n*c, 1)
			out, dtable := make([]float64, n*c), make([]float64, v*c)
			embeddingBackwardKernel(dtable, g, ids, c)
			checkGrad(t, rng, func() float64 { embeddingKernel(out, table, ids, c); return dot(g, out) }, gradInput{"table", table, dtable})
		}
	}
}

func TestEmbeddingDTypes(t *testing.T) {
	b := New()
	table := []float32{0, 0.1, 1, 1.1, 2, 2.1, 3, 3.1} // (V=4, C=2)
	dout := []float32{1, 2, 10, 20, 100, 200}          // (N=3, C=2)
	for _, tdt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, odt := range []tensor.DType{tensor.F32, tensor.BF16} {
			for _, idt := range []tensor.DType{tensor.I32, tensor.I64} {
				t.Run(tdt.String()+" table, "+odt.String()+" out, "+idt.String()+" ids", func(t *testing.T) {
					T := put(t, b, tdt, table, 4, 2)
					ids := mustAlloc(t, b, idt, 3)
					if idt == tensor.I32 {
						_ = b.Upload(ids, []int32{3, 0, 3})
					} else {
						_ = b.Upload(ids, []int64{3, 0, 3})
					}
					out := mustAlloc(t, b, odt, 3, 2)
					if err := b.Embedding(out, ids, T); err != nil {
						t.Fatal(err)
					}
					r := func(v float32) float64 { return float64(tensor.RoundTo(odt, tensor.RoundTo(tdt, v))) }
					near(t, "out", get(t, b, out), []float64{r(3), r(3.1), r(0), r(0.1), r(3), r(3.1)}, 0)

					// Backward: dtable += rows of dout scattered at ids (row 3 receives rows 0 and 2).
					D := put(t, b, odt, dout, 3, 2)
					if err := b.EmbeddingBackward(T, ids, D); err != nil {
						t.Fatal(err)
					}
					w := func(v, add float32) float64 { return float64(tensor.RoundTo(tdt, tensor.RoundTo(tdt, v)+add)) }
					near(t, "dtable", get(t, b, T), []float64{w(0, 10), w(0.1, 20), w(1, 0), w(1.1, 0), w(2, 0), w(2.1, 0), w(3, 101), w(3.1, 202)}, 0)
				})
			}
		}
	}
	t.Run("an id outside [0, V) is an error and writes nothing", func(t *testing.T) {
		T := put(t, b, tensor.F32, table, 4, 2)
		ids := mustAlloc(t, b, tensor.I64, 2)
		_ = b.Upload(ids, []int64{1, 4})
		out := put(t, b, tensor.F32, []float32{7, 7, 7, 7}, 2, 2)
		if err := b.Embedding(out, ids, T); !errorIs(err, tensor.ErrArgument) {
			t.Fatalf("err = %v, want ErrArgument", err)
		}
		near(t, "out", get(t, b, out), []float64{7, 7, 7, 7}, 0)
	})
}
