package tensortest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestFusedOpsMatchTheirParts checks on every backend that a fused op gives, bit for bit, what its unfused
// parts give on the same backend: GELUBackwardRecompute is GELUBackward plus GELU, ResidualLayerNorm is
// Dropout, Add, LayerNorm and Cast. The sizes cover the vectorised paths (multiples of four) and ragged
// ones.
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
				if err := b.GELUBackwardRecompute(dt2, g2, nil, dt2, xt); err != nil {
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

// TestGELUBiasGradMatchesItsParts checks GELUBackwardRecompute with a bias gradient against GELU,
// GELUBackward and BiasGrad, bit for bit, on rows of BERT's intermediate width and a ragged one (600 rows:
// three column-sum chunks, the last partial).
func TestGELUBiasGradMatchesItsParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(17, 19))
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, c := range []int{3072, 33} {
				const n = 600
				x, d := make([]float32, n*c), make([]float32, n*c)
				for i := range x {
					x[i], d[i] = float32(3*rng.NormFloat64()), float32(rng.NormFloat64())
				}
				b0 := make([]float32, c)
				for i := range b0 {
					b0[i] = float32(rng.NormFloat64())
				}
				xt, d1, d2 := Upload(t, b, dt, x, n, c), Upload(t, b, dt, d, n, c), Upload(t, b, dt, d, n, c)
				db1, db2 := Upload(t, b, tensor.F32, b0, c), Upload(t, b, tensor.F32, b0, c)
				g1, g2 := Alloc(t, b, dt, n, c), Alloc(t, b, dt, n, c)
				if err := b.GELU(g1, xt); err != nil {
					t.Fatal(err)
				}
				if err := b.GELUBackward(d1, d1, xt); err != nil {
					t.Fatal(err)
				}
				if err := b.BiasGrad(db1, d1); err != nil {
					t.Fatal(err)
				}
				if err := b.GELUBackwardRecompute(d2, g2, db2, d2, xt); err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%v C=%d", dt, c)
				sameBits(t, what+" GELU output", Download(t, b, g1), Download(t, b, g2))
				sameBits(t, what+" GELU gradient", Download(t, b, d1), Download(t, b, d2))
				sameBits(t, what+" bias gradient", Download(t, b, db1), Download(t, b, db2))
				for _, x := range []*tensor.Tensor{xt, d1, d2, db1, db2, g1, g2} {
					b.Free(x)
				}
			}
		}
	})
}

func TestResidualLayerNormMatchesItsParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(7, 9))
		normal := func(n int, s float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(s * rng.NormFloat64())
			}
			return v
		}
		for _, h := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, sumDT := range []tensor.DType{tensor.F32, h} {
				for _, c := range []int{768, 33} {
					for _, p := range []float32{0, 0.1} {
						const n = 37
						y, x := Upload(t, b, h, normal(n*c, 1), n, c), Upload(t, b, tensor.F32, normal(n*c, 2), n, c)
						gamma, beta := Upload(t, b, tensor.F32, normal(c, 1), c), Upload(t, b, tensor.F32, normal(c, 1), c)
						var parts, fused [5]*tensor.Tensor // sum, out, outh, mean, rstd
						for _, set := range []*[5]*tensor.Tensor{&parts, &fused} {
							set[0], set[1], set[2] = Alloc(t, b, sumDT, n, c), Alloc(t, b, sumDT, n, c), Alloc(t, b, h, n, c)
							set[3], set[4] = Alloc(t, b, tensor.F32, n), Alloc(t, b, tensor.F32, n)
						}
						yd := Alloc(t, b, h, n, c)
						const seed, off = 0x1234567890, 99
						if err := b.Dropout(yd, y, p, seed, off); err != nil {
							t.Fatal(err)
						}
						if err := b.Add(parts[0], yd, x); err != nil {
							t.Fatal(err)
						}
						if err := b.LayerNorm(parts[1], parts[3], parts[4], parts[0], gamma, beta, 1e-12); err != nil {
							t.Fatal(err)
						}
						if err := b.Cast(parts[2], parts[1]); err != nil {
							t.Fatal(err)
						}
						if err := b.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: fused[0], Out: fused[1], OutHalf: fused[2], Mean: fused[3],
							Rstd: fused[4], Y: y, X: x, Gamma: gamma, Beta: beta, Eps: 1e-12, DropoutP: p, Seed: seed, Offset: off}); err != nil {
							t.Fatal(err)
						}
						what := fmt.Sprintf("y %v sum %v C=%d p=%v", h, sumDT, c, p)
						for i, name := range []string{"sum", "out", "outh", "mean", "rstd"} {
							sameBits(t, what+" "+name, Download(t, b, parts[i]), Download(t, b, fused[i]))
						}
						for _, x := range append(append([]*tensor.Tensor{y, x, gamma, beta, yd}, parts[:]...), fused[:]...) {
							b.Free(x)
						}
					}
				}
			}
		}
	})
}

