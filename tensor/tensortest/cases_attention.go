package tensortest

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// attnSpec is one fused attention case. Packed cases read Q, K and V in place from one (B, T, (Hq+2·Hkv)·D)
// buffer (the fused QKV projection's output), write O as (B, T, Hq·D) and dQ, dK, dV into one packed gradient
// buffer, all through AttnOperand strides; dense cases use (B, H, T, D) operands.
type attnSpec struct {
	name                  string
	B, Hq, Hkv, Tq, Tk, D int
	packed                bool
	mask, causal, seg     bool
	p                     float32
	// nanQ makes query row 2 of head Hq−1 of batch member 1 NaN (all of that row's scores), nanK one element
	// of key 3 of key/value head 0 of batch member 1 (the scores of every row that sees key 3; B ≥ 2, Tk ≥ 4).
	// Those rows' O, LSE and dQ must be NaN and every other row's O and LSE finite (docs/ATTENTION.md). Batch
	// member 1 pads with −1e4, not −Inf: whether a NaN row's P at a −Inf key (exp(−Inf − NaN)) feeds that key's
	// gradients is left open by the contract, as is a forbidden pair's 0 times a NaN operand.
	nanQ, nanK bool
}

// attentionCases: Attention and AttentionBackward on odd T, padding masks (−Inf, −1e4, finfo.min, and a fully
// masked batch member), causal with Tq = Tk and Tq < Tk, segments, grouped-query heads, dropout, head sizes 64
// and 128 (the GPU kernel's) and an odd one (a backend may refuse it with ErrUnsupported: the case is then
// skipped), and NaN in Q and K (NaN rows, rows shorter and longer than 16 keys). The reference computes with the operands' own dtype (arg.exact), so half results are compared
// against the same rounding of P' and dS the contract prescribes (docs/ATTENTION.md). A backward case's O and
// LSE come from the reference's forward on the same inputs.
func attentionCases(dt tensor.DType) []opCase {
	g := newGen("attention" + dt.String())
	specs := []attnSpec{
		{name: "packed padding", B: 3, Hq: 2, Hkv: 2, Tq: 33, Tk: 33, D: 64, packed: true, mask: true},
		{name: "packed causal", B: 2, Hq: 3, Hkv: 3, Tq: 7, Tk: 7, D: 64, packed: true, causal: true},
		{name: "dense causal Tq<Tk", B: 2, Hq: 2, Hkv: 2, Tq: 3, Tk: 33, D: 64, causal: true},
		{name: "packed GQA segments", B: 2, Hq: 4, Hkv: 2, Tq: 33, Tk: 33, D: 64, packed: true, seg: true},
		{name: "packed dropout padding", B: 2, Hq: 2, Hkv: 2, Tq: 33, Tk: 33, D: 64, packed: true, mask: true, p: 0.1},
		{name: "dense D=128 GQA causal padding", B: 2, Hq: 4, Hkv: 1, Tq: 7, Tk: 7, D: 128, mask: true, causal: true},
		{name: "dense odd head size", B: 1, Hq: 3, Hkv: 3, Tq: 7, Tk: 7, D: 7, mask: true},
		{name: "dense NaN GQA padding", B: 2, Hq: 2, Hkv: 1, Tq: 7, Tk: 7, D: 64, mask: true, nanQ: true, nanK: true},
		{name: "packed NaN dropout padding", B: 2, Hq: 2, Hkv: 2, Tq: 33, Tk: 33, D: 64, packed: true, mask: true, p: 0.1, nanQ: true, nanK: true},
		{name: "dense NaN causal", B: 2, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 64, causal: true, nanK: true},
		{name: "dense NaN odd head size", B: 2, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 7, mask: true, nanQ: true, nanK: true},
	}
	var cases []opCase
	for _, s := range specs {
		cases = append(cases, s.cases(g, dt)...)
	}
	return cases
}

// widths returns the channel counts of the packed QKV buffer, of O and of dO.
func (s attnSpec) widths() (qkv, o int) { return (s.Hq + 2*s.Hkv) * s.D, s.Hq * s.D }

