//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// bitsCase builds its inputs with r.up, runs one op and returns the tensors whose bits are compared.
type bitsCase struct {
	name string
	run  func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor
}

// bitsRig makes a case's tensors from one seeded generator, so each run of a case sees the same inputs.
type bitsRig struct {
	t    *testing.T
	b    tensor.Backend
	rng  *rand.Rand
	bufs []*tensor.Tensor
}

// up uploads random values of scale s (rounded to dt) as shape, at element offset off of a larger buffer
// when off > 0 (an unaligned view, so the kernels' element-by-element paths run).
func (r *bitsRig) up(dt tensor.DType, s float64, off int, shape ...int) *tensor.Tensor {
	r.t.Helper()
	n := tensor.Shape(shape).Numel()
	buf, err := r.b.Alloc(dt, n+off)
	if err != nil {
		r.t.Fatal(err)
	}
	r.bufs = append(r.bufs, buf)
	v := make([]float32, n+off)
	for i := range v { // past 1 Mi values the random ones repeat (the host generator is slow)
		if i < 1<<20 {
			v[i] = float32(s * r.rng.NormFloat64())
		} else {
			v[i] = v[i-1<<20]
		}
	}
	if err := r.b.Upload(buf, v); err != nil {
		r.t.Fatal(err)
	}
	x, err := buf.View(off, shape...)
	if err != nil {
		r.t.Fatal(err)
	}
	return x
}