// TestResidualLayerNormBackwardMatchesItsParts checks ResidualLayerNormBackward against LayerNormBackward,
// DropoutBackward (or Cast) and BiasGrad of the branch gradient, with the weight gradients taken one at a time
// so that a backend with a one-pass kernel for all three (cuda: C = 768, 1024) is compared with its general
// kernels, bit for bit, with and without DBias (DBias within FP32 summation rounding: a backend may add the
// fused column sum in other chunks than BiasGrad's, as cuda does below 32768 rows).
func TestResidualLayerNormBackwardMatchesItsParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(11, 13))
		normal := func(n int, s, mu float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(mu + s*rng.NormFloat64())
			}
			return v
		}
		const n = 600 // three column-sum chunks of 256 rows, the last one partial
		for _, h := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, c := range []int{768, 1024, 33} {
				for i, p := range []float32{0, 0.1, 0.1} {
					withBias := i < 2 // the last run has no DBias
					x, gamma, beta := Upload(t, b, tensor.F32, normal(n*c, 2, 0.5), n, c), Upload(t, b, tensor.F32, normal(c, 1, 1), c), Upload(t, b, tensor.F32, normal(c, 1, 0), c)
					y, mean, rstd := Alloc(t, b, tensor.F32, n, c), Alloc(t, b, tensor.F32, n), Alloc(t, b, tensor.F32, n)
					if err := b.LayerNorm(y, mean, rstd, x, gamma, beta, 1e-12); err != nil {
						t.Fatal(err)
					}
					dout := Upload(t, b, tensor.F32, normal(n*c, 1, 0), n, c)
					g0, b0 := normal(c, 1, 0), normal(c, 1, 0)
					dg1, db1, dg2, db2 := Upload(t, b, tensor.F32, g0, c), Upload(t, b, tensor.F32, b0, c), Upload(t, b, tensor.F32, g0, c), Upload(t, b, tensor.F32, b0, c)
					dx1, dx1b, dx2 := Alloc(t, b, tensor.F32, n, c), Alloc(t, b, tensor.F32, n, c), Alloc(t, b, tensor.F32, n, c)
					dy1, dy2 := Alloc(t, b, h, n, c), Alloc(t, b, h, n, c)
					c0 := normal(c, 1, 0)
					dc1, dc2 := Upload(t, b, tensor.F32, c0, c), Upload(t, b, tensor.F32, c0, c)
					const seed, off = 77, 12345
					if err := b.LayerNormBackward(dx1, dg1, nil, dout, x, gamma, mean, rstd); err != nil {
						t.Fatal(err)
					}
					if err := b.LayerNormBackward(dx1b, nil, db1, dout, x, gamma, mean, rstd); err != nil {
						t.Fatal(err)
					}
					var err error
					if p == 0 {
						err = b.Cast(dy1, dx1)
					} else {
						err = b.DropoutBackward(dy1, dx1, p, seed, off)
					}
					if err != nil {
						t.Fatal(err)
					}
					var dbias *tensor.Tensor
					if withBias {
						if err := b.BiasGrad(dc1, dy1); err != nil {
							t.Fatal(err)
						}
						dbias = dc2
					}
					if err := b.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: dx2, DY: dy2, DGamma: dg2, DBeta: db2, DBias: dbias,
						DOut: dout, X: x, Gamma: gamma, Mean: mean, Rstd: rstd, DropoutP: p, Seed: seed, Offset: off}); err != nil {
						t.Fatal(err)
					}
					what := fmt.Sprintf("dy %v C=%d p=%v bias=%v", h, c, p, withBias)
					if want, got := Download(t, b, dc1), Download(t, b, dc2); withBias {
						if e, i := RelErr(got, want); e > 1e-5 {
							t.Fatalf("%s dbias[%d] = %v fused, %v unfused: relative error %.3g", what, i, got[i], want[i], e)
						}
					} else {
						sameBits(t, what+" dbias (not passed)", want, got)
					}
					sameBits(t, what+" dx", Download(t, b, dx1), Download(t, b, dx2))
					sameBits(t, what+" dx (dbeta pass)", Download(t, b, dx1b), Download(t, b, dx2))
					sameBits(t, what+" dy", Download(t, b, dy1), Download(t, b, dy2))
					sameBits(t, what+" dgamma", Download(t, b, dg1), Download(t, b, dg2))
					sameBits(t, what+" dbeta", Download(t, b, db1), Download(t, b, db2))
					for _, t := range []*tensor.Tensor{x, gamma, beta, y, mean, rstd, dout, dg1, db1, dg2, db2, dx1, dx1b, dx2, dy1, dy2, dc1, dc2} {
						b.Free(t)
					}
				}
			}
		}
	})
}

