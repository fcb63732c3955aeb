package opcheck

import (
	"slices"

	"github.com/tune-ml/tune/tensor"
)

// RoPE is a validated rotary-embedding call: the operand's strides with the dense default filled in, and the
// extents of the rotation.
type RoPE struct {
	B, H, T, D                int // operand extents (D even); Half = D/2 pairs are rotated per row
	Half                      int // D/2, the columns of the cos/sin tables
	P                         int // rows of the cos/sin tables: positions must lie in [0, P)
	StrideB, StrideH, StrideT int // element distances of the operand, never all 0 here
}

// RoPEGeometry checks the arguments of Backend.RoPE after View has checked x.T (float), positions (I32) and
// cos, sin (F32): b, h, t, d ≥ 0 and d even (ErrArgument); positions hold b·t elements and cos, sin are
// (P, d/2) tables of one shape (ErrShape); the operand's strides are ≥ 0, its elements are distinct (the
// rotation is in place, so an operand that overlaps itself is ErrArgument) and lie inside x.T (ErrShape).
// Strides all 0 mean a dense (B, H, T, D) operand.
func RoPEGeometry(x tensor.AttnOperand, b, h, t, d int, positions, cos, sin *tensor.Tensor) (RoPE, error) {
	g := RoPE{B: b, H: h, T: t, D: d, Half: d / 2, StrideB: x.StrideB, StrideH: x.StrideH, StrideT: x.StrideT}
	if !(b >= 0 && h >= 0 && t >= 0 && d >= 0) {
		return g, Errorf(tensor.ErrArgument, "B, H, T, D = %d, %d, %d, %d; want ≥ 0", b, h, t, d)
	}
	if d%2 != 0 {
		return g, Errorf(tensor.ErrArgument, "D = %d is odd; rotate-half RoPE pairs x[..., i] with x[..., i+D/2]", d)
	}
	if err := Numel("positions", positions, b*t); err != nil {
		return g, err
	}
	if len(cos.Shape) != 2 || cos.Shape[1] != g.Half {
		return g, Errorf(tensor.ErrShape, "cos is %v, want (P, D/2) = (P, %d)", cos.Shape, g.Half)
	}
	if !cos.Shape.Equal(sin.Shape) {
		return g, Errorf(tensor.ErrShape, "sin is %v but cos is %v; they must match", sin.Shape, cos.Shape)
	}
	g.P = cos.Shape[0]
	if x.StrideB == 0 && x.StrideH == 0 && x.StrideT == 0 {
		g.StrideT, g.StrideH, g.StrideB = d, t*d, h*t*d
	}
	if !(g.StrideB >= 0 && g.StrideH >= 0 && g.StrideT >= 0) {
		return g, Errorf(tensor.ErrArgument, "strides (B, H, T) = (%d, %d, %d); want ≥ 0", g.StrideB, g.StrideH, g.StrideT)
	}
	if b == 0 || h == 0 || t == 0 || d == 0 {
		return g, nil
	}
	// Distinct elements: ordered by stride, each axis must step past everything the smaller axes span.
	axes := [][2]int{{1, d}, {g.StrideT, t}, {g.StrideH, h}, {g.StrideB, b}}
	slices.SortStableFunc(axes, func(p, q [2]int) int { return p[0] - q[0] })
	span := 0
	for _, a := range axes {
		if a[1] == 1 {
			continue
		}
		if a[0] <= span {
			return g, Errorf(tensor.ErrArgument, "strides (B, H, T) = (%d, %d, %d) with D = %d make the operand overlap itself",
				g.StrideB, g.StrideH, g.StrideT, d)
		}
		span += (a[1] - 1) * a[0]
	}
	if need := (b-1)*g.StrideB + (h-1)*g.StrideH + (t-1)*g.StrideT + d; x.T.Numel() < need {
		return g, Errorf(tensor.ErrShape, "x has %d elements; the (%d, %d, %d, %d) operand with strides (%d, %d, %d) spans %d",
			x.T.Numel(), b, h, t, d, g.StrideB, g.StrideH, g.StrideT, need)
	}
	return g, nil
}

// Positions requires every position (the values of RoPE's positions tensor) to lie in [0, p), the rows of
// the cos/sin tables; the first one outside is an ErrArgument naming its (b, t) and what to do.
func Positions(pos []int32, t, p int) error {
	for i, v := range pos {
		if v < 0 || int(v) >= p {
			return Errorf(tensor.ErrArgument, "positions[%d, %d] = %d is outside the cos/sin tables' [0, %d) (build them for max_position_embeddings rows)",
				i/max(t, 1), i%max(t, 1), v, p)
		}
	}
	return nil
}
