package tensortest

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// rmsNormCases: RMSNorm forward with a weight of dt or F32 and an output of dt or F32 (the autocast case),
// and its backward with and without the weight gradient, the saved rstd computed on the host from the rounded
// input. x is held in its own dtype by the reference too: the op rounds x·rstd to x's dtype.
func rmsNormCases(dt tensor.DType) []opCase {
	g := newGen("rmsnorm" + dt.String())
	var cases []opCase
	for _, c := range []int{1, 7, 33, 64, 576, 1100} {
		n := g.odd()
		x := rounded(dt, g.normal(n*c, 2))
		const eps = 1e-6 // Llama's rms_norm_eps
		rstd := make([]float32, n)
		for i := 0; i < n; i++ {
			var ss float64
			for _, v := range x[i*c : (i+1)*c] {
				ss += float64(v) * float64(v)
			}
			rstd[i] = float32(1 / math.Sqrt(ss/float64(c)+eps))
		}
		xin := input("x", dt, x, n, c)
		xin.exact = true
		dts := []tensor.DType{dt}
		if dt != tensor.F32 {
			dts = append(dts, tensor.F32)
		}
		for _, wdt := range dts {
			w := g.normal(c, 1)
			for _, odt := range dts {
				name := fmt.Sprintf(" N=%d C=%d weight %v out %v", n, c, wdt, odt)
				out := output("out", odt, n, c)
				out.tolAs = dt // x·rstd is rounded to x's dtype inside the op
				cases = append(cases, opCase{"RMSNorm" + name, []arg{out, output("rstd", tensor.F32, n), xin,
					input("weight", wdt, w, c)},
					func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
						return none(b.RMSNorm(ts[0], ts[1], ts[2], ts[3], eps))
					}})
			}
			name := fmt.Sprintf(" N=%d C=%d weight %v", n, c, wdt)
			cases = append(cases,
				opCase{"RMSNormBackward" + name, []arg{output("dx", dt, n, c), accum("dweight", wdt, g.normal(c, 1), c),
					input("dout", dt, g.normal(n*c, 1), n, c), xin, input("weight", wdt, w, c), input("rstd", tensor.F32, rstd, n)},
					func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
						return none(b.RMSNormBackward(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5]))
					}},
				opCase{"RMSNormBackward frozen" + name, []arg{output("dx", dt, n, c), input("dout", dt, g.normal(n*c, 1), n, c), xin,
					input("weight", wdt, w, c), input("rstd", tensor.F32, rstd, n)},
					func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
						return none(b.RMSNormBackward(ts[0], nil, ts[1], ts[2], ts[3], ts[4]))
					}})
		}
		// ResidualRMSNorm: x F32 (the residual stream) plus a branch of dt; its backward into an F32
		// residual gradient, accumulated or not, with its dt copy, with and without the weight gradient.
		xs, ys := g.normal(n*c, 2), rounded(dt, g.normal(n*c, 1))
		sum := make([]float32, n*c)
		for i := range sum {
			sum[i] = xs[i] + ys[i]
		}
		srstd := make([]float32, n)
		for i := 0; i < n; i++ {
			var ss float64
			for _, v := range sum[i*c : (i+1)*c] {
				ss += float64(v) * float64(v)
			}
			srstd[i] = float32(1 / math.Sqrt(ss/float64(c)+eps))
		}
		w := g.normal(c, 1)
		name := fmt.Sprintf(" N=%d C=%d branch %v", n, c, dt)
		cases = append(cases, opCase{"ResidualRMSNorm" + name, []arg{output("sum", tensor.F32, n, c), output("out", dt, n, c),
			output("rstd", tensor.F32, n), input("x", tensor.F32, xs, n, c), input("y", dt, ys, n, c), input("weight", tensor.F32, w, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.ResidualRMSNorm(tensor.ResidualRMSNormArgs{Sum: ts[0], Out: ts[1], Rstd: ts[2], X: ts[3], Y: ts[4],
					Weight: ts[5], Eps: eps}))
			}})
		for _, acc := range []bool{false, true} {
			for _, frozen := range []bool{false, true} {
				dx := output("dx", tensor.F32, n, c)
				if acc {
					dx = accum("dx", tensor.F32, g.normal(n*c, 1), n, c)
				}
				args := []arg{dx, output("dxhalf", dt, n, c), accum("dweight", tensor.F32, g.normal(c, 1), c),
					input("dout", tensor.F32, g.normal(n*c, 1), n, c), input("sum", tensor.F32, sum, n, c),
					input("weight", tensor.F32, w, c), input("rstd", tensor.F32, srstd, n)}
				cases = append(cases, opCase{fmt.Sprintf("ResidualRMSNormBackward%s accumulate=%v frozen=%v", name, acc, frozen), args,
					func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
						a := tensor.ResidualRMSNormBackwardArgs{DX: ts[0], DXHalf: ts[1], DWeight: ts[2], DOut: ts[3], X: ts[4],
							Weight: ts[5], Rstd: ts[6], Accumulate: acc}
						if frozen {
							a.DWeight = nil
						}
						return none(b.ResidualRMSNormBackward(a))
					}})
			}
		}
	}
	return cases
}

