package tensortest

import (
	"errors"
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// RunOpSuite checks every op of b, forward and backward, against the CPU reference backend: each case draws
// random inputs with odd shapes (extents from 1, 3, 7, 33), runs the op on b with F32, F16 and BF16 storage
// and on the reference with the same values held as F32, and compares outputs with Tolerance. On b every
// tensor is an unaligned view inside a guarded buffer, every overwritten output starts as NaN (so an element
// the op fails to write shows up), inputs must come back unchanged, and the guards must stay intact. Data
// moves only through the Backend interface (Upload/Download), so any backend inherits the suite unchanged:
//
//	func TestOps(t *testing.T) { tensortest.ForEachBackend(t, tensortest.RunOpSuite) }
func RunOpSuite(t *testing.T, b tensor.Backend) {
	t.Run("memory", func(t *testing.T) { checkMemory(t, b) })
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			var cases []opCase
			for _, build := range []func(tensor.DType) []opCase{elementwiseCases, activationCases, normCases,
				softmaxCases, dropoutCases, layoutCases, lossCases, gemmCases, attentionCases, rmsNormCases,
				ropeCases, gluCases} {
				cases = append(cases, build(dt)...)
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { run(t, b, c) })
			}
		})
	}
	t.Run("F32 master state", func(t *testing.T) {
		for _, c := range optimizerCases() {
			t.Run(c.name, func(t *testing.T) { run(t, b, c) })
		}
	})
	t.Run("device step scalars", func(t *testing.T) { CheckDeviceStep(t, b) })
	t.Run("AdamW clipping as it reads", func(t *testing.T) { CheckClippedAdamW(t, b) })
	t.Run("device loss scaler", func(t *testing.T) { CheckDeviceScaler(t, b) })
	t.Run("errors", func(t *testing.T) { checkErrors(t, b) })
}

// checkMemory checks Alloc, Upload/Download conversions (bit-exact against tensor's converters), views and
// Copy directly.
func checkMemory(t *testing.T, b tensor.Backend) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 65504, 65520, 1e-8, 5.96e-8, 3.4e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1 + 1.0/256, 1.00048828125}
	for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
		t.Run("Upload rounds "+dt.String()+" like the tensor package", func(t *testing.T) {
			x, err := b.Alloc(dt, len(special))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(x)
			if err := b.Upload(x, special); err != nil {
				t.Fatal(err)
			}
			bits := make([]uint16, len(special))
			if err := b.Download(bits, x); err != nil {
				t.Fatal(err)
			}
			wide := Download(t, b, x)
			for i, v := range special {
				want := tensor.F32ToBF16(v)
				widened := tensor.BF16ToF32(want)
				if dt == tensor.F16 {
					want = tensor.F32ToF16(v)
					widened = tensor.F16ToF32(want)
				}
				if bits[i] != want && !(v != v && isHalfNaN(dt, bits[i])) {
					t.Errorf("Upload(%v) stored %#04x, want %#04x", v, bits[i], want)
				}
				if !same(wide[i], widened) {
					t.Errorf("Download of %v gave %v, want %v", v, wide[i], widened)
				}
			}
		})
	}
	t.Run("Alloc zero-fills; Copy between views", func(t *testing.T) {
		x, err := b.Alloc(tensor.BF16, 2, 5)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free(x)
		for i, v := range Download(t, b, x) {
			if v != 0 {
				t.Fatalf("element %d of a new tensor = %v", i, v)
			}
		}
		if err := b.Upload(x, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); err != nil {
			t.Fatal(err)
		}
		lo, _ := x.View(0, 5)
		hi, _ := x.View(5, 5)
		if err := b.Copy(lo, hi); err != nil {
			t.Fatal(err)
		}
		got := Download(t, b, x)
		for i, want := range []float32{6, 7, 8, 9, 10, 6, 7, 8, 9, 10} {
			if got[i] != want {
				t.Fatalf("after Copy: %v", got)
			}
		}
	})
}

func isHalfNaN(dt tensor.DType, h uint16) bool {
	if dt == tensor.F16 {
		return h&0x7C00 == 0x7C00 && h&0x03FF != 0
	}
	return h&0x7F80 == 0x7F80 && h&0x007F != 0
}

// foreignBuffer is a tensor.Buffer no backend made.
type foreignBuffer struct{}

func (foreignBuffer) Len() int { return 1 << 10 }

