//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestDecoderOpsMatchCPUOnAlignedLayouts runs the decoder ops on aligned Llama-like tensors (hidden 2048 and
// head size 64: the vectorized paths) in each float dtype and compares with the CPU reference holding the same
// dtypes: bit for bit where both do the same FP32 operations (RoPE), within a unit or two in the last place
// where expf/tanhf or a reduction order differs.
func TestDecoderOpsMatchCPUOnAlignedLayouts(t *testing.T) {
	const N, C, I = 300, 2048, 1024
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			cases := []struct {
				name string
				f    func(r *rig)
			}{
				{"RMSNorm (F32 weight, dt and F32 outputs) and its backward", func(r *rig) {
					x, w := r.in(dt, 2, N, C), r.in(tensor.F32, 1, C)
					o, o32, rs := r.out(dt, N, C), r.out(tensor.F32, N, C), r.out(tensor.F32, N)
					d, dx, dw := r.in(dt, 1, N, C), r.out(dt, N, C), r.acc(tensor.F32, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.RMSNorm(p(o32), p(rs), p(x), p(w), 1e-5); err != nil {
							return err
						}
						return b.RMSNorm(p(o), p(rs), p(x), p(w), 1e-5)
					})
					r.check("out", o, false)
					// An F32 output holds w·round_x(x·rstd): where the two backends' rstd (summed in other
					// orders) put x·rstd on either side of a rounding boundary of x's dtype, the outputs
					// differ by one unit of x's dtype, so that is the bound, not F32's.
					checkWithin(r, "out F32", o32, map[tensor.DType]float64{tensor.F32: 2e-5, tensor.F16: 1.5e-3, tensor.BF16: 1e-2}[dt])
					r.check("rstd", rs, false)
					// The weight gradient sums dout·round_x(x·rstd) over the rows, so the same rounding-boundary
					// flips carry the forward's rstd difference into it: with each backend's own rstd, a flip of
					// one unit of a half x̂ in a term of size ~1 moves a column of N = 300 such terms by ~1e-4 of
					// (|ref| + rms) in F16 and ~1e-3 in BF16 — what the GPU showed (4e-5 F16, 8.5e-5 BF16, in the
					// columns where a row flipped, none elsewhere: both backends round x̂). Both backward passes
					// read the CPU's rstd instead, so they compute from identical inputs and only their FP32
					// summation orders differ: F32's bound holds.
					shareFromCPU(r, rs)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						return b.RMSNormBackward(p(dx), p(dw), p(d), p(x), p(w), p(rs))
					})
					r.check("dx", dx, false)
					r.check("dweight", dw, false)
				}},
				{"CrossEntropy over a 49152-word vocabulary (a block per row, four per access) and its backward", func(r *rig) {
					const n, v = 37, 49152
					labels := make([]int64, n)
					for i := range labels {
						labels[i] = int64(r.rng.IntN(v))
						if i%7 == 3 {
							labels[i] = -100
						}
					}
					lg, ls, dl := r.in(dt, 3, n, v), r.out(tensor.F32, n), r.out(dt, n, v)
					lab := r.ids(tensor.I64, labels)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						c, err := b.CrossEntropy(p(ls), p(lg), p(lab), -100)
						if err != nil {
							return err
						}
						return b.CrossEntropyBackward(p(dl), p(lg), p(lab), 1.0/float32(c), -100, nil)
					})
					r.check("losses", ls, false)
					r.check("dlogits", dl, false)
				}},
				{"ArgMax over a 49152-word vocabulary (a block per row): ties, NaN and -Inf rows, exact", func(r *rig) {
					const n, v = 9, 49152
					vals := r.normal(n*v, 2)
					for j := 0; j < v; j++ {
						vals[1*v+j] = float32(j % 7) // ties: the first 6 wins
						vals[3*v+j] = float32(math.Inf(-1))
					}
					vals[2*v+40000], vals[2*v+12] = nan, nan // the first NaN wins
					vals[5*v+v-1] = 1e4                      // the last entry
					lg := r.with(dt, vals, false, n, v)
					idx := r.ids(tensor.I32, make([]int64, n))
					poison := make([]int32, n)
					for i := range poison {
						poison[i] = -7 // the GPU must overwrite every row
					}
					if err := r.gpu.Upload(idx.g, poison); err != nil {
						r.t.Fatal(err)
					}
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error { return b.ArgMax(p(idx), p(lg)) })
					g, c := make([]int32, n), make([]int32, n)
					if err := r.gpu.Download(g, idx.g); err != nil {
						r.t.Fatal(err)
					}
					if err := r.cpu.Download(c, idx.c); err != nil {
						r.t.Fatal(err)
					}
					if !slices.Equal(g, c) || c[1] != 6 || c[2] != 12 || c[3] != 0 || c[5] != v-1 {
						r.t.Errorf("argmax: GPU %v, CPU %v (want row 1 → 6, row 2 → 12, row 3 → 0, row 5 → %d)", g, c, v-1)
					}
				}},
				{"RMSNorm over heads (Qwen3 q/k norm, D=128, dt weight)", func(r *rig) {
					x, w := r.in(dt, 1, N*16, 128), r.in(dt, 1, 128)
					o, rs := r.out(dt, N*16, 128), r.out(tensor.F32, N*16)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						return b.RMSNorm(p(o), p(rs), p(x), p(w), 1e-6)
					})
					r.check("out", o, false)
				}},
				{"SwiGLU and its backward", func(r *rig) {
					g, u, d := r.in(dt, 3, N, I), r.in(dt, 1, N, I), r.in(dt, 1, N, I)
					o, dg, du := r.out(dt, N, I), r.out(dt, N, I), r.out(dt, N, I)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.SwiGLU(p(o), p(g), p(u)); err != nil {
							return err
						}
						return b.SwiGLUBackward(p(dg), p(du), p(d), p(g), p(u))
					})
					r.check("out", o, false)
					r.check("dgate", dg, false)
					r.check("dup", du, false)
				}},
				{"GELUTanh and its backward", func(r *rig) {
					x, d, o, dx := r.in(dt, 3, N, I), r.in(dt, 1, N, I), r.out(dt, N, I), r.out(dt, N, I)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.GELUTanh(p(o), p(x)); err != nil {
							return err
						}
						return b.GELUTanhBackward(p(dx), p(d), p(x))
					})
					r.check("out", o, false)
					r.check("dx", dx, false)
				}},
				{"RoPE and its inverse on q and k of a fused (B, T, 3, H, D) buffer", func(r *rig) {
					const B, T, H, D, P = 2, 37, 8, 64, 64
					qkv := r.in(dt, 1, B, T, 3, H, D)
					pos := make([]int64, B*T)
					for i := range pos {
						pos[i] = int64((i*7 + 3) % P)
					}
					ps := r.ids(tensor.I32, pos)
					cv, sv := make([]float32, P*D/2), make([]float32, P*D/2)
					for p := 0; p < P; p++ {
						for i := 0; i < D/2; i++ {
							a := float64(p) * math.Pow(500000, -float64(2*i)/D)
							cv[p*D/2+i], sv[p*D/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
						}
					}
					c, s := r.with(tensor.F32, cv, false, P, D/2), r.with(tensor.F32, sv, false, P, D/2)
					for _, inverse := range []bool{false, true} {
						r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
							for part := 0; part < 2; part++ {
								v, err := p(qkv).View(part*H*D, B*T*3*H*D-part*H*D)
								if err != nil {
									return err
								}
								op := tensor.AttnOperand{T: v, StrideB: T * 3 * H * D, StrideH: D, StrideT: 3 * H * D}
								if err := b.RoPE(op, B, H, T, D, p(ps), p(c), p(s), inverse); err != nil {
									return err
								}
							}
							return nil
						})
						r.check("qkv", qkv, true)
					}
				}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					r := newRig(t)
					defer r.close()
					c.f(r)
				})
			}
		})
	}
}