func (r *bitsRig) free() {
	for _, x := range r.bufs {
		r.b.Free(x)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// bitsCases are the ops TestOpsDeterministic runs, on BERT-base's shapes (scaled down in rows) and
// ragged or unaligned ones.
func bitsCases() []bitsCase {
	var cs []bitsCase
	dts := []tensor.DType{tensor.F32, tensor.F16, tensor.BF16}
	for _, dt := range dts {
		for _, sh := range [][2]int{{600, 3072}, {2600, 768}, {37, 33}, {5, 66}} {
			for _, off := range []int{0, 1} {
				n, c := sh[0], sh[1]
				cs = append(cs, bitsCase{fmt.Sprintf("BiasGrad %v %dx%d off%d", dt, n, c, off), func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					dy, db := r.up(dt, 1, off, n, c), r.up(tensor.F32, 1, 0, c)
					must(t, b.BiasGrad(db, dy))
					return []*tensor.Tensor{db}
				}})
				cs = append(cs, bitsCase{fmt.Sprintf("GELUBackwardRecompute+dbias %v %dx%d off%d", dt, n, c, off), func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, d := r.up(dt, 3, off, n, c), r.up(dt, 1, off, n, c)
					g, db := r.up(dt, 1, 0, n, c), r.up(dt, 1, 0, c)
					must(t, b.GELUBackwardRecompute(d, g, db, d, x)) // dx aliases dout, as in BERT
					return []*tensor.Tensor{d, g, db}
				}})
				cs = append(cs, bitsCase{fmt.Sprintf("LayerNormBackward (colsum mode 1) %v %dx%d off%d", dt, n, c, off), func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, d := r.up(dt, 2, off, n, c), r.up(dt, 1, off, n, c)
					gamma, beta := r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c)
					y, mean, rstd := r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, n), r.up(tensor.F32, 1, 0, n)
					must(t, b.LayerNorm(y, mean, rstd, x, gamma, beta, 1e-12))
					dg, dbeta, dx := r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c), r.up(dt, 1, 0, n, c)
					must(t, b.LayerNormBackward(dx, dg, dbeta, d, x, gamma, mean, rstd))
					return []*tensor.Tensor{dx, dg, dbeta}
				}})
				cs = append(cs, bitsCase{fmt.Sprintf("RMSNormBackward (colsum mode 2) %v %dx%d off%d", dt, n, c, off), func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, d := r.up(dt, 2, off, n, c), r.up(dt, 1, off, n, c)
					w := r.up(tensor.F32, 1, 0, c)
					y, rstd := r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, n)
					must(t, b.RMSNorm(y, rstd, x, w, 1e-6))
					dw, dx := r.up(tensor.F32, 1, 0, c), r.up(dt, 1, 0, n, c)
					must(t, b.RMSNormBackward(dx, dw, d, x, w, rstd))
					return []*tensor.Tensor{dx, dw}
				}})
			}
		}
		// EmbeddingBackward planned on the device against the host plan: groups of one row, of up
		// to 32, of 33 (two chunks of 32 and 1), of 64, skewed ones, and one group of every row.
		embCases := []struct {
			name string
			n, v int
			id   func(i int, rng *rand.Rand) int
		}{
			{"random", 20000, 1000, func(_ int, rng *rand.Rand) int { return rng.IntN(1000) }},
			{"skewed", 20000, 600, func(i int, rng *rand.Rand) int {
				if i%7 == 0 {
					return 0
				}
				return rng.IntN(600)
			}},
			{"all one id", 8192, 2, func(int, *rand.Rand) int { return 1 }},
			{"positions", 8192, 128, func(i int, _ *rand.Rand) int { return i % 128 }},
			{"groups of 33", 33 * 50, 50, func(i int, _ *rand.Rand) int { return i % 50 }},
			{"one row", 1, 4, func(int, *rand.Rand) int { return 3 }},
			{"vocabulary", 20000, 30522, func(_ int, rng *rand.Rand) int { return rng.IntN(30522) }}, // scan tiles
			{"split ids across scan tiles", 20000, 5000, func(i int, rng *rand.Rand) int {
				if i%3 == 0 {
					return 1000*(i%5) + 7 // 1333 rows each: the compaction
				}
				return rng.IntN(5000)
			}},
			{"mid groups across scan tiles", 20000, 5000, func(i int, rng *rand.Rand) int {
				if i%15 == 0 {
					return 1000*(i%5) + 3 // 267 rows each: placed, then sorted in shared memory
				}
				return rng.IntN(5000)
			}},
		}
		for _, ec := range embCases {
			if dt == tensor.F16 {
				break // F32 and BF16 cover the paths
			}
			for _, c := range []int{768, 33} {
				for _, tdt := range []tensor.DType{tensor.F32, dt} {
					if tdt == tensor.F32 && dt == tensor.F32 && c == 33 {
						continue
					}
					cs = append(cs, bitsCase{fmt.Sprintf("EmbeddingBackward %s table %v dout %v C=%d", ec.name, tdt, dt, c), func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
						table, d := r.up(tdt, 1, 0, ec.v, c), r.up(dt, 1, 0, ec.n, c)
						ids, err := b.Alloc(tensor.I32, ec.n)
						must(t, err)
						r.bufs = append(r.bufs, ids)
						h := make([]int32, ec.n)
						for i := range h {
							h[i] = int32(ec.id(i, r.rng))
						}
						must(t, b.Upload(ids, h))
						must(t, b.EmbeddingBackward(table, ids, d))
						return []*tensor.Tensor{table}
					}})
				}
			}
		}
		// The residual LayerNorm forward: the register-held rows (C = 128·k) and the general kernel's other widths.
		for _, c := range []int{768, 1024, 132} {
			for _, p := range []float32{0, 0.1} {
				for _, sumDT := range []tensor.DType{tensor.F32, dt} {
					n := 301
					cs = append(cs, bitsCase{fmt.Sprintf("ResidualLayerNorm y %v sum %v %dx%d p=%v", dt, sumDT, n, c, p), func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
						y, x := r.up(dt, 1, 0, n, c), r.up(tensor.F32, 2, 0, n, c)
						gamma, beta := r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c)
						sum, out, outh := r.up(sumDT, 1, 0, n, c), r.up(sumDT, 1, 0, n, c), r.up(dt, 1, 0, n, c)
						mean, rstd := r.up(tensor.F32, 1, 0, n), r.up(tensor.F32, 1, 0, n)
						must(t, b.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: sum, Out: out, OutHalf: outh, Mean: mean, Rstd: rstd,
							Y: y, X: x, Gamma: gamma, Beta: beta, Eps: 1e-12, DropoutP: p, Seed: 0x1234567890, Offset: 99}))
						return []*tensor.Tensor{sum, out, outh, mean, rstd}
					}})
				}
			}
		}
		// Elementwise: a length whose groups fill the four-deep loop several times (the grid is capped at 32
		// blocks of 256 threads per multiprocessor, 1.08 M threads on 132, so a thread runs that loop only
		// past 4.3 M groups) plus a remainder and a ragged tail, a small one, and unaligned views.
		for _, sz := range [][2]int{{18<<20 + 4*1000 + 3, 0}, {4099, 0}, {4099, 1}, {3, 0}} {
			n, off := sz[0], sz[1]
			if n > 1<<20 && dt != tensor.BF16 {
				continue // the long case once, in BERT's dtype
			}
			tag := fmt.Sprintf("%v n=%d off%d", dt, n, off)
			cs = append(cs,
				bitsCase{"GELU " + tag, func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, y := r.up(dt, 3, off, n), r.up(dt, 1, 0, n)
					must(t, b.GELU(y, x))
					return []*tensor.Tensor{y}
				}},
				bitsCase{"GELUBackward in place " + tag, func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, d := r.up(dt, 3, off, n), r.up(dt, 1, off, n)
					must(t, b.GELUBackward(d, d, x))
					return []*tensor.Tensor{d}
				}},
				bitsCase{"GELUBackwardRecompute " + tag, func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, d, g := r.up(dt, 3, off, n), r.up(dt, 1, off, n), r.up(dt, 1, 0, n)
					must(t, b.GELUBackwardRecompute(d, g, nil, d, x))
					return []*tensor.Tensor{d, g}
				}},
				bitsCase{"Cast to F32 and back " + tag, func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, f, h := r.up(tensor.F32, 1, off, n), r.up(tensor.F32, 1, 0, n), r.up(dt, 1, 0, n)
					must(t, b.Cast(h, x))
					must(t, b.Cast(f, h))
					return []*tensor.Tensor{h, f}
				}},
				bitsCase{"Add, Axpy, Scale " + tag, func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					a, c, y := r.up(dt, 1, off, n), r.up(tensor.F32, 1, 0, n), r.up(dt, 1, off, n)
					must(t, b.Add(a, a, c))
					must(t, b.Axpy(y, a, 0.37))
					must(t, b.Scale(y, 1.7))
					return []*tensor.Tensor{a, y}
				}},
				bitsCase{"Tanh, TanhBackward " + tag, func(t *testing.T, b tensor.Backend, r *bitsRig) []*tensor.Tensor {
					x, y, d := r.up(dt, 1, off, n), r.up(dt, 1, 0, n), r.up(dt, 1, off, n)
					must(t, b.Tanh(y, x))
					must(t, b.TanhBackward(d, d, y))
					return []*tensor.Tensor{y, d}
				}},
			)
		}
	}
	return cs
}

