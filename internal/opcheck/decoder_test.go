package opcheck

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestRoPEGeometry(t *testing.T) {
	pos := view(tensor.I32, 8, 0, 2, 4)
	tab := view(tensor.F32, 16, 0, 4, 4)
	x := view(tensor.F32, 2*3*4*8, 0, 2*3*4*8)
	g, err := RoPEGeometry(tensor.AttnOperand{T: x}, 2, 3, 4, 8, pos, tab, tab)
	checkErr(t, err, nil, "")
	if g.StrideB != 96 || g.StrideH != 32 || g.StrideT != 8 || g.P != 4 || g.Half != 4 {
		t.Fatalf("dense geometry = %+v, want strides (96, 32, 8), P 4, Half 4", g)
	}
	// The q part of a fused (B, T, 3, H, D) buffer: T stride 3·H·D, H stride D.
	qkv := view(tensor.F32, 2*4*3*3*8, 0, 2*4*3*3*8)
	_, err = RoPEGeometry(tensor.AttnOperand{T: qkv, StrideB: 4 * 72, StrideH: 8, StrideT: 72}, 2, 3, 4, 8, pos, tab, tab)
	checkErr(t, err, nil, "")
	for _, c := range []struct {
		name     string
		x        tensor.AttnOperand
		b, d     int
		cos, sin *tensor.Tensor
		sentinel error
		words    string
	}{
		{"odd D", tensor.AttnOperand{T: x}, 2, 7, tab, tab, tensor.ErrArgument, "D = 7 is odd"},
		{"negative extent", tensor.AttnOperand{T: x}, -1, 8, tab, tab, tensor.ErrArgument, "want ≥ 0"},
		{"positions not B·T", tensor.AttnOperand{T: x}, 1, 8, tab, tab, tensor.ErrShape, "positions has 8 elements, want 4"},
		{"table width", tensor.AttnOperand{T: x}, 2, 8, view(tensor.F32, 12, 0, 4, 3), tab, tensor.ErrShape, "want (P, D/2) = (P, 4)"},
		{"tables differ", tensor.AttnOperand{T: x}, 2, 8, tab, view(tensor.F32, 20, 0, 5, 4), tensor.ErrShape, "they must match"},
		{"heads overlap", tensor.AttnOperand{T: x, StrideB: 96, StrideH: 4, StrideT: 8}, 2, 8, tab, tab, tensor.ErrArgument, "overlap itself"},
		{"negative stride", tensor.AttnOperand{T: x, StrideB: -96, StrideH: 32, StrideT: 8}, 2, 8, tab, tab, tensor.ErrArgument, "want ≥ 0"},
		{"past the tensor", tensor.AttnOperand{T: x, StrideB: 97, StrideH: 32, StrideT: 8}, 2, 8, tab, tab, tensor.ErrShape, "spans 193"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := RoPEGeometry(c.x, c.b, 3, 4, c.d, pos, c.cos, c.sin)
			checkErr(t, err, c.sentinel, c.words)
		})
	}
	checkErr(t, Positions([]int32{0, 3, 4}, 2, 4), tensor.ErrArgument, "positions[1, 0] = 4 is outside")
	checkErr(t, Positions([]int32{0, 3, -1}, 3, 4), tensor.ErrArgument, "positions[0, 2] = -1")
	checkErr(t, Positions([]int32{0, 3, 1}, 3, 4), nil, "")
}
