package opcheck

import (
	"math"
	"slices"

	"github.com/tune-ml/tune/tensor"
)

// AttnOperand is a validated (B, H, T, D) operand of fused attention: element (b, h, t, d) is element
// b·SB + h·SH + t·ST + d of T (counted from T's Offset). Dense operands have their strides filled in.
type AttnOperand struct {
	T          *tensor.Tensor // the storage
	SB, SH, ST int            // strides of the batch, head and position axes, never all 0 here
}

// Index returns the position in T's elements (from T's Offset) of element (b, h, t, 0).
func (o AttnOperand) Index(b, h, t int) int { return b*o.SB + h*o.SH + t*o.ST }

// Attention is a validated call of Backend.Attention or AttentionBackward: the sizes and flags of the
// arguments, and every operand with its strides.
type Attention struct {
	B, Hq, Hkv, Tq, Tk, D int            // sizes; Hq is a multiple of Hkv
	Q, K, V, O            AttnOperand    // the forward's operands
	DO, DQ, DK, DV        AttnOperand    // the backward's (zero for a forward)
	LSE, Mask, Segments   *tensor.Tensor // LSE (B, Hq, Tq) F32; Mask (B, Tk) F32 or nil; Segments (B, T) I32 or nil
	KeepBits              *tensor.Tensor // I32 dropout keep-bit scratch (tensor.AttentionKeepBitsLen) or nil
	Scale, DropoutP       float32        // softmax scale and dropout probability
	Causal                bool           // bottom-right aligned causal mask
	Seed, Offset          uint64         // the dropout stream
}

// Group returns Hq/Hkv, the query heads that share one key/value head.
func (g Attention) Group() int { return g.Hq / g.Hkv }

// AttentionTensors returns the tensors of a forward call in the order errors name them (Q, K, V, O, LSE, Mask,
// Segments, KeepBits).
func AttentionTensors(a tensor.AttentionArgs) []*tensor.Tensor {
	return []*tensor.Tensor{a.Q.T, a.K.T, a.V.T, a.O.T, a.LSE, a.Mask, a.Segments, a.KeepBits}
}

// AttentionBackwardTensors returns the tensors of a backward call in the order errors name them (the forward's,
// then dO, dQ, dK, dV).
func AttentionBackwardTensors(a tensor.AttentionBackwardArgs) []*tensor.Tensor {
	return append(AttentionTensors(a.AttentionArgs), a.DO.T, a.DQ.T, a.DK.T, a.DV.T)
}

// AttentionGeometry checks the arguments of Backend.Attention, with own telling which buffers belong to the
// backend: every tensor a live view of own's (View); Q, K, V and O of one float dtype, LSE and Mask F32,
// Segments I32 (ErrDType); B, Tq, Tk ≥ 0, Hq, Hkv, D ≥ 1 with Hq a multiple of Hkv, Scale finite, DropoutP in
// [0, 1) and non-negative strides (ErrArgument); every operand's elements inside its tensor, O's elements
// distinct, LSE of B·Hq·Tq elements, Mask of B·Tk and Segments of B·Tq with Tq == Tk, KeepBits (I32) of
// tensor.AttentionKeepBitsLen elements (ErrShape).
func AttentionGeometry(a tensor.AttentionArgs, own Owner) (Attention, error) {
	g := Attention{B: a.B, Hq: a.Hq, Hkv: a.Hkv, Tq: a.Tq, Tk: a.Tk, D: a.D, LSE: a.LSE, Mask: a.Mask,
		Segments: a.Segments, KeepBits: a.KeepBits, Scale: a.Scale, DropoutP: a.DropoutP, Causal: a.Causal, Seed: a.Seed, Offset: a.Offset}
	if !(a.B >= 0 && a.Tq >= 0 && a.Tk >= 0 && a.Hq >= 1 && a.Hkv >= 1 && a.D >= 1) {
		return g, Errorf(tensor.ErrArgument, "B, Hq, Hkv, Tq, Tk, D = %d, %d, %d, %d, %d, %d; want B, Tq, Tk ≥ 0 and Hq, Hkv, D ≥ 1",
			a.B, a.Hq, a.Hkv, a.Tq, a.Tk, a.D)
	}
	if a.Hq%a.Hkv != 0 {
		return g, Errorf(tensor.ErrArgument, "Hq = %d is not a multiple of Hkv = %d (grouped-query attention shares each key/value head among Hq/Hkv query heads)", a.Hq, a.Hkv)
	}
	if math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0) {
		return g, Errorf(tensor.ErrArgument, "Scale = %v, want a finite number (usually 1/sqrt(D))", a.Scale)
	}
	if !(a.DropoutP >= 0 && a.DropoutP < 1) {
		return g, Errorf(tensor.ErrArgument, "DropoutP = %v, want 0 ≤ p < 1", a.DropoutP)
	}
	var err error
	if g.Q, err = attnOperand("Q", a.Q, a.B, a.Hq, a.Tq, a.D, false, own); err != nil {
		return g, err
	}
	dt := a.Q.T.DType
	for _, x := range []struct {
		name string
		op   tensor.AttnOperand
		dst  *AttnOperand
		h, t int
		out  bool
	}{{"K", a.K, &g.K, a.Hkv, a.Tk, false}, {"V", a.V, &g.V, a.Hkv, a.Tk, false}, {"O", a.O, &g.O, a.Hq, a.Tq, true}} {
		if *x.dst, err = attnOperand(x.name, x.op, a.B, x.h, x.t, a.D, x.out, own, dt); err != nil {
			return g, err
		}
	}
	if err := View("LSE", a.LSE, own, tensor.F32); err != nil {
		return g, err
	}
	if err := Numel("LSE", a.LSE, a.B*a.Hq*a.Tq); err != nil {
		return g, err
	}
	if a.Mask != nil {
		if err := View("Mask", a.Mask, own, tensor.F32); err != nil {
			return g, err
		}
		if err := Numel("Mask", a.Mask, a.B*a.Tk); err != nil {
			return g, err
		}
	}
	if a.Segments != nil {
		if err := View("Segments", a.Segments, own, tensor.I32); err != nil {
			return g, err
		}
		if a.Tq != a.Tk {
			return g, Errorf(tensor.ErrShape, "Segments need Tq == Tk, got Tq = %d, Tk = %d", a.Tq, a.Tk)
		}
		if err := Numel("Segments", a.Segments, a.B*a.Tq); err != nil {
			return g, err
		}
	}
	if a.KeepBits != nil {
		if err := View("KeepBits", a.KeepBits, own, tensor.I32); err != nil {
			return g, err
		}
		if err := Numel("KeepBits", a.KeepBits, tensor.AttentionKeepBitsLen(a.B, a.Hq, a.Tq, a.Tk)); err != nil {
			return g, err
		}
	}
	return g, nil
}

