package tensortest

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// elementwiseCases: Fill, Cast, Copy, Scale, Add, Axpy, BiasAdd, BiasGrad with dt storage.
func elementwiseCases(dt tensor.DType) []opCase {
	g := newGen("elementwise" + dt.String())
	n, r, c := g.odd()*g.odd(), g.odd(), g.odd()
	cases := []opCase{
		{"Fill", []arg{output("x", dt, n)}, func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.Fill(ts[0], -0.3))
		}},
		{"Copy", []arg{output("dst", dt, n), input("src", dt, g.normal(n, 1), n)}, func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.Copy(ts[0], ts[1]))
		}},
		{"Scale", []arg{accum("x", dt, g.normal(n, 1), n)}, func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.Scale(ts[0], -0.37))
		}},
		{"Add", []arg{output("out", dt, r, c), input("a", dt, g.normal(r*c, 1), r, c), input("b", dt, g.normal(r*c, 1), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.Add(ts[0], ts[1], ts[2]))
			}},
		{"Add mixed F32+BF16 inputs", []arg{output("out", dt, n), input("a", tensor.F32, g.normal(n, 1), n), input("b", tensor.BF16, g.normal(n, 1), n)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.Add(ts[0], ts[1], ts[2]))
			}},
		{"Axpy", []arg{accum("y", dt, g.normal(n, 1), n), input("x", dt, g.normal(n, 1), n)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.Axpy(ts[0], ts[1], 0.5)) }},
		{"BiasAdd", []arg{accum("y", dt, g.normal(r*c, 1), r, c), input("bias", dt, g.normal(c, 1), c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.BiasAdd(ts[0], ts[1])) }},
		{"BiasGrad", []arg{accum("dbias", dt, g.normal(c, 1), c), input("dy", dt, g.normal(r*c, 1), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.BiasGrad(ts[0], ts[1])) }},
	}
	for _, src := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		cases = append(cases, opCase{"Cast from " + src.String(), []arg{output("dst", dt, n), input("src", src, g.normal(n, 100), n)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.Cast(ts[0], ts[1])) }})
	}
	return cases
}