// TestRoPEPositionOutsideTablesIsNaN: the CUDA backend does not read positions on the host, so a position
// outside the tables must poison its rows (NaN) rather than read out of bounds or leave them unrotated.
func TestRoPEPositionOutsideTablesIsNaN(t *testing.T) {
	gpu := openOrSkip(t)
	x, _ := gpu.Alloc(tensor.F32, 1, 1, 2, 4)
	pos, _ := gpu.Alloc(tensor.I32, 1, 2)
	tab, _ := gpu.Alloc(tensor.F32, 3, 2)
	defer func() {
		for _, v := range []*tensor.Tensor{x, pos, tab} {
			gpu.Free(v)
		}
	}()
	if err := gpu.Upload(x, []float32{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Upload(pos, []int32{0, 3}); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Upload(tab, []float32{1, 1, 1, 1, 1, 1}); err != nil { // cos = sin = 1 for every row
		t.Fatal(err)
	}
	if err := gpu.RoPE(tensor.AttnOperand{T: x}, 1, 1, 2, 4, pos, tab, tab, false); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 8)
	if err := gpu.Download(got, x); err != nil {
		t.Fatal(err)
	}
	want := []float32{1 - 3, 2 - 4, 3 + 1, 4 + 2} // row 0: x1·1 − x2·1, x2·1 + x1·1
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("row 0 = %v, want %v", got[:4], want)
		}
	}
	for i := 4; i < 8; i++ {
		if !math.IsNaN(float64(got[i])) {
			t.Fatalf("row 1 (position 3 of a 3-row table) = %v, want NaN", got[4:])
		}
	}
}