// ropeCases: RoPE and its inverse on a dense (B, H, T, D) operand and on the q and k parts of a fused
// (B, T, 3, H, D) projection output read through strides (v must stay untouched), with random positions
// into default-rope cos/sin tables.
func ropeCases(dt tensor.DType) []opCase {
	g := newGen("rope" + dt.String())
	var cases []opCase
	for _, d := range []int{2, 6, 64} {
		bsz, h, t := 1+2*g.rng.IntN(2), g.odd(), g.odd()
		if h*t*d > 4096 {
			h = 1
		}
		half, p := d/2, t+5
		cos, sin := make([]float32, p*half), make([]float32, p*half)
		for pos := 0; pos < p; pos++ {
			for i := 0; i < half; i++ {
				a := float64(pos) * math.Pow(10000, -float64(2*i)/float64(d))
				cos[pos*half+i], sin[pos*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
		}
		pos := g.ints(bsz*t, p)
		tables := []arg{index("positions", tensor.I32, pos, bsz, t), input("cos", tensor.F32, cos, p, half),
			input("sin", tensor.F32, sin, p, half)}
		for _, inverse := range []bool{false, true} {
			name := fmt.Sprintf(" B=%d H=%d T=%d D=%d inverse=%v", bsz, h, t, d, inverse)
			n := bsz * h * t * d
			cases = append(cases, opCase{"RoPE dense" + name, append([]arg{accum("x", dt, g.normal(n, 1), bsz, h, t, d)}, tables...),
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					return none(b.RoPE(tensor.AttnOperand{T: ts[0]}, bsz, h, t, d, ts[1], ts[2], ts[3], inverse))
				}})
			cases = append(cases, opCase{"RoPE fused qkv" + name, append([]arg{accum("qkv", dt, g.normal(3*n, 1), bsz, t, 3, h, d)}, tables...),
				func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
					for part := 0; part < 2; part++ {
						v, err := ts[0].View(part*h*d, 3*n-part*h*d)
						if err != nil {
							return nil, err
						}
						op := tensor.AttnOperand{T: v, StrideB: 3 * t * h * d, StrideH: d, StrideT: 3 * h * d}
						if err := b.RoPE(op, bsz, h, t, d, ts[1], ts[2], ts[3], inverse); err != nil {
							return nil, err
						}
					}
					return nil, nil
				}})
		}
	}
	return cases
}

// gluCases: SwiGLU and GELUTanh, forward and backward. gate is held in its own dtype by the reference too:
// SwiGLU rounds silu(gate) to it.
func gluCases(dt tensor.DType) []opCase {
	g := newGen("glu" + dt.String())
	r, c := g.odd(), g.odd()+64
	n := r * c
	gate := input("gate", dt, g.normal(n, 3), r, c)
	gate.exact = true
	up := input("up", dt, g.normal(n, 1), r, c)
	up.exact = true
	return []opCase{
		{"SwiGLU", []arg{output("out", dt, r, c), gate, up},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.SwiGLU(ts[0], ts[1], ts[2]))
			}},
		{"SwiGLUBackward", []arg{output("dgate", dt, r, c), output("dup", dt, r, c), input("dout", dt, g.normal(n, 1), r, c), gate, up},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.SwiGLUBackward(ts[0], ts[1], ts[2], ts[3], ts[4]))
			}},
		{"SwiGLUBackwardRecompute", []arg{output("dgate", dt, r, c), output("dup", dt, r, c), output("out", dt, r, c),
			input("dout", dt, g.normal(n, 1), r, c), gate, up},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.SwiGLUBackwardRecompute(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5]))
			}},
		{"GELUTanh", []arg{output("out", dt, r, c), input("x", dt, g.normal(n, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) { return none(b.GELUTanh(ts[0], ts[1])) }},
		{"GELUTanhBackward", []arg{output("dx", dt, r, c), input("dout", dt, g.normal(n, 1), r, c), input("x", dt, g.normal(n, 3), r, c)},
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				return none(b.GELUTanhBackward(ts[0], ts[1], ts[2]))
			}},
	}
}