// activationCases: GELU and Tanh, forward and backward.
func activationCases(dt tensor.DType) []opCase {
	g := newGen("activation" + dt.String())
	r, c := g.odd(), g.odd()
	return []opCase{
		{"GELU", []arg{output("out", dt, r, c), input("x", dt, g.normal(r*c, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.GELU(ts[0], ts[1])) }},
		{"GELUBackward", []arg{output("dx", dt, r, c), input("dout", dt, g.normal(r*c, 1), r, c), input("x", dt, g.normal(r*c, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.GELUBackward(ts[0], ts[1], ts[2]))
			}},
		{"GELUBackwardRecompute", []arg{output("dx", dt, r, c), output("out", dt, r, c), input("dout", dt, g.normal(r*c, 1), r, c), input("x", dt, g.normal(r*c, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.GELUBackwardRecompute(ts[0], ts[1], nil, ts[2], ts[3]))
			}},
		{"GELUBackwardRecompute without out, in place", []arg{accum("d", dt, g.normal(r*c, 1), r, c), input("x", dt, g.normal(r*c, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.GELUBackwardRecompute(ts[0], nil, nil, ts[0], ts[1]))
			}},
		{"GELUBackwardRecompute with the bias gradient", []arg{output("dx", dt, r, c), output("out", dt, r, c), accum("dbias", dt, g.normal(c, 1), c),
			input("dout", dt, g.normal(r*c, 1), r, c), input("x", dt, g.normal(r*c, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.GELUBackwardRecompute(ts[0], ts[1], ts[2], ts[3], ts[4]))
			}},
		{"Tanh", []arg{output("out", dt, r, c), input("x", dt, g.normal(r*c, 2), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.Tanh(ts[0], ts[1])) }},
		{"TanhBackward", []arg{output("dx", dt, r, c), input("dout", dt, g.normal(r*c, 1), r, c), input("y", dt, g.uniform(r*c, -1, 1), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.TanhBackward(ts[0], ts[1], ts[2]))
			}},
	}
}

// normCases: LayerNorm forward, and its backward with and without weight gradients, with the saved
// statistics computed on the host from the rounded input.
func normCases(dt tensor.DType) []opCase {
	g := newGen("norm" + dt.String())
	var cases []opCase
	for _, c := range []int{1, 7, 33} {
		n := g.odd()
		x := rounded(dt, g.normal(n*c, 2))
		for i := range x {
			x[i] = tensor.RoundTo(dt, x[i]+1.5)
		}
		gamma, beta := g.normal(c, 1), g.normal(c, 1)
		const eps = 1e-12 // BERT's layer_norm_eps
		mean, rstd := make([]float32, n), make([]float32, n)
		for i := 0; i < n; i++ {
			var s, ss float64
			for _, v := range x[i*c : (i+1)*c] {
				s += float64(v)
			}
			m := s / float64(c)
			for _, v := range x[i*c : (i+1)*c] {
				ss += (float64(v) - m) * (float64(v) - m)
			}
			mean[i], rstd[i] = float32(m), float32(1/math.Sqrt(ss/float64(c)+eps))
		}
		shape := fmt.Sprintf(" N=%d C=%d", n, c)
		cases = append(cases,
			opCase{"LayerNorm" + shape, []arg{output("out", dt, n, c), output("mean", tensor.F32, n), output("rstd", tensor.F32, n),
				input("x", dt, x, n, c), input("gamma", dt, gamma, c), input("beta", dt, beta, c)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.LayerNorm(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], eps))
				}},
			opCase{"LayerNormBackward" + shape, []arg{output("dx", dt, n, c), accum("dgamma", dt, g.normal(c, 1), c), accum("dbeta", dt, g.normal(c, 1), c),
				input("dout", dt, g.normal(n*c, 1), n, c), input("x", dt, x, n, c), input("gamma", dt, gamma, c),
				input("mean", tensor.F32, mean, n), input("rstd", tensor.F32, rstd, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.LayerNormBackward(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7]))
				}},
			opCase{"LayerNormBackward frozen" + shape, []arg{output("dx", dt, n, c), input("dout", dt, g.normal(n*c, 1), n, c),
				input("x", dt, x, n, c), input("gamma", dt, gamma, c), input("mean", tensor.F32, mean, n), input("rstd", tensor.F32, rstd, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.LayerNormBackward(ts[0], nil, nil, ts[1], ts[2], ts[3], ts[4], ts[5]))
				}},
			// The reference holds every value as F32, so the cases keep the op's intermediate roundings (of the
			// dropped y to y's dtype, of the sum to sum's) exact: BERT's mix without dropout (y in dt, the
			// residual, sum and output F32, the GEMM copy in dt), and dropout on an F32 y with a dt output.
			// TestFusedOpsMatchTheirParts checks the roundings themselves against the separate ops.
			opCase{"ResidualLayerNorm y in dt, F32 sum, a dt copy" + shape, []arg{output("sum", tensor.F32, n, c), output("out", tensor.F32, n, c),
				output("outh", dt, n, c), output("mean", tensor.F32, n), output("rstd", tensor.F32, n),
				input("y", dt, g.normal(n*c, 1), n, c), input("x", tensor.F32, g.normal(n*c, 2), n, c), input("gamma", dt, gamma, c), input("beta", dt, beta, c)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: ts[0], Out: ts[1], OutHalf: ts[2], Mean: ts[3], Rstd: ts[4],
						Y: ts[5], X: ts[6], Gamma: ts[7], Beta: ts[8], Eps: eps}))
				}},
			// dy is held in dt by the reference too (exact): dbias sums its rounded values.
			opCase{"ResidualLayerNormBackward dropout, F32 dx, dt dy, dbias" + shape, []arg{output("dx", tensor.F32, n, c), exact(output("dy", dt, n, c)),
				accum("dgamma", dt, g.normal(c, 1), c), accum("dbeta", dt, g.normal(c, 1), c), accum("dbias", tensor.F32, g.normal(c, 1), c),
				input("dout", tensor.F32, g.normal(n*c, 1), n, c), input("x", dt, x, n, c), input("gamma", dt, gamma, c),
				input("mean", tensor.F32, mean, n), input("rstd", tensor.F32, rstd, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: ts[0], DY: ts[1], DGamma: ts[2], DBeta: ts[3],
						DBias: ts[4], DOut: ts[5], X: ts[6], Gamma: ts[7], Mean: ts[8], Rstd: ts[9], DropoutP: 0.1, Seed: 42, Offset: 7}))
				}},
			opCase{"ResidualLayerNormBackward cast, frozen" + shape, []arg{output("dx", tensor.F32, n, c), output("dy", dt, n, c),
				input("dout", dt, g.normal(n*c, 1), n, c), input("x", dt, x, n, c), input("gamma", dt, gamma, c),
				input("mean", tensor.F32, mean, n), input("rstd", tensor.F32, rstd, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: ts[0], DY: ts[1],
						DOut: ts[2], X: ts[3], Gamma: ts[4], Mean: ts[5], Rstd: ts[6]}))
				}},
			opCase{"ResidualLayerNorm dropout, dt output" + shape, []arg{output("sum", tensor.F32, n, c), output("out", dt, n, c),
				output("mean", tensor.F32, n), output("rstd", tensor.F32, n),
				input("y", tensor.F32, g.normal(n*c, 1), n, c), input("x", dt, x, n, c), input("gamma", dt, gamma, c), input("beta", dt, beta, c)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: ts[0], Out: ts[1], Mean: ts[2], Rstd: ts[3],
						Y: ts[4], X: ts[5], Gamma: ts[6], Beta: ts[7], Eps: eps, DropoutP: 0.1, Seed: 42, Offset: 7}))
				}},
		)
	}
	return cases
}

