package amp

import (
	"math"
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// castCounter wraps a Backend and counts Cast calls, to prove the cache casts once per step.
type castCounter struct {
	tensor.Backend
	casts int
}

func (c *castCounter) Cast(dst, src *tensor.Tensor) error {
	c.casts++
	return c.Backend.Cast(dst, src)
}

// TestWeightCacheCastsOncePerStep simulates three steps in which each weight is used several times (forward and
// backward); the cache must cast each weight once per step and hand out the same copy every time.
func TestWeightCacheCastsOncePerStep(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
			t.Run(dt.String(), func(t *testing.T) {
				cb := &castCounter{Backend: b}
				c := NewWeightCache(cb, dt)
				defer c.Free()
				w1 := tensortest.Upload(t, b, tensor.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
				w2 := tensortest.Upload(t, b, tensor.F32, []float32{0.5, -0.25}, 2)
				for step := 1; step <= 3; step++ {
					first, err := c.Get(w1)
					must(t, err)
					for range 4 { // every use in forward and backward
						for _, w := range []*tensor.Tensor{w1, w2} {
							h, err := c.Get(w)
							must(t, err)
							if h.DType != dt || !h.Shape.Equal(w.Shape) {
								t.Fatalf("Get(%v) = %v, want %v%v", w, h, dt, w.Shape)
							}
						}
						again, _ := c.Get(w1)
						if again != first {
							t.Fatalf("step %d: Get returned a different copy for the same weight", step)
						}
					}
					if cb.casts != 2*step {
						t.Fatalf("after step %d: %d casts, want %d (each of 2 weights once per step)", step, cb.casts, 2*step)
					}
					c.Invalidate() // the optimizer updated the weights
				}
			})
		}
	})
}

// TestWeightCacheInvalidateRecasts checks that after an optimizer update and Invalidate the copy holds the
// new values, and that without Invalidate it keeps the old ones (the cache trusts the caller).
func TestWeightCacheInvalidateRecasts(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		c := NewWeightCache(b, tensor.BF16)
		defer c.Free()
		w := tensortest.Upload(t, b, tensor.F32, []float32{1, 2, 3})
		h, err := c.Get(w)
		must(t, err)
		must(t, b.Upload(w, []float32{-1, -2, -3})) // the optimizer step
		h, _ = c.Get(w)
		if got := tensortest.Download(t, b, h); !slices.Equal(got, []float32{1, 2, 3}) {
			t.Fatalf("before Invalidate the copy is %v, want the step's cast %v", got, []float32{1, 2, 3})
		}
		c.Invalidate()
		h, err = c.Get(w)
		must(t, err)
		if got := tensortest.Download(t, b, h); !slices.Equal(got, []float32{-1, -2, -3}) {
			t.Fatalf("after Invalidate the copy is %v, want %v", got, []float32{-1, -2, -3})
		}
	})
}

// TestWeightCacheRNE checks that the cached copies are bit-exact round-to-nearest-even casts, on values chosen
// at the edges: ties (to even, down and up), subnormals, the overflow threshold, infinities and signed zero. The
// expected bits were computed independently with Python's struct 'e' format (IEEE half, ties to even) and the
// c10::BFloat16 rounding formula.
func TestWeightCacheRNE(t *testing.T) {
	tests := []struct {
		name       string
		v          float32
		f16, bf16v uint16
	}{
		{"one", 1, 0x3c00, 0x3f80},
		{"negative zero keeps its sign", float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{"0.1 rounds", 0.1, 0x2e66, 0x3dcd},
		{"a third rounds up", 1.0 / 3, 0x3555, 0x3eab},
		{"largest finite half", 65504, 0x7bff, 0x4780},
		{"half overflow tie rounds to inf", 65520, 0x7c00, 0x4780},
		{"just below the half overflow tie", 65519.996, 0x7bff, 0x4780},
		{"1e-8 flushes to zero in half, not in bf16", 1e-8, 0x0000, 0x322c},
		{"6e-8 is the smallest half subnormal", 6e-8, 0x0001, 0x3381},
		{"below half of the smallest subnormal", 2.98e-8, 0x0000, 0x3300},
		{"above half of the smallest subnormal", 3e-8, 0x0001, 0x3301},
		{"1e-30 underflows in half only", 1e-30, 0x0000, 0x0da2},
		{"half tie to even down", 1 + 1.0/2048, 0x3c00, 0x3f80},
		{"half tie to even up", 1 + 3.0/2048, 0x3c02, 0x3f80},
		{"bf16 tie to even down", 1 + 1.0/256, 0x3c04, 0x3f80},
		{"bf16 tie to even up", 1 + 3.0/256, 0x3c0c, 0x3f82},
		{"-inf", float32(math.Inf(-1)), 0xfc00, 0xff80},
		{"3.4e38 overflows both", 3.4e38, 0x7c00, 0x7f80},
	}
	vals := make([]float32, len(tests))
	for i, tt := range tests {
		vals[i] = tt.v
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
			t.Run(dt.String(), func(t *testing.T) {
				c := NewWeightCache(b, dt)
				defer c.Free()
				h, err := c.Get(tensortest.Upload(t, b, tensor.F32, vals))
				must(t, err)
				got := make([]uint16, len(vals))
				must(t, b.Download(got, h))
				for i, tt := range tests {
					want := tt.f16
					if dt == tensor.BF16 {
						want = tt.bf16v
					}
					if got[i] != want {
						t.Errorf("%s: %v → %#04x, want %#04x", tt.name, tt.v, got[i], want)
					}
				}
			})
		}
	})
}

