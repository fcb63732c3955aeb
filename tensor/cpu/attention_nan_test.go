package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestSoftmaxRowsNaN checks that the AVX-512 block softmax propagates NaN on every row length up to 33 (the
// masked tail of 1…15 columns, whose unused lanes hold −Inf, is where VMAXPS alone lost it): a row with one
// NaN, an all-NaN row and a NaN beside −Inf-masked keys give mx = NaN and a NaN row; a finite row and a fully
// masked row beside them keep their results.
func TestSoftmaxRowsNaN(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for cols := 1; cols <= 33; cols++ {
		// rows: 0 one NaN (last column), 1 all NaN, 2 NaN at column 0 and −Inf elsewhere, 3 finite, 4 all −Inf.
		const rows = 5
		s := make([]float32, rows*cols)
		for j := 0; j < cols; j++ {
			s[j] = 0.5 + float32(j)/8
			s[cols+j] = nan
			s[2*cols+j] = inf
			s[3*cols+j] = float32(j) / 4
			s[4*cols+j] = inf
		}
		s[cols-1], s[2*cols] = nan, nan
		mx, sum := make([]float32, rows), make([]float32, rows)
		softmaxRowsAVX512(&s[0], rows, cols, nil, nil, &mx[0], &sum[0])
		for r := 0; r < 3; r++ {
			if !isNaN32(mx[r]) || !isNaN32(sum[r]) {
				t.Fatalf("cols %d row %d: max %v, sum %v; want NaN", cols, r, mx[r], sum[r])
			}
			for j, v := range s[r*cols : (r+1)*cols] {
				if !isNaN32(v) {
					t.Fatalf("cols %d row %d: P[%d] = %v, want NaN", cols, r, j, v)
				}
			}
		}
		if want := float32(cols-1) / 4; mx[3] != want {
			t.Fatalf("cols %d: finite row's max %v, want %v", cols, mx[3], want)
		}
		if !math.IsInf(float64(mx[4]), -1) || sum[4] != 0 {
			t.Fatalf("cols %d: fully masked row: max %v, sum %v; want −Inf, 0", cols, mx[4], sum[4])
		}
	}
}

// TestAttentionNaN checks NaN propagation through both fused attention kernels (the reference and, where the
// processor has AVX-512, the fast one): a NaN score of a pair the row may see makes the row's O, LSE and dQ NaN
// (PyTorch's softmax gives a NaN row), whatever the row length (Tk below 16 is the AVX-512 kernel's masked
// tail), with padding masks (NaN + −Inf is NaN), causal masks and grouped-query heads; rows that see no NaN
// stay finite. The NaN is a whole query row of Q (all of that row's scores) or one element of a key (every
// row that sees that key).
func TestAttentionNaN(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []attnCase{
		{name: "short rows", B: 2, Hq: 2, Hkv: 1, Tq: 7, Tk: 7, D: 16, mask: true},
		{name: "long rows", B: 2, Hq: 2, Hkv: 2, Tq: 33, Tk: 33, D: 16, mask: true, p: 0.1},
		{name: "causal", B: 2, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 8, causal: true},
		{name: "causal long", B: 2, Hq: 2, Hkv: 1, Tq: 20, Tk: 20, D: 8, causal: true},
	} {
		for _, fast := range []bool{false, true} {
			if fast && !hasSIMD {
				continue
			}
			t.Run(fmt.Sprintf("%s fast=%v", c.name, fast), func(t *testing.T) {
				rng := newRNG(t)
				mask, seg := c.inputs(rng)
				pr := &attnProblem[float32]{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: c.Tq, Tk: c.Tk, D: c.D,
					scale: float32(1 / math.Sqrt(float64(c.D))), mask: mask, seg: seg, causal: c.causal, p: c.p, seed: 7, offset: 3}
				nq, nk := c.B*c.Hq*c.Tq*c.D, c.B*c.Hkv*c.Tk*c.D
				q, k, v, g := f32s(randn(rng, nq, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nq, 1))
				// Batch member 0: query row 2 of head 1 is NaN. Batch member 1: key 3 of key/value head 0 has a
				// NaN element, so every row that sees key 3 (all, or i ≥ 3 when causal) is NaN.
				qrow := ((0*c.Hq+1)*c.Tq + 2) * c.D
				for d := 0; d < c.D; d++ {
					q[qrow+d] = nan
				}
				k[((1*c.Hkv+0)*c.Tk+3)*c.D+1] = nan
				wantNaN := func(b, h, i int) bool {
					if b == 0 {
						return h == 1 && i == 2
					}
					return h/(c.Hq/c.Hkv) == 0 && (!c.causal || i >= 3)
				}
				o, lse := make([]float32, nq), make([]float32, c.B*c.Hq*c.Tq)
				dq, dk, dv := make([]float32, nq), make([]float32, nk), make([]float32, nk)
				if fast {
					dn := func(x []float32, h, t int) attnView { return denseView(x, h, t, c.D) }
					attnForwardFast(pr, dn(o, c.Hq, c.Tq), lse, dn(q, c.Hq, c.Tq), dn(k, c.Hkv, c.Tk), dn(v, c.Hkv, c.Tk))
					attnBackwardFast(pr, dn(dq, c.Hq, c.Tq), dn(dk, c.Hkv, c.Tk), dn(dv, c.Hkv, c.Tk), dn(q, c.Hq, c.Tq),
						dn(k, c.Hkv, c.Tk), dn(v, c.Hkv, c.Tk), lse, dn(g, c.Hq, c.Tq))
				} else {
					attnForwardKernel(pr, o, lse, q, k, v)
					attnBackwardKernel(pr, dq, dk, dv, q, k, v, o, lse, g)
				}
				for b := 0; b < c.B; b++ {
					for h := 0; h < c.Hq; h++ {
						for i := 0; i < c.Tq; i++ {
							row := (b*c.Hq+h)*c.Tq + i
							want := wantNaN(b, h, i)
							if isNaN32(lse[row]) != want {
								t.Fatalf("(b %d, h %d, i %d): LSE %v, want NaN %v", b, h, i, lse[row], want)
							}
							// A causal row before key 3 does not see it, but dQ = dS·K multiplies its dS = 0 by the
							// NaN of K (a GEMM gives NaN, a kernel that skips forbidden pairs does not): not checked.
							open := !want && b == 1 && h/(c.Hq/c.Hkv) == 0
							for d := 0; d < c.D; d++ {
								if isNaN32(o[row*c.D+d]) != want || !open && isNaN32(dq[row*c.D+d]) != want {
									t.Fatalf("(b %d, h %d, i %d) d %d: O %v, dQ %v, want NaN %v", b, h, i, d, o[row*c.D+d], dq[row*c.D+d], want)
								}
							}
						}
					}
				}
				// Every key of a head that a NaN row sees gets NaN gradients (dS and P' of that row are NaN); the
				// heads no NaN row reaches stay finite.
				for b := 0; b < c.B; b++ {
					for kh := 0; kh < c.Hkv; kh++ {
						reached := false
						for h := kh * (c.Hq / c.Hkv); h < (kh+1)*(c.Hq/c.Hkv); h++ {
							for i := 0; i < c.Tq; i++ {
								reached = reached || wantNaN(b, h, i)
							}
						}
						base := (b*c.Hkv + kh) * c.Tk * c.D
						if !reached {
							for e := base; e < base+c.Tk*c.D; e++ {
								if isNaN32(dk[e]) || isNaN32(dv[e]) {
									t.Fatalf("(b %d, kv head %d): dK %v, dV %v at %d; no NaN row reaches it", b, kh, dk[e], dv[e], e-base)
								}
							}
						} else if !isNaN32(dk[base]) || !isNaN32(dv[base]) {
							t.Fatalf("(b %d, kv head %d): key 0's dK %v, dV %v; want NaN", b, kh, dk[base], dv[base])
						}
					}
				}
			})
		}
	}
}