// softmaxCases: Softmax with no mask and with padding masks of −Inf, −1e4 and finfo(float32).min (the
// second mask row fully masked), broadcast over R rows per batch member; NaN rows; and SoftmaxBackward.
func softmaxCases(dt tensor.DType) []opCase {
	g := newGen("softmax" + dt.String())
	const bsz = 3
	r, c := g.odd(), 7+2*g.rng.IntN(14)
	n := bsz * r * c
	var cases []opCase
	cases = append(cases, opCase{"Softmax no mask", []arg{output("out", dt, bsz, r, c), input("x", dt, g.normal(n, 3), bsz, r, c)},
		func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.Softmax(ts[0], ts[1], nil))
		}})
	for _, m := range []struct {
		name string
		v    float32
	}{{"-Inf", float32(math.Inf(-1))}, {"-1e4", -1e4}, {"finfo.min", -math.MaxFloat32}} {
		mask := make([]float32, bsz*c)
		for j := 0; j < c; j++ {
			mask[1*c+j] = m.v // batch member 1: every position masked
			if j >= c/2 {
				mask[2*c+j] = m.v // batch member 2: right half padded
			}
		}
		cases = append(cases, opCase{"Softmax " + m.name + " mask", []arg{output("out", dt, bsz, r, c), input("x", dt, g.normal(n, 3), bsz, r, c),
			input("mask", tensor.F32, mask, bsz, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.Softmax(ts[0], ts[1], ts[2]))
			}})
	}
	y := g.uniform(n, 0, 1)
	for i := 0; i < n; i += c { // rows of y sum to 1, like a softmax output
		var s float32
		for _, v := range y[i : i+c] {
			s += v
		}
		for j := i; j < i+c; j++ {
			y[j] /= s
		}
	}
	cases = append(cases, opCase{"SoftmaxBackward", []arg{output("dx", dt, bsz*r, c), input("dout", dt, g.normal(n, 1), bsz*r, c), input("y", dt, y, bsz*r, c)},
		func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.SoftmaxBackward(ts[0], ts[1], ts[2]))
		}})
	// NaN: one element of row 0 (batch member 0) and one of the last row (batch member 1, fully masked with −Inf:
	// NaN + −Inf is NaN) make their rows NaN; every other row stays finite.
	mask, x := make([]float32, bsz*c), g.normal(n, 3)
	for j := 0; j < c; j++ {
		mask[c+j] = float32(math.Inf(-1))
	}
	x[c-1], x[2*r*c-1] = float32(math.NaN()), float32(math.NaN())
	out := output("out", dt, bsz, r, c)
	out.nan = make([]int8, n)
	for i := range out.nan {
		out.nan[i] = nanNever
		if i < c || i/c == 2*r-1 {
			out.nan[i] = nanMust
		}
	}
	cases = append(cases, opCase{"Softmax NaN", []arg{out, input("x", dt, x, bsz, r, c), input("mask", tensor.F32, mask, bsz, c)},
		func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.Softmax(ts[0], ts[1], ts[2]))
		}})
	return cases
}