// cases returns the spec's forward and backward cases.
func (s attnSpec) cases(g *gen, dt tensor.DType) []opCase {
	nq, nk := s.B*s.Hq*s.Tq*s.D, s.B*s.Hkv*s.Tk*s.D
	var mask []float32
	if s.mask {
		mask = make([]float32, s.B*s.Tk)
		pads := []float32{float32(math.Inf(-1)), -1e4, -math.MaxFloat32}
		for b := 0; b < s.B; b++ {
			for j := s.Tk - 1 - b*s.Tk/4; j < s.Tk; j++ {
				mask[b*s.Tk+j] = pads[b%3]
			}
		}
		if s.B >= 3 {
			for j := 0; j < s.Tk; j++ {
				mask[(s.B-1)*s.Tk+j] = float32(math.Inf(-1)) // a fully masked batch member: O = 0, LSE = −Inf
			}
		}
	}
	var seg []int64
	if s.seg {
		seg = make([]int64, s.B*s.Tq)
		for b := 0; b < s.B; b++ {
			for i := 1; i < s.Tq; i++ {
				seg[b*s.Tq+i] = seg[b*s.Tq+i-1]
				if g.rng.IntN(5) == 0 {
					seg[b*s.Tq+i]++
				}
			}
		}
	}
	wqkv, wo := s.widths()
	var fwdIn []arg // the inputs of the forward (Q, K, V or QKV)
	if s.packed {
		fwdIn = []arg{exact(input("qkv", dt, g.normal(s.B*s.Tq*wqkv, 1), s.B, s.Tq, wqkv))}
	} else {
		fwdIn = []arg{exact(input("q", dt, g.normal(nq, 1), nq)), exact(input("k", dt, g.normal(nk, 1), nk)),
			exact(input("v", dt, g.normal(nk, 1), nk))}
	}
	nan := float32(math.NaN())
	if s.nanQ {
		for d := 0; d < s.D; d++ {
			if s.packed {
				fwdIn[0].f[(s.Tq+2)*wqkv+(s.Hq-1)*s.D+d] = nan
			} else {
				fwdIn[0].f[((s.Hq+s.Hq-1)*s.Tq+2)*s.D+d] = nan
			}
		}
	}
	if s.nanK {
		if s.packed {
			fwdIn[0].f[(s.Tq+3)*wqkv+s.Hq*s.D+1] = nan
		} else {
			fwdIn[1].f[(s.Hkv*s.Tk+3)*s.D+1] = nan
		}
	}
	extra := func() []arg {
		var a []arg
		if mask != nil {
			a = append(a, input("mask", tensor.F32, mask, s.B, s.Tk))
		}
		if seg != nil {
			a = append(a, index("segments", tensor.I32, seg, s.B, s.Tq))
		}
		return a
	}
	oShape, dqkv := []int{nq}, []arg{exact(output("dq", dt, nq)), exact(output("dk", dt, nk)), exact(output("dv", dt, nk))}
	if s.packed {
		oShape, dqkv = []int{s.B, s.Tq, wo}, []arg{exact(output("dqkv", dt, s.B, s.Tq, wqkv))}
	}
	oArg, lseArg := exact(output("o", dt, oShape...)), output("lse", tensor.F32, s.B*s.Hq*s.Tq)
	if s.nanQ || s.nanK {
		oArg.nan, lseArg.nan = s.nanRows(s.Hq, s.Hq*s.D, false), s.nanRows(s.Hq, 1, false)
		if s.packed {
			dqkv[0].nan = s.nanRows(s.Hq, wqkv, true)
		} else {
			dqkv[0].nan = s.nanRows(s.Hq, s.Hq*s.D, true)
		}
	}
	fwdArgs := append(append(append([]arg(nil), fwdIn...), oArg, lseArg), extra()...)
	fwd := opCase{name: fmt.Sprintf("Attention %s (B=%d Hq=%d Hkv=%d Tq=%d Tk=%d D=%d p=%v)", s.name, s.B, s.Hq, s.Hkv, s.Tq, s.Tk, s.D, s.p),
		args: fwdArgs,
		call: func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			a, _ := s.args(ts)
			return none(b.Attention(a))
		}}
	o, lse := s.reference(fwd, dt)
	bwdArgs := append(append([]arg(nil), fwdIn...), exact(input("o", dt, o, oShape...)), input("lse", tensor.F32, lse, s.B*s.Hq*s.Tq))
	bwdArgs = append(bwdArgs, extra()...)
	bwdArgs = append(bwdArgs, exact(input("do", dt, g.normal(nq, 1), oShape...)))
	bwdArgs = append(bwdArgs, dqkv...)
	bwd := opCase{name: "AttentionBackward" + fwd.name[len("Attention"):], args: bwdArgs,
		call: func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			a, rest := s.args(ts)
			ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: s.operand(rest[0], 0, s.Hq, s.Tq, wo)}
			if s.packed {
				ba.DQ, ba.DK, ba.DV = s.qkv(rest[1])
			} else {
				ba.DQ, ba.DK, ba.DV = tensor.AttnOperand{T: rest[1]}, tensor.AttnOperand{T: rest[2]}, tensor.AttnOperand{T: rest[3]}
			}
			return none(b.AttentionBackward(ba))
		}}
	return []opCase{fwd, bwd}
}

// nanRow reports whether row i of query head h of batch member b sees a NaN score (attnSpec.nanQ, nanK).
func (s attnSpec) nanRow(b, h, i int) bool {
	return s.nanQ && b == 1 && h == s.Hq-1 && i == 2 ||
		s.nanK && b == 1 && h/(s.Hq/s.Hkv) == 0 && (!s.causal || i >= 3+s.Tk-s.Tq)
}