// shareFromCPU copies the CPU's contents of x to the GPU's copy, so that a following op reads the same input on
// both backends.
func shareFromCPU(r *rig, x twin) {
	r.t.Helper()
	v := make([]float32, x.c.Numel())
	if err := r.cpu.Download(v, x.c); err != nil {
		r.t.Fatal(err)
	}
	if err := r.gpu.Upload(x.g, v); err != nil {
		r.t.Fatal(err)
	}
}

// checkWithin compares a twin's contents as rig.check does, with tolerance tol: |gpu − cpu| ≤ tol·(|cpu| +
// rms(cpu)).
func checkWithin(r *rig, name string, x twin, tol float64) {
	r.t.Helper()
	n := x.c.Numel()
	g, c := make([]float32, n), make([]float32, n)
	if err := r.gpu.Download(g, x.g); err != nil {
		r.t.Fatal(err)
	}
	if err := r.cpu.Download(c, x.c); err != nil {
		r.t.Fatal(err)
	}
	var ss float64
	for _, v := range c {
		ss += float64(v) * float64(v)
	}
	rms := math.Sqrt(ss / float64(max(n, 1)))
	for i := range c {
		if d := math.Abs(float64(g[i] - c[i])); !(d <= tol*(math.Abs(float64(c[i]))+rms)) {
			r.t.Fatalf("%s[%d] = %v on the GPU, %v on the CPU (tolerance %g·(|ref| + rms %.3g))", name, i, g[i], c[i], tol, rms)
		}
	}
}