// TestResidualRMSNormMatchesItsParts checks ResidualRMSNorm against Add and RMSNorm, and
// ResidualRMSNormBackward (accumulated and not, with the half copy, with and without the weight gradient)
// against RMSNormBackward, Axpy and Cast, bit for bit (the weight gradient within FP32 summation rounding: a
// backend may add the column sum in another order), on 600 rows (three column-sum chunks, the last
// partial) of SmolLM2's and Qwen2.5-0.5B's widths, a width that is not a multiple of 128, one past the
// one-pass kernels (1100) and a ragged one (33).
func TestResidualRMSNormMatchesItsParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(23, 29))
		normal := func(n int, s float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(s * rng.NormFloat64())
			}
			return v
		}
		const n, eps = 600, 1e-5
		for _, h := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, c := range []int{576, 896, 36, 1100, 33} {
				what := fmt.Sprintf("%v C=%d", h, c)
				x, y, w := Upload(t, b, tensor.F32, normal(n*c, 2), n, c), Upload(t, b, h, normal(n*c, 1), n, c), Upload(t, b, tensor.F32, normal(c, 1), c)
				sum1, sum2, out1, out2 := Alloc(t, b, tensor.F32, n, c), Alloc(t, b, tensor.F32, n, c), Alloc(t, b, h, n, c), Alloc(t, b, h, n, c)
				r1, r2 := Alloc(t, b, tensor.F32, n), Alloc(t, b, tensor.F32, n)
				if err := b.Add(sum1, x, y); err != nil {
					t.Fatal(err)
				}
				if err := b.RMSNorm(out1, r1, sum1, w, eps); err != nil {
					t.Fatal(err)
				}
				if err := b.ResidualRMSNorm(tensor.ResidualRMSNormArgs{Sum: sum2, Out: out2, Rstd: r2, X: x, Y: y, Weight: w, Eps: eps}); err != nil {
					t.Fatal(err)
				}
				sameBits(t, what+" sum", Download(t, b, sum1), Download(t, b, sum2))
				sameBits(t, what+" out", Download(t, b, out1), Download(t, b, out2))
				sameBits(t, what+" rstd", Download(t, b, r1), Download(t, b, r2))
				dout, g0, w0 := normal(n*c, 1), normal(n*c, 1), normal(c, 1)
				for _, acc := range []bool{false, true} {
					for _, frozen := range []bool{false, true} {
						what := fmt.Sprintf("%s accumulate=%v frozen=%v", what, acc, frozen)
						d := Upload(t, b, tensor.F32, dout, n, c)
						g1, g2 := Upload(t, b, tensor.F32, g0, n, c), Upload(t, b, tensor.F32, g0, n, c)
						h1, h2, dx := Alloc(t, b, h, n, c), Alloc(t, b, h, n, c), Alloc(t, b, tensor.F32, n, c)
						var dw1, dw2 *tensor.Tensor
						if !frozen {
							dw1, dw2 = Upload(t, b, tensor.F32, w0, c), Upload(t, b, tensor.F32, w0, c)
						}
						if err := b.RMSNormBackward(dx, dw1, d, sum1, w, r1); err != nil {
							t.Fatal(err)
						}
						var err error
						if acc {
							err = b.Axpy(g1, dx, 1)
						} else {
							err = b.Copy(g1, dx)
						}
						if err != nil {
							t.Fatal(err)
						}
						if err := b.Cast(h1, g1); err != nil {
							t.Fatal(err)
						}
						if err := b.ResidualRMSNormBackward(tensor.ResidualRMSNormBackwardArgs{DX: g2, DXHalf: h2, DWeight: dw2, DOut: d,
							X: sum1, Weight: w, Rstd: r1, Accumulate: acc}); err != nil {
							t.Fatal(err)
						}
						sameBits(t, what+" dx", Download(t, b, g1), Download(t, b, g2))
						sameBits(t, what+" dx half", Download(t, b, h1), Download(t, b, h2))
						if !frozen { // the same column sum, possibly added in another fixed order
							want, got := Download(t, b, dw1), Download(t, b, dw2)
							if e, i := RelErr(got, want); e > 1e-5 {
								t.Fatalf("%s dweight[%d] = %v fused, %v unfused: relative error %.3g", what, i, got[i], want[i], e)
							}
						}
						for _, t := range []*tensor.Tensor{d, g1, g2, h1, h2, dx, dw1, dw2} {
							if t != nil {
								b.Free(t)
							}
						}
					}
				}
				for _, t := range []*tensor.Tensor{x, y, w, sum1, sum2, out1, out2, r1, r2} {
					b.Free(t)
				}
			}
		}
	})
}