// dropoutCases: Dropout and DropoutBackward, whose masks must be identical on every backend (Philox).
func dropoutCases(dt tensor.DType) []opCase {
	g := newGen("dropout" + dt.String())
	n := 4*g.odd()*g.odd() + 3 // never a multiple of 4: the last Philox block is partly used
	var cases []opCase
	for _, d := range []struct {
		p            float32
		seed, offset uint64
	}{{0, 1, 0}, {0.1, 42, 0}, {0.5, 0xDEADBEEF12345678, 1<<32 + 5}} {
		name := fmt.Sprintf(" p=%v seed=%#x offset=%d", d.p, d.seed, d.offset)
		cases = append(cases,
			opCase{"Dropout" + name, []arg{output("out", dt, n), input("x", dt, g.normal(n, 1), n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.Dropout(ts[0], ts[1], d.p, d.seed, d.offset))
				}},
			opCase{"DropoutBackward" + name, []arg{output("dx", dt, n), input("dout", dt, g.normal(n, 1), n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.DropoutBackward(ts[0], ts[1], d.p, d.seed, d.offset))
				}})
	}
	return cases
}

// layoutCases: Transpose12 and Embedding with its backward (repeated ids; I32 and I64 ids).
func layoutCases(dt tensor.DType) []opCase {
	g := newGen("layout" + dt.String())
	a, bb, c, d := g.odd(), g.odd(), g.odd(), g.odd()
	if a*bb*c*d > 20000 {
		a = 1
	}
	x := g.normal(a*bb*c*d, 1)
	cases := []opCase{{fmt.Sprintf("Transpose12 (%d,%d,%d,%d)", a, bb, c, d), []arg{output("out", dt, a, c, bb, d), input("x", dt, x, a, bb, c, d)},
		func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.Transpose12(ts[0], ts[1], a, bb, c, d))
		}}}
	for _, idt := range []tensor.DType{tensor.I32, tensor.I64} {
		v, ch, n := g.odd(), g.odd(), 2*g.odd()+1
		ids := g.ints(n, v)
		cases = append(cases,
			opCase{"Embedding " + idt.String(), []arg{output("out", dt, n, ch), index("ids", idt, ids, n), input("table", dt, g.normal(v*ch, 1), v, ch)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.Embedding(ts[0], ts[1], ts[2]))
				}},
			opCase{"EmbeddingBackward " + idt.String(), []arg{accum("dtable", dt, g.normal(v*ch, 1), v, ch), index("ids", idt, ids, n), input("dout", dt, g.normal(n*ch, 1), n, ch)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.EmbeddingBackward(ts[0], ts[1], ts[2]))
				}})
	}
	return cases
}