// TestOpsDeterministic checks that the ops behind the bandwidth kernels (column sums, the fused GELU and
// LayerNorm kernels, the elementwise loops, EmbeddingBackward) give the same bits on a second run from the
// same inputs, and EmbeddingBackward the same bits with its plan built on the host as on the device. Their
// agreement with tensor/cpu is the op suite's (tensor/tensortest) and the MatchesItsParts tests'.
func TestOpsDeterministic(t *testing.T) {
	gpu := openOrSkip(t)
	for i, c := range bitsCases() {
		t.Run(c.name, func(t *testing.T) { bitsCheck(t, gpu, i, c) })
	}
}

// bitsCheck runs case c twice (and EmbeddingBackward's once more with the host's plan) from the same inputs
// and compares the outputs' bits.
func bitsCheck(t *testing.T, gpu *cuda.Backend, i int, c bitsCase) {
	runs := []bool{false, false}
	if strings.HasPrefix(c.name, "EmbeddingBackward") {
		runs = append(runs, true)
	}
	got := make([][][]float32, len(runs))
	for k, host := range runs {
		got[k] = bitsRun(t, gpu, i, c, host)
	}
	for k := 1; k < len(runs); k++ {
		for j := range got[0] {
			if d := firstBitDiff(got[0][j], got[k][j]); d >= 0 {
				t.Errorf("output %d differs (run %d, host plan %v) at %d: %v vs %v", j, k, runs[k], d, got[k][j][d], got[0][j][d])
				break
			}
		}
	}
}

// bitsRun runs case c once (EmbeddingBackward planned on the host when hostPlan) and downloads its outputs.
func bitsRun(t *testing.T, gpu *cuda.Backend, i int, c bitsCase, hostPlan bool) [][]float32 {
	defer cuda.SetEmbeddingHostPlan(hostPlan)()
	r := &bitsRig{t: t, b: gpu, rng: rand.New(rand.NewPCG(uint64(i), 42))}
	defer r.free()
	var out [][]float32
	for _, o := range c.run(t, gpu, r) {
		h := make([]float32, o.Numel())
		if err := gpu.Download(h, o); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

// firstBitDiff returns the first index where a and b differ as bits (NaN payloads included), or -1.
func firstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}