// nanRows returns the arg.nan contract of a per-row output with rows' width elements per query row (D for O
// and dQ, 1 for LSE): in a packed buffer of row stride width the row's D elements of head h (the buffer's first
// Hq·D channels) or, dense, the (B, Hq, Tq, per) layout. dq marks the output as dQ: a row before key 3 of a
// causal case does not see it, but its dQ = dS·K may multiply dS = 0 by the NaN of K (a GEMM does, a kernel
// that skips forbidden pairs does not), so those rows are open.
func (s attnSpec) nanRows(hq, width int, dq bool) []int8 {
	per := s.D
	if width == 1 {
		per = 1
	}
	n := s.B * s.Tq * width
	if !s.packed || width == 1 {
		n = s.B * hq * s.Tq * per
	}
	v := make([]int8, n)
	for b := 0; b < s.B; b++ {
		for h := 0; h < hq; h++ {
			for i := 0; i < s.Tq; i++ {
				want := nanNever
				if s.nanRow(b, h, i) {
					want = nanMust
				} else if dq && s.causal && s.nanK && b == 1 && h/(s.Hq/s.Hkv) == 0 {
					want = nanOpen
				}
				at := ((b*hq+h)*s.Tq + i) * per
				if s.packed && width > 1 {
					at = (b*s.Tq+i)*width + h*s.D
				}
				for d := 0; d < per; d++ {
					v[at+d] = want
				}
			}
		}
	}
	return v
}

// args builds the forward's arguments from a case's tensors (inputs, o, lse, mask, segments in that order)
// and returns the tensors after them.
func (s attnSpec) args(ts []*tensor.Tensor) (tensor.AttentionArgs, []*tensor.Tensor) {
	_, wo := s.widths()
	a := tensor.AttentionArgs{B: s.B, Hq: s.Hq, Hkv: s.Hkv, Tq: s.Tq, Tk: s.Tk, D: s.D,
		Scale: float32(1 / math.Sqrt(float64(s.D))), Causal: s.causal, DropoutP: s.p, Seed: 0x5EED, Offset: 11}
	if s.packed {
		a.Q, a.K, a.V = s.qkv(ts[0])
		ts = ts[1:]
	} else {
		a.Q, a.K, a.V = tensor.AttnOperand{T: ts[0]}, tensor.AttnOperand{T: ts[1]}, tensor.AttnOperand{T: ts[2]}
		ts = ts[3:]
	}
	a.O, a.LSE = s.operand(ts[0], 0, s.Hq, s.Tq, wo), ts[1]
	ts = ts[2:]
	if s.mask {
		a.Mask, ts = ts[0], ts[1:]
	}
	if s.seg {
		a.Segments, ts = ts[0], ts[1:]
	}
	return a, ts
}

// operand is the (B, H, T, D) operand of a (B, T, width) tensor starting at channel off, or the dense
// operand t for a dense spec.
func (s attnSpec) operand(t *tensor.Tensor, off, h, tt, width int) tensor.AttnOperand {
	if !s.packed {
		return tensor.AttnOperand{T: t}
	}
	v, err := t.View(off, t.Numel()-off)
	if err != nil {
		panic(err)
	}
	return tensor.AttnOperand{T: v, StrideB: tt * width, StrideH: s.D, StrideT: width}
}

// qkv returns the Q, K and V operands of a packed (B, T, (Hq+2·Hkv)·D) buffer.
func (s attnSpec) qkv(t *tensor.Tensor) (q, k, v tensor.AttnOperand) {
	w, _ := s.widths()
	return s.operand(t, 0, s.Hq, s.Tq, w), s.operand(t, s.Hq*s.D, s.Hkv, s.Tk, w), s.operand(t, (s.Hq+s.Hkv)*s.D, s.Hkv, s.Tk, w)
}

// reference runs the forward case on the CPU backend with the operands in dt and returns O and LSE.
func (s attnSpec) reference(c opCase, dt tensor.DType) (o, lse []float32) {
	b := cpu.New()
	ts := make([]*tensor.Tensor, len(c.args))
	for i, a := range c.args {
		x, err := b.Alloc(a.dt, a.shape...)
		if err != nil {
			panic(err)
		}
		switch {
		case a.i != nil:
			v := make([]int32, len(a.i))
			for j, id := range a.i {
				v[j] = int32(id)
			}
			err = b.Upload(x, v)
		case a.f != nil:
			err = b.Upload(x, a.f)
		}
		if err != nil {
			panic(err)
		}
		ts[i] = x
	}
	if _, err := c.call(b, ts); err != nil {
		panic(err)
	}
	a, _ := s.args(ts)
	o, lse = make([]float32, a.O.T.Numel()), make([]float32, a.LSE.Numel())
	if err := b.Download(o, a.O.T); err != nil {
		panic(err)
	}
	if err := b.Download(lse, a.LSE); err != nil {
		panic(err)
	}
	return o, lse
}

// exact marks a for the reference to hold in its own dtype (arg.exact).
func exact(a arg) arg {
	a.exact = true
	return a
}
