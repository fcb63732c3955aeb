package amp

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/tensor"
)

// OpClass says how autocast treats an op, following PyTorch's CUDA autocast lists (the op lists of aten/src/ATen/autocast_mode.cpp; aten/src/ATen/autocast_mode.cpp,
// torch/include/ATen/autocast_mode.h).
type OpClass uint8

const (
	// Passthrough ops are on no list: they run in their inputs' dtype, and mixed floating inputs take ordinary type
	// promotion (F16+F32 → F32, F16+BF16 → F32). PyTorch: gelu, tanh, dropout, add, mean, masked_fill,
	// transpose, embedding. The zero OpClass.
	Passthrough OpClass = iota
	// LowerPrecision ops cast every floating input to the autocast dtype and return it; tune's GEMMs accumulate
	// in FP32 (cuBLASLt CUBLAS_COMPUTE_32F). PyTorch: linear, matmul, mm, bmm, baddbmm, addmm, einsum, conv*,
	// scaled_dot_product_attention.
	LowerPrecision
	// FP32Class ops cast their inputs to F32, compute in F32 and return F32. PyTorch: layer_norm, softmax and
	// log_softmax (via dtype=float32), exp, log, pow, rsqrt, sum, prod, cumsum, norm and linalg norms, nll_loss
	// (so cross_entropy), mse_loss, l1_loss, kl_div, binary_cross_entropy_with_logits, logsumexp.
	FP32Class
	// Promote ops run in the widest floating input dtype: F32 if any input is F32, else the autocast dtype.
	// PyTorch: addcmul, addcdiv, atan2, cross, dot, index_put, scatter_add, tensordot.
	Promote
)

var opClassNames = [...]string{Passthrough: "passthrough", LowerPrecision: "lower-precision", FP32Class: "fp32", Promote: "promote"}

// String returns "passthrough", "lower-precision", "fp32" or "promote".
func (c OpClass) String() string {
	if int(c) < len(opClassNames) {
		return opClassNames[c]
	}
	return fmt.Sprintf("OpClass(%d)", uint8(c))
}

// opClasses maps each forward op of tensor.Backend to its autocast class, with the PyTorch op it stands for.
// Ops absent here (Alloc, Copy, Fill, Cast, Scale, Axpy, BiasGrad, NonFiniteCheckAndUnscale, AdamW) are
// bookkeeping or optimizer ops on explicit dtypes, which autocast never touches (PyTorch: explicit dtype=,
// in-place and out= calls are not autocast).
var opClasses = map[string]OpClass{
	"Gemm":         LowerPrecision, // linear, matmul, bmm, baddbmm
	"Attention":    LowerPrecision, // scaled_dot_product_attention
	"LayerNorm":    FP32Class,      // layer_norm
	"Softmax":      FP32Class,      // softmax(dtype=float32)
	"CrossEntropy": FP32Class,      // cross_entropy = log_softmax + nll_loss
	"MSELoss":      FP32Class,      // mse_loss
	"GlobalNorm":   FP32Class,      // linalg_vector_norm / norm
	"GELU":         Passthrough,    // gelu
	"Tanh":         Passthrough,    // tanh
	"Dropout":      Passthrough,    // dropout
	"Add":          Passthrough,    // add: mixed inputs promote to the wider type
	"BiasAdd":      Passthrough,    // add of a broadcast bias (in place: keeps y's dtype)
	"Transpose12":  Passthrough,    // transpose(1, 2)
	"Embedding":    Passthrough,    // embedding: the table's dtype (F32 master table → F32)
}

// ClassOf returns the autocast class of a tensor.Backend op by its method name ("Gemm", "LayerNorm", ...). A
// backward op ("GELUBackward") has its forward's class: each op's backward runs in the dtype its forward used,
// and the gradient of an input has that input's dtype (torch/amp/autocast_mode.py). ok is false for ops outside autocast.
func ClassOf(op string) (c OpClass, ok bool) {
	c, ok = opClasses[strings.TrimSuffix(op, "Backward")]
	return c, ok
}

// OutputDType returns the dtype an op of class c returns under p for the given input dtypes; non-floating
// inputs (I32/I64 ids and labels) are ignored, as PyTorch's is_autocast_eligible ignores them. It returns
// tensor.Invalid when no input is floating (the op is then not a floating-point op).
//
// Enabled: LowerPrecision → p.DType; FP32Class → F32; Promote → F32 if any input is F32 (or the inputs mix
// F16 and BF16), else the common half type; Passthrough → ordinary promotion of the inputs. Disabled: every
// class is Passthrough (autocast(enabled=False) casts nothing).
//
// PyTorch's promote rule raises on a mix of F16 and BF16 under autocast; tune promotes such a mix to F32 instead
// (what ordinary promotion gives), since it can only arise from an explicit user cast.
func (p Policy) OutputDType(c OpClass, inputs ...tensor.DType) tensor.DType {
	wide := promote(inputs)
	if wide == tensor.Invalid || !p.Enabled {
		return wide
	}
	switch c {
	case LowerPrecision:
		return p.DType
	case FP32Class:
		return tensor.F32
	}
	return wide // Promote and Passthrough agree for F32/F16/BF16 inputs
}

// promote returns the smallest floating dtype holding every floating dtype in ds (PyTorch's promote_types):
// equal types stay, F32 with anything is F32, F16 with BF16 is F32. Invalid if ds has no floating dtype.
func promote(ds []tensor.DType) tensor.DType {
	out := tensor.Invalid
	for _, d := range ds {
		switch {
		case !d.IsFloat():
		case out == tensor.Invalid:
			out = d
		case out != d:
			out = tensor.F32
		}
	}
	return out
}
