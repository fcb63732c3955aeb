//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// twin is one tensor argument held on the GPU (g) and on the CPU reference (c) with the same values.
type twin struct{ g, c *tensor.Tensor }

// rig creates twins for an op-parity test. Unlike tensortest's suite (every view unaligned, extents 1..33),
// its tensors start at aligned addresses and have BERT-like extents, so the kernels' vectorized paths (four
// elements per access) and multi-block reductions are the ones exercised.
type rig struct {
	t        *testing.T
	gpu, cpu tensor.Backend
	rng      *rand.Rand
	owned    []twin
}

func newRig(t *testing.T) *rig {
	return &rig{t: t, gpu: openOrSkip(t), cpu: cpu.New(), rng: rand.New(rand.NewPCG(11, uint64(len(t.Name()))))}
}

func (r *rig) close() {
	for _, x := range r.owned {
		r.gpu.Free(x.g)
		r.cpu.Free(x.c)
	}
}

// with uploads vals (rounded to dt) to both backends; poison replaces the GPU's copy with NaN.
func (r *rig) with(dt tensor.DType, vals []float32, poison bool, shape ...int) twin {
	r.t.Helper()
	var x twin
	var err error
	if x.g, err = r.gpu.Alloc(dt, shape...); err != nil {
		r.t.Fatal(err)
	}
	if x.c, err = r.cpu.Alloc(dt, shape...); err != nil {
		r.t.Fatal(err)
	}
	r.owned = append(r.owned, x)
	gv := vals
	if poison {
		gv = make([]float32, len(vals))
		for i := range gv {
			gv[i] = nan
		}
	}
	if err := r.gpu.Upload(x.g, gv); err != nil {
		r.t.Fatal(err)
	}
	if err := r.cpu.Upload(x.c, vals); err != nil {
		r.t.Fatal(err)
	}
	return x
}

func (r *rig) normal(n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(s * r.rng.NormFloat64())
	}
	return v
}

// in is a random input; acc a random accumulator (+=); out an output, NaN on the GPU before the op.
func (r *rig) in(dt tensor.DType, s float64, shape ...int) twin {
	return r.with(dt, r.normal(tensor.Shape(shape).Numel(), s), false, shape...)
}
func (r *rig) acc(dt tensor.DType, shape ...int) twin { return r.in(dt, 1, shape...) }
func (r *rig) out(dt tensor.DType, shape ...int) twin {
	return r.with(dt, make([]float32, tensor.Shape(shape).Numel()), true, shape...)
}

// ids uploads integer ids to both backends.
func (r *rig) ids(dt tensor.DType, v []int64) twin {
	r.t.Helper()
	var x twin
	x.g, _ = r.gpu.Alloc(dt, len(v))
	x.c, _ = r.cpu.Alloc(dt, len(v))
	r.owned = append(r.owned, x)
	var src any = v
	if dt == tensor.I32 {
		v32 := make([]int32, len(v))
		for i := range v {
			v32[i] = int32(v[i])
		}
		src = v32
	}
	for _, t := range []struct {
		b tensor.Backend
		x *tensor.Tensor
	}{{r.gpu, x.g}, {r.cpu, x.c}} {
		if err := t.b.Upload(t.x, src); err != nil {
			r.t.Fatal(err)
		}
	}
	return x
}

// run calls op on both backends (pick selects a twin's tensor for the backend).
func (r *rig) run(op func(b tensor.Backend, pick func(twin) *tensor.Tensor) error) {
	r.t.Helper()
	if err := op(r.gpu, func(x twin) *tensor.Tensor { return x.g }); err != nil {
		r.t.Fatalf("GPU: %v", err)
	}
	if err := op(r.cpu, func(x twin) *tensor.Tensor { return x.c }); err != nil {
		r.t.Fatalf("CPU: %v", err)
	}
}