// TestResidualRMSNormBackwardOnePass: the one-pass kernel (the default) gives the two-pass path's dx and
// half copy bit for bit and its weight gradient within FP32 summation rounding, deterministically, on SmolLM2's
// and Qwen2.5-0.5B's widths with a partial last block of rows (the default path takes C > 1024).
func TestResidualRMSNormBackwardOnePass(t *testing.T) {
	gpu := openOrSkip(t)
	rng := rand.New(rand.NewPCG(5, 7))
	for _, c := range []int{576, 896, 1100} {
		for _, acc := range []bool{false, true} {
			const n = 1003
			vals := func(k int, s float64) []float32 {
				v := make([]float32, k)
				for i := range v {
					v[i] = float32(s * rng.NormFloat64())
				}
				return v
			}
			x, dout, g0, w, w0 := vals(n*c, 2), vals(n*c, 1), vals(n*c, 1), vals(c, 1), vals(c, 1)
			up := func(dt tensor.DType, v []float32, shape ...int) *tensor.Tensor {
				tt, err := gpu.Alloc(dt, shape...)
				if err != nil {
					t.Fatal(err)
				}
				if err := gpu.Upload(tt, v); err != nil {
					t.Fatal(err)
				}
				return tt
			}
			xt, dt, wt := up(tensor.F32, x, n, c), up(tensor.F32, dout, n, c), up(tensor.F32, w, c)
			rstd, _ := gpu.Alloc(tensor.F32, n)
			sum, _ := gpu.Alloc(tensor.F32, n, c)
			out, _ := gpu.Alloc(tensor.BF16, n, c)
			zero, _ := gpu.Alloc(tensor.F32, n, c)
			if err := gpu.ResidualRMSNorm(tensor.ResidualRMSNormArgs{Sum: sum, Out: out, Rstd: rstd, X: xt, Y: zero, Weight: wt, Eps: 1e-5}); err != nil {
				t.Fatal(err)
			}
			run := func(onePass bool) (dx, dh, dw []float32) {
				old := cuda.SetRMSNormBwdOnePass(onePass)
				defer cuda.SetRMSNormBwdOnePass(old)
				g, h, gw := up(tensor.F32, g0, n, c), up(tensor.BF16, make([]float32, n*c), n, c), up(tensor.F32, w0, c)
				defer func() { gpu.Free(g); gpu.Free(h); gpu.Free(gw) }()
				if err := gpu.ResidualRMSNormBackward(tensor.ResidualRMSNormBackwardArgs{DX: g, DXHalf: h, DWeight: gw, DOut: dt, X: sum,
					Weight: wt, Rstd: rstd, Accumulate: acc}); err != nil {
					t.Fatal(err)
				}
				dx, dh, dw = make([]float32, n*c), make([]float32, n*c), make([]float32, c)
				for _, p := range []struct {
					dst []float32
					src *tensor.Tensor
				}{{dx, g}, {dh, h}, {dw, gw}} {
					if err := gpu.Download(p.dst, p.src); err != nil {
						t.Fatal(err)
					}
				}
				return dx, dh, dw
			}
			dx0, dh0, dw0 := run(false)
			dx1, dh1, dw1 := run(true)
			_, _, dw2 := run(true)
			for i := range dx0 {
				if math.Float32bits(dx0[i]) != math.Float32bits(dx1[i]) || math.Float32bits(dh0[i]) != math.Float32bits(dh1[i]) {
					t.Fatalf("C=%d accumulate=%v: dx[%d] %v / %v one-pass, %v / %v default", c, acc, i, dx1[i], dh1[i], dx0[i], dh0[i])
				}
			}
			var rms float64
			for _, v := range dw0 {
				rms += float64(v) * float64(v)
			}
			rms = math.Sqrt(rms / float64(c))
			for i := range dw0 {
				if math.Abs(float64(dw1[i]-dw0[i])) > 1e-5*(math.Abs(float64(dw0[i]))+rms) || math.Float32bits(dw1[i]) != math.Float32bits(dw2[i]) {
					t.Fatalf("C=%d accumulate=%v: dweight[%d] %v one-pass (%v again), %v default", c, acc, i, dw1[i], dw2[i], dw0[i])
				}
			}
			for _, v := range []*tensor.Tensor{xt, dt, wt, rstd, sum, out, zero} {
				gpu.Free(v)
			}
		}
	}
}