func TestWeightCacheRejectsHalfMaster(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		c := NewWeightCache(b, tensor.F16)
		defer c.Free()
		if _, err := c.Get(tensortest.Alloc(t, b, tensor.F16, 2)); err == nil {
			t.Fatal("Get of an F16 master weight succeeded; master weights are F32")
		}
	})
}

// TestWeightCacheFlat: with a flat buffer registered, its aligned weights share one half copy cast once per
// step whatever their number, hold the values per-weight copies would, and come back as the same views;
// a weight at an unaligned offset, and one outside the buffer, get copies of their own; registering
// another buffer serves from it.
func TestWeightCacheFlat(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		vals := make([]float32, 40)
		for i := range vals {
			vals[i] = 1 + float32(i)/3 // not exact in half
		}
		flat := tensortest.Upload(t, b, tensor.F32, vals, 40)
		view := func(off int, shape ...int) *tensor.Tensor {
			v, err := flat.View(off, shape...)
			must(t, err)
			return v
		}
		w1, w2, w3 := view(0, 2, 4), view(8, 16), view(27, 3) // w3 unaligned
		other := tensortest.Upload(t, b, tensor.F32, vals[:5], 5)
		cb := &castCounter{Backend: b}
		c := NewWeightCache(cb, tensor.BF16)
		defer c.Free()
		c.SetFlat(flat)
		ref := NewWeightCache(b, tensor.BF16)
		defer ref.Free()
		for step := 1; step <= 2; step++ {
			before := cb.casts
			var first *tensor.Tensor
			for range 3 {
				for i, w := range []*tensor.Tensor{w1, w2, w3, other} {
					h, err := c.Get(w)
					must(t, err)
					want, err := ref.Get(w)
					must(t, err)
					if !slices.Equal(tensortest.Download(t, b, h), tensortest.Download(t, b, want)) || !h.Shape.Equal(w.Shape) {
						t.Fatalf("weight %d: flat copy differs from its own cast", i)
					}
					if i == 0 && first == nil {
						first = h
					} else if i == 0 && h != first {
						t.Fatal("Get returned a different view for the same weight")
					}
				}
			}
			if got := cb.casts - before; got != 3 { // the flat buffer, w3, other
				t.Fatalf("step %d: %d casts, want 3", step, got)
			}
			c.Invalidate()
			ref.Invalidate()
		}
		moved := tensortest.Upload(t, b, tensor.F32, vals, 40)
		c.SetFlat(moved)
		w, err := moved.View(8, 16)
		must(t, err)
		h, err := c.Get(w)
		must(t, err)
		if h.Buf == nil || !slices.Equal(tensortest.Download(t, b, h), tensortest.Download(t, b, mustGet(t, ref, w2))) {
			t.Fatal("after SetFlat of another buffer the view does not hold its weight")
		}
	})
}

func mustGet(t *testing.T, c *WeightCache, w *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	h, err := c.Get(w)
	must(t, err)
	return h
}