// AttentionBackwardGeometry checks the arguments of Backend.AttentionBackward: the forward's (AttentionGeometry)
// and dO, dQ, dK, dV of the operands' dtype and shapes, with the elements of each output distinct.
func AttentionBackwardGeometry(a tensor.AttentionBackwardArgs, own Owner) (Attention, error) {
	g, err := AttentionGeometry(a.AttentionArgs, own)
	if err != nil {
		return g, err
	}
	dt := a.Q.T.DType
	for _, x := range []struct {
		name string
		op   tensor.AttnOperand
		dst  *AttnOperand
		h, t int
		out  bool
	}{{"DO", a.DO, &g.DO, a.Hq, a.Tq, false}, {"DQ", a.DQ, &g.DQ, a.Hq, a.Tq, true},
		{"DK", a.DK, &g.DK, a.Hkv, a.Tk, true}, {"DV", a.DV, &g.DV, a.Hkv, a.Tk, true}} {
		if *x.dst, err = attnOperand(x.name, x.op, a.B, x.h, x.t, a.D, x.out, own, dt); err != nil {
			return g, err
		}
	}
	return g, nil
}

// attnOperand checks one (b, h, t, d) operand: its tensor a live float view (of Q's dtype dts[0] when given), its
// strides non-negative (all 0: dense), every element inside the tensor, and for an output (out) no two elements
// sharing storage.
func attnOperand(name string, x tensor.AttnOperand, b, h, t, d int, out bool, own Owner, dts ...tensor.DType) (AttnOperand, error) {
	if err := View(name, x.T, own, Floats...); err != nil {
		return AttnOperand{}, err
	}
	if len(dts) > 0 && x.T.DType != dts[0] {
		return AttnOperand{}, Errorf(tensor.ErrDType, "%s is %v but Q is %v; all operands share one dtype", name, x.T.DType, dts[0])
	}
	o := AttnOperand{T: x.T, SB: x.StrideB, SH: x.StrideH, ST: x.StrideT}
	if o.SB < 0 || o.SH < 0 || o.ST < 0 {
		return o, Errorf(tensor.ErrArgument, "%s strides (B, H, T) = (%d, %d, %d); want ≥ 0", name, o.SB, o.SH, o.ST)
	}
	if o.SB == 0 && o.SH == 0 && o.ST == 0 {
		o.ST, o.SH, o.SB = d, t*d, h*t*d
	}
	if b == 0 || t == 0 {
		return o, nil
	}
	if ext := (b-1)*o.SB + (h-1)*o.SH + (t-1)*o.ST + d; ext > x.T.Numel() {
		return o, Errorf(tensor.ErrShape, "%s (B, H, T, D) = (%d, %d, %d, %d) with strides (%d, %d, %d) spans %d elements; its tensor has %d",
			name, b, h, t, d, o.SB, o.SH, o.ST, ext, x.T.Numel())
	}
	if out && !disjoint([][2]int{{b, o.SB}, {h, o.SH}, {t, o.ST}}, d) {
		return o, Errorf(tensor.ErrArgument, "%s strides (B, H, T) = (%d, %d, %d) make elements of a (%d, %d, %d, %d) output overlap",
			name, o.SB, o.SH, o.ST, b, h, t, d)
	}
	return o, nil
}

// disjoint reports whether axes given as (extent, stride), over a contiguous innermost run of d elements,
// address distinct elements: ordered by stride, each axis's stride must clear the span of the axes below it.
func disjoint(axes [][2]int, d int) bool {
	axes = slices.DeleteFunc(slices.Clone(axes), func(a [2]int) bool { return a[0] <= 1 })
	slices.SortFunc(axes, func(x, y [2]int) int { return x[1] - y[1] })
	span := d
	for _, a := range axes {
		if a[1] < span {
			return false
		}
		span = (a[0]-1)*a[1] + span
	}
	return true
}