// lossCases: CrossEntropy (with ignore_index −100 rows) and MSE, forward and backward, and ArgMax (compared as
// scalar results: every row's index, ties and NaNs included).
func lossCases(dt tensor.DType) []opCase {
	g := newGen("loss" + dt.String())
	var cases []opCase
	for _, v := range []int{2, 33} {
		n := 2*g.odd() + 1
		labels := g.ints(n, v)
		for i := 1; i < n; i += 3 {
			labels[i] = -100
		}
		logits := g.normal(n*v, 3)
		name := fmt.Sprintf(" N=%d V=%d", n, v)
		cases = append(cases,
			opCase{"CrossEntropy" + name, []arg{output("losses", tensor.F32, n), input("logits", dt, logits, n, v), index("labels", tensor.I64, labels, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					count, err := b.CrossEntropy(ts[0], ts[1], ts[2], -100)
					return []float64{float64(count)}, err
				}},
			opCase{"CrossEntropyBackward" + name, []arg{output("dlogits", dt, n, v), input("logits", dt, logits, n, v), index("labels", tensor.I32, labels, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.CrossEntropyBackward(ts[0], ts[1], ts[2], 1.0/3, -100, nil))
				}})
	}
	// CrossEntropyWithGrad on a classifier's few logits and on a vocabulary (V ≥ 2048: the block-per-row
	// kernels), with and without the arg-max; the arg-max compared as the op's scalar results.
	for _, v := range []int{33, 2056} {
		n := 2*g.odd() + 1
		labels := g.ints(n, v)
		for i := 1; i < n; i += 3 {
			labels[i] = -100
		}
		logits := g.normal(n*v, 3)
		for _, withPred := range []bool{true, false} {
			cases = append(cases, opCase{fmt.Sprintf("CrossEntropyWithGrad N=%d V=%d pred=%v", n, v, withPred),
				[]arg{output("losses", tensor.F32, n), output("pred", tensor.I32, n), output("dlogits", dt, n, v),
					input("logits", dt, logits, n, v), index("labels", tensor.I32, labels, n)},
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					pred := ts[1]
					if !withPred {
						pred = nil
						if err := b.Fill(ts[1], 0); err != nil {
							return nil, err
						}
					}
					count, err := b.CrossEntropyWithGrad(ts[0], pred, ts[2], ts[3], ts[4], 0.25, -100, nil)
					if err != nil {
						return nil, err
					}
					ids := make([]int32, n)
					if err := b.Download(ids, ts[1]); err != nil {
						return nil, err
					}
					res := []float64{float64(count)}
					for _, id := range ids {
						res = append(res, float64(id))
					}
					return res, nil
				}})
		}
	}
	for _, v := range []int{1, 33, 100} {
		// Rows of random logits, then the corner rows: all equal (0), two NaNs (the first), all −Inf (0), the
		// maximum repeated (its first position), random logits on a coarse grid (ties after rounding).
		n := 5 + g.odd()
		logits := g.normal(n*v, 3)
		row := func(i int) []float32 { return logits[i*v : (i+1)*v] }
		for j := range v {
			row(0)[j], row(2)[j] = 1.5, float32(math.Inf(-1))
			row(4)[j] = float32(math.Round(float64(row(4)[j])))
		}
		row(1)[v/2], row(1)[v-1] = float32(math.NaN()), float32(math.NaN())
		row(3)[v-1], row(3)[v/3] = 50, 50
		cases = append(cases, opCase{fmt.Sprintf("ArgMax N=%d V=%d", n, v), []arg{output("out", tensor.I32, n), input("x", dt, logits, n, v)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				if err := b.ArgMax(ts[0], ts[1]); err != nil {
					return nil, err
				}
				ids := make([]int32, n)
				if err := b.Download(ids, ts[0]); err != nil {
					return nil, err
				}
				res := make([]float64, n)
				for i, id := range ids {
					res[i] = float64(id)
				}
				return res, nil
			}})
	}
	n := g.odd() * 3
	pred, target := g.normal(n, 1), g.normal(n, 1)
	cases = append(cases,
		opCase{"MSELoss", []arg{output("losses", tensor.F32, n), input("pred", dt, pred, n), input("target", dt, target, n)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.MSELoss(ts[0], ts[1], ts[2]))
			}},
		opCase{"MSELossBackward", []arg{output("dpred", dt, n), input("pred", dt, pred, n), input("target", dt, target, n)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.MSELossBackward(ts[0], ts[1], ts[2], 0.25, nil))
			}},
		opCase{"GlobalNorm", []arg{input("a", dt, g.normal(n, 3), n), input("b", tensor.F32, g.normal(7, 1), 7), input("c", dt, g.normal(33, 1), 3, 11)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				norm, err := b.GlobalNorm(ts)
				return []float64{norm}, err
			}},
	)
	return cases
}