// TestCrossEntropyWithGradMatchesItsParts checks CrossEntropyWithGrad against CrossEntropy, ArgMax and
// CrossEntropyBackward, bit for bit, on vocabulary rows (SmolLM2's 49152, an unaligned 2049, a classifier's
// 40) with ignored rows, ties and a NaN row, with the gradient in its own buffer and over the logits.
func TestCrossEntropyWithGradMatchesItsParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(31, 37))
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			for _, v := range []int{49152, 2049, 40} {
				const n = 9
				x := make([]float32, n*v)
				for i := range x {
					x[i] = float32(3 * rng.NormFloat64())
				}
				x[3*v+5], x[3*v+v-1] = 40, 40 // a tie: the first wins
				x[6*v+7] = float32(math.NaN())
				labels := make([]int32, n)
				for i := range labels {
					labels[i] = int32(rng.IntN(v))
				}
				labels[1], labels[4] = -100, -100
				lg, lab := Upload(t, b, dt, x, n, v), Alloc(t, b, tensor.I32, n)
				if err := b.Upload(lab, labels); err != nil {
					t.Fatal(err)
				}
				l1, l2, p1, p2 := Alloc(t, b, tensor.F32, n), Alloc(t, b, tensor.F32, n), Alloc(t, b, tensor.I32, n), Alloc(t, b, tensor.I32, n)
				d1, d2 := Alloc(t, b, dt, n, v), Alloc(t, b, dt, n, v)
				c1, err := b.CrossEntropy(l1, lg, lab, -100)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.ArgMax(p1, lg); err != nil {
					t.Fatal(err)
				}
				if err := b.CrossEntropyBackward(d1, lg, lab, 0.125, -100, nil); err != nil {
					t.Fatal(err)
				}
				c2, err := b.CrossEntropyWithGrad(l2, p2, d2, lg, lab, 0.125, -100, nil)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%v V=%d", dt, v)
				if c1 != c2 {
					t.Fatalf("%s: count %d fused, %d unfused", what, c2, c1)
				}
				sameBits(t, what+" losses", Download(t, b, l1), Download(t, b, l2))
				sameBits(t, what+" dlogits", Download(t, b, d1), Download(t, b, d2))
				i1, i2 := make([]int32, n), make([]int32, n)
				if err := b.Download(i1, p1); err != nil {
					t.Fatal(err)
				}
				if err := b.Download(i2, p2); err != nil {
					t.Fatal(err)
				}
				for i := range i1 {
					if i1[i] != i2[i] {
						t.Fatalf("%s: pred[%d] = %d fused, %d unfused", what, i, i2[i], i1[i])
					}
				}
				// in place: the gradient over the logits
				if _, err := b.CrossEntropyWithGrad(l2, nil, lg, lg, lab, 0.125, -100, nil); err != nil {
					t.Fatal(err)
				}
				sameBits(t, what+" dlogits in place", Download(t, b, d1), Download(t, b, lg))
				for _, x := range []*tensor.Tensor{lg, lab, l1, l2, p1, p2, d1, d2} {
					b.Free(x)
				}
			}
		}
	})
}