// check compares a twin's contents. exact demands identical values (NaN equal to NaN), else
// |gpu − cpu| ≤ tol(dtype)·(|cpu| + rms(cpu)).
func (r *rig) check(name string, x twin, exact bool) {
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
		if !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v)) {
			ss += float64(v) * float64(v)
		}
	}
	rms := math.Sqrt(ss / float64(max(n, 1)))
	tol := map[tensor.DType]float64{tensor.F32: 2e-5, tensor.F16: 1.5e-3, tensor.BF16: 1e-2}[x.c.DType]
	for i := range c {
		same := g[i] == c[i] || (g[i] != g[i] && c[i] != c[i])
		if exact && !same {
			r.t.Fatalf("%s[%d] = %v on the GPU, %v on the CPU (the same arithmetic must give the same value)", name, i, g[i], c[i])
		}
		if !exact && !same && !(math.Abs(float64(g[i]-c[i])) <= tol*(math.Abs(float64(c[i]))+rms)) {
			r.t.Fatalf("%s[%d] = %v on the GPU, %v on the CPU (tolerance %g·(|ref| + rms %.3g))", name, i, g[i], c[i], tol, rms)
		}
	}
}

// TestOpsMatchCPUOnAlignedLayouts runs every non-GEMM op on aligned BERT-sized tensors in each float dtype
// and compares with the CPU reference: bit for bit where both backends do the same FP32 operations
// (elementwise arithmetic, casts, dropout, gathers, scatter-adds, AdamW), within a unit or two in the last
// place of the output dtype where a transcendental function or a reduction order differs.
func TestOpsMatchCPUOnAlignedLayouts(t *testing.T) {
	const N, C = 37, 768 // rows of activations, hidden size (C % 4 == 0: vectorized paths)
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			cases := []struct {
				name string
				f    func(r *rig)
			}{
				{"Cast F32→dt and back", func(r *rig) {
					x, y, z := r.in(tensor.F32, 100, N, C), r.out(dt, N, C), r.out(tensor.F32, N, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.Cast(p(y), p(x)); err != nil {
							return err
						}
						return b.Cast(p(z), p(y))
					})
					r.check("y", y, true)
					r.check("z", z, true)
				}},
				{"Scale, Add, Axpy", func(r *rig) {
					a, c, o := r.in(dt, 1, N, C), r.in(tensor.BF16, 1, N, C), r.out(dt, N, C)
					s := r.acc(dt, N, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.Add(p(o), p(a), p(c)); err != nil {
							return err
						}
						if err := b.Scale(p(o), 0.37); err != nil {
							return err
						}
						return b.Axpy(p(s), p(o), -1.25)
					})
					r.check("out", o, true)
					r.check("y", s, true)
				}},
				{"GELU and its backward", func(r *rig) {
					x, d, o, dx := r.in(dt, 2, N, C), r.in(dt, 1, N, C), r.out(dt, N, C), r.out(dt, N, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.GELU(p(o), p(x)); err != nil {
							return err
						}
						return b.GELUBackward(p(dx), p(d), p(x))
					})
					r.check("out", o, false)
					r.check("dx", dx, false)
				}},
				{"Tanh and its backward", func(r *rig) {
					x, d, o, dx := r.in(dt, 2, N, C), r.in(dt, 1, N, C), r.out(dt, N, C), r.out(dt, N, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.Tanh(p(o), p(x)); err != nil {
							return err
						}
						return b.TanhBackward(p(dx), p(d), p(x))
					})
					r.check("out", o, false)
					r.check("dx", dx, true)
				}},
				{"Dropout p=0.1 and its backward at a stream offset", func(r *rig) {
					x, o, dx := r.in(dt, 1, N, C), r.out(dt, N, C), r.out(dt, N, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.Dropout(p(o), p(x), 0.1, 0x9E3779B97F4A7C15, 12345); err != nil {
							return err
						}
						return b.DropoutBackward(p(dx), p(x), 0.1, 0x9E3779B97F4A7C15, 12345)
					})
					r.check("out", o, true)
					r.check("dx", dx, true)
				}},
				{"BiasAdd and BiasGrad over 2600 rows (11 chunks of colsum)", func(r *rig) {
					y, bias, dy, db := r.acc(dt, N, C), r.in(tensor.F32, 1, C), r.in(dt, 1, 2600, C), r.acc(tensor.F32, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.BiasAdd(p(y), p(bias)); err != nil {
							return err
						}
						return b.BiasGrad(p(db), p(dy))
					})
					r.check("y", y, true)
					r.check("dbias", db, false)
				}},
				{"LayerNorm and its backward over 1000 rows", func(r *rig) {
					const n = 1000
					x, g, be := r.in(dt, 3, n, C), r.in(tensor.F32, 1, C), r.in(tensor.F32, 1, C)
					o, m, rs := r.out(dt, n, C), r.out(tensor.F32, n), r.out(tensor.F32, n)
					d, dx, dg, db := r.in(dt, 1, n, C), r.out(dt, n, C), r.acc(tensor.F32, C), r.acc(tensor.F32, C)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.LayerNorm(p(o), p(m), p(rs), p(x), p(g), p(be), 1e-12); err != nil {
							return err
						}
						return b.LayerNormBackward(p(dx), p(dg), p(db), p(d), p(x), p(g), p(m), p(rs))
					})
					r.check("out", o, false)
					r.check("mean", m, false)
					r.check("rstd", rs, false)
					r.check("dx", dx, false)
					r.check("dgamma", dg, false)
					r.check("dbeta", db, false)
				}},
				{"Softmax with a padding mask and its backward", func(r *rig) {
					const B, R, T = 4, 12 * 8, 128
					x, y, dy, dx := r.in(dt, 3, B, R, T), r.out(dt, B, R, T), r.in(dt, 1, B, R, T), r.out(dt, B, R, T)
					mv := make([]float32, B*T)
					for i := range mv {
						if i%T > 100-20*(i/T) {
							mv[i] = float32(math.Inf(-1))
						}
					}
					mask := r.with(tensor.F32, mv, false, B, T)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.Softmax(p(y), p(x), p(mask)); err != nil {
							return err
						}
						return b.SoftmaxBackward(p(dx), p(dy), p(y))
					})
					r.check("y", y, false)
					r.check("dx", dx, false)
				}},
				{"CrossEntropy over a 30522-word vocabulary with ignored rows", func(r *rig) {
					const n, v = 64, 30522
					labels := make([]int64, n)
					for i := range labels {
						labels[i] = int64(r.rng.IntN(v))
						if i%5 == 0 {
							labels[i] = -100
						}
					}
					lg, ls, dl := r.in(dt, 2, n, v), r.out(tensor.F32, n), r.out(dt, n, v)
					lab := r.ids(tensor.I64, labels)
					var counts [2]int
					k := 0
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						c, err := b.CrossEntropy(p(ls), p(lg), p(lab), -100)
						counts[k], k = c, k+1
						if err != nil {
							return err
						}
						return b.CrossEntropyBackward(p(dl), p(lg), p(lab), 1.0/float32(c), -100, nil)
					})
					if counts[0] != counts[1] {
						t.Errorf("count: GPU %d, CPU %d", counts[0], counts[1])
					}
					r.check("losses", ls, false)
					r.check("dlogits", dl, false)
				}},
				{"Embedding and EmbeddingBackward with repeated ids", func(r *rig) {
					const v, n = 1000, 300
					idv := make([]int64, n)
					for i := range idv {
						idv[i] = int64(r.rng.IntN(50)) // many repeats
					}
					table, o, dtab, d := r.in(dt, 1, v, C), r.out(dt, n, C), r.acc(dt, v, C), r.in(dt, 1, n, C)
					ids := r.ids(tensor.I32, idv)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.Embedding(p(o), p(ids), p(table)); err != nil {
							return err
						}
						return b.EmbeddingBackward(p(dtab), p(ids), p(d))
					})
					r.check("out", o, true)
					r.check("dtable", dtab, true)
				}},
				{"EmbeddingBackward with groups split into chunks, the same on every run", func(r *rig) {
					// token-type-like: id 0 owns most rows (a group cut into √n-row chunks), ids 1 and 7
					// the rest (1 with exactly 33 rows: the smallest split group), a few singletons.
					const v, n = 40, 3000
					idv := make([]int64, n)
					for i := range idv {
						switch {
						case i%90 == 5 && i < 33*90:
							idv[i] = 1
						case i%97 == 3:
							idv[i] = 7
						case i >= 2990:
							idv[i] = int64(10 + i - 2990)
						}
					}
					dtab, d := r.acc(dt, v, C), r.in(dt, 1, n, C)
					first := r.acc(dt, v, C)
					ids := r.ids(tensor.I32, idv)
					if err := r.gpu.Copy(first.g, dtab.g); err != nil {
						r.t.Fatal(err)
					}
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						return b.EmbeddingBackward(p(dtab), p(ids), p(d))
					})
					r.check("dtable", dtab, false)
					if err := r.gpu.EmbeddingBackward(first.g, ids.g, d.g); err != nil {
						r.t.Fatal(err)
					}
					a, bb := make([]float32, v*C), make([]float32, v*C)
					if err := r.gpu.Download(a, dtab.g); err != nil {
						r.t.Fatal(err)
					}
					if err := r.gpu.Download(bb, first.g); err != nil {
						r.t.Fatal(err)
					}
					for i := range a {
						if math.Float32bits(a[i]) != math.Float32bits(bb[i]) {
							r.t.Fatalf("dtable[%d]: %v then %v from the same inputs", i, a[i], bb[i])
						}
					}
				}},
				{"Transpose12 (B, T, H, D) → (B, H, T, D)", func(r *rig) {
					x, o := r.in(dt, 1, 2, 128, 12, 64), r.out(dt, 2, 12, 128, 64)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						return b.Transpose12(p(o), p(x), 2, 128, 12, 64)
					})
					r.check("out", o, true)
				}},
				{"MSELoss and its backward", func(r *rig) {
					pr, tg, l, dp := r.in(dt, 1, 4096), r.in(dt, 1, 4096), r.out(tensor.F32, 4096), r.out(dt, 4096)
					r.run(func(b tensor.Backend, p func(twin) *tensor.Tensor) error {
						if err := b.MSELoss(p(l), p(pr), p(tg)); err != nil {
							return err
						}
						return b.MSELossBackward(p(dp), p(pr), p(tg), 1.0/4096, nil)
					})
					r.check("losses", l, true)
					r.check("dpred", dp, true)
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

// TestOptimizerOpsMatchCPU checks the multi-tensor ops on buffers larger than one 65536-element work chunk:
// GlobalNorm (float64 partials), the fused non-finite check and unscale, and AdamW, which must agree with the
// CPU reference bit for bit.
func TestOptimizerOpsMatchCPU(t *testing.T) {
	r := newRig(t)
	defer r.close()
	a, b, c := r.in(tensor.F32, 1, 300001), r.in(tensor.BF16, 2, 768, 768), r.in(tensor.F32, 1, 7)
	var norms [2]float64
	k := 0
	r.run(func(bk tensor.Backend, p func(twin) *tensor.Tensor) error {
		n, err := bk.GlobalNorm([]*tensor.Tensor{p(a), p(b), p(c)})
		norms[k], k = n, k+1
		return err
	})
	if math.Abs(norms[0]-norms[1]) > 1e-12*norms[1] {
		t.Errorf("GlobalNorm: GPU %.17g, CPU %.17g", norms[0], norms[1])
	}

	gv := r.normal(200000, 1000)
	gv[123456] = float32(math.Inf(1))
	g := r.with(tensor.F32, gv, false, 200000)
	var found [2]bool
	k = 0
	r.run(func(bk tensor.Backend, p func(twin) *tensor.Tensor) error {
		f, err := bk.NonFiniteCheckAndUnscale([]*tensor.Tensor{p(g), p(c)}, 1.0/65536)
		found[k], k = f, k+1
		return err
	})
	if !found[0] || !found[1] {
		t.Errorf("found Inf: GPU %v, CPU %v; want true", found[0], found[1])
	}
	r.check("unscaled", g, true)

	const n = 300000
	params, grads, m := r.in(tensor.F32, 1, n), r.in(tensor.F32, 1, n), r.in(tensor.F32, 0.1, n)
	vv := r.normal(n, 1e-2)
	for i := range vv {
		vv[i] = vv[i] * vv[i]
	}
	v := r.with(tensor.F32, vv, false, n)
	segs := []tensor.Segment{{Offset: 0, Len: 150000, Decay: true}, {Offset: 150000, Len: 70000}, {Offset: 230017, Len: 69983, Decay: true}}
	r.run(func(bk tensor.Backend, p func(twin) *tensor.Tensor) error {
		for step := 1; step <= 3; step++ {
			if err := bk.AdamW(tensor.AdamWArgs{Params: p(params), Grads: p(grads), ExpAvg: p(m), ExpAvgSq: p(v),
				Segments: segs, LR: 2e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, x := range []struct {
		name string
		t    twin
	}{{"params", params}, {"exp_avg", m}, {"exp_avg_sq", v}} {
		r.check(x.name, x.t, true)
	}
}