// checkErrors requires typed errors (a *tensor.OpError naming the op and wrapping the right sentinel) for
// misuse every backend must reject the same way.
func checkErrors(t *testing.T, b tensor.Backend) {
	mk := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		x, err := b.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	ids := mk(tensor.I64, 2)
	if err := b.Upload(ids, []int64{0, 5}); err != nil {
		t.Fatal(err)
	}
	foreign := &tensor.Tensor{Shape: tensor.Shape{4}, DType: tensor.F32, Buf: foreignBuffer{}}
	_, nfErr := b.NonFiniteCheckAndUnscale([]*tensor.Tensor{mk(tensor.F32, 2), mk(tensor.BF16, 2)}, 0.5)
	_, ceErr := b.CrossEntropy(mk(tensor.F32, 2), mk(tensor.F32, 2, 5), ids, -100)
	cases := []struct {
		name, op  string
		err, want error
	}{
		{"Add of different element counts", "Add", b.Add(mk(tensor.F32, 3), mk(tensor.F32, 3), mk(tensor.F32, 4)), tensor.ErrShape},
		{"LayerNorm with a BF16 mean", "LayerNorm", b.LayerNorm(mk(tensor.F32, 2, 3), mk(tensor.BF16, 2), mk(tensor.F32, 2), mk(tensor.F32, 2, 3), mk(tensor.F32, 3), mk(tensor.F32, 3), 1e-5), tensor.ErrDType},
		{"Embedding id outside the table", "Embedding", b.Embedding(mk(tensor.F32, 2, 3), ids, mk(tensor.F32, 5, 3)), tensor.ErrArgument},
		{"CrossEntropy label outside [0, V)", "CrossEntropy", ceErr, tensor.ErrArgument},
		{"Dropout with p = 1", "Dropout", b.Dropout(mk(tensor.F32, 4), mk(tensor.F32, 4), 1, 0, 0), tensor.ErrArgument},
		{"Gemm with A and B of different dtypes", "Gemm", b.Gemm(tensor.GemmArgs{M: 1, N: 1, K: 1, A: mk(tensor.F32, 1), B: mk(tensor.BF16, 1), C: mk(tensor.F32, 1), Alpha: 1}), tensor.ErrDType},
		{"Softmax with an F16 mask", "Softmax", b.Softmax(mk(tensor.F32, 2, 3), mk(tensor.F32, 2, 3), mk(tensor.F16, 1, 3)), tensor.ErrDType},
		{"Attention with Hq not a multiple of Hkv", "Attention", b.Attention(tensor.AttentionArgs{B: 1, Hq: 3, Hkv: 2, Tq: 1, Tk: 1, D: 4,
			Q: tensor.AttnOperand{T: mk(tensor.BF16, 12)}, K: tensor.AttnOperand{T: mk(tensor.BF16, 8)}, V: tensor.AttnOperand{T: mk(tensor.BF16, 8)},
			O: tensor.AttnOperand{T: mk(tensor.BF16, 12)}, LSE: mk(tensor.F32, 3), Scale: 0.5}), tensor.ErrArgument},
		{"AttentionBackward with an F16 dO for BF16 operands", "AttentionBackward", b.AttentionBackward(tensor.AttentionBackwardArgs{
			AttentionArgs: tensor.AttentionArgs{B: 1, Hq: 1, Hkv: 1, Tq: 1, Tk: 1, D: 64, Q: tensor.AttnOperand{T: mk(tensor.BF16, 64)},
				K: tensor.AttnOperand{T: mk(tensor.BF16, 64)}, V: tensor.AttnOperand{T: mk(tensor.BF16, 64)}, O: tensor.AttnOperand{T: mk(tensor.BF16, 64)},
				LSE: mk(tensor.F32, 1), Scale: 0.125},
			DO: tensor.AttnOperand{T: mk(tensor.F16, 64)}, DQ: tensor.AttnOperand{T: mk(tensor.BF16, 64)},
			DK: tensor.AttnOperand{T: mk(tensor.BF16, 64)}, DV: tensor.AttnOperand{T: mk(tensor.BF16, 64)}}), tensor.ErrDType},
		{"NonFiniteCheckAndUnscale of a BF16 tensor", "NonFiniteCheckAndUnscale", nfErr, tensor.ErrDType},
		{"RMSNorm with a BF16 rstd", "RMSNorm", b.RMSNorm(mk(tensor.F32, 2, 3), mk(tensor.BF16, 2), mk(tensor.F32, 2, 3), mk(tensor.F32, 3), 1e-6), tensor.ErrDType},
		{"RoPE with an odd head size", "RoPE", b.RoPE(tensor.AttnOperand{T: mk(tensor.F32, 6)}, 1, 1, 2, 3, mk(tensor.I32, 1, 2), mk(tensor.F32, 4, 1), mk(tensor.F32, 4, 1), false), tensor.ErrArgument},
		{"RoPE on an operand that overlaps itself", "RoPE", b.RoPE(tensor.AttnOperand{T: mk(tensor.F32, 16), StrideB: 8, StrideH: 2, StrideT: 4}, 1, 2, 2, 4, mk(tensor.I32, 1, 2), mk(tensor.F32, 4, 2), mk(tensor.F32, 4, 2), false), tensor.ErrArgument},
		{"SwiGLU with gate and up of different dtypes", "SwiGLU", b.SwiGLU(mk(tensor.F32, 4), mk(tensor.F32, 4), mk(tensor.BF16, 4)), tensor.ErrDType},
		{"a tensor of no backend", "Scale", b.Scale(foreign, 2), tensor.ErrBackend},
		{"a nil tensor", "GELU", b.GELU(nil, mk(tensor.F32, 3)), tensor.ErrArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var oe *tensor.OpError
			if !errors.Is(c.err, c.want) || !errors.As(c.err, &oe) {
				t.Fatalf("err = %v, want a *tensor.OpError wrapping %v", c.err, c.want)
			}
			if oe.Op != c.op {
				t.Errorf("OpError.Op = %q, want %q", oe.Op, c.op)
			}
		})
	}
}