// TestSwiGLUBackwardRecomputeMatchesItsParts checks SwiGLUBackwardRecompute against SwiGLU and
// SwiGLUBackward, bit for bit, with out over gate (as the transposed MLP uses it) and in its own buffer, on a
// multiple of four elements and a ragged count.
func TestSwiGLUBackwardRecomputeMatchesItsParts(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		rng := rand.New(rand.NewPCG(41, 43))
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, n := range []int{4096, 4099} {
				g, u, d := make([]float32, n), make([]float32, n), make([]float32, n)
				for i := range g {
					g[i], u[i], d[i] = float32(3*rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				gt, ut, dt1 := Upload(t, b, dt, g, n), Upload(t, b, dt, u, n), Upload(t, b, dt, d, n)
				s1, dg1, du1 := Alloc(t, b, dt, n), Alloc(t, b, dt, n), Alloc(t, b, dt, n)
				if err := b.SwiGLU(s1, gt, ut); err != nil {
					t.Fatal(err)
				}
				if err := b.SwiGLUBackward(dg1, du1, dt1, gt, ut); err != nil {
					t.Fatal(err)
				}
				for _, inPlace := range []bool{false, true} {
					what := fmt.Sprintf("%v n=%d out over gate=%v", dt, n, inPlace)
					g2 := Upload(t, b, dt, g, n)
					s2, dg2, du2 := Alloc(t, b, dt, n), Alloc(t, b, dt, n), Alloc(t, b, dt, n)
					out := s2
					if inPlace {
						out = g2
					}
					if err := b.SwiGLUBackwardRecompute(dg2, du2, out, dt1, g2, ut); err != nil {
						t.Fatal(err)
					}
					sameBits(t, what+" out", Download(t, b, s1), Download(t, b, out))
					sameBits(t, what+" dgate", Download(t, b, dg1), Download(t, b, dg2))
					sameBits(t, what+" dup", Download(t, b, du1), Download(t, b, du2))
					for _, x := range []*tensor.Tensor{g2, s2, dg2, du2} {
						b.Free(x)
					}
				}
				for _, x := range []*tensor.Tensor{gt, ut, dt1, s1, dg1, du1} {
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
