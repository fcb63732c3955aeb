// Package amp holds tune's mixed-precision machinery: the autocast Policy (which op class computes in which
// dtype, following PyTorch's CUDA autocast lists), the per-step weight-cast cache, and GradScaler (dynamic loss
// scaling with PyTorch's exact semantics and state dict).
package amp

import "github.com/tune-ml/tune/tensor"

// Policy is an autocast setting: when Enabled, GEMM-class ops take DType (F16 or BF16) inputs and accumulate in
// FP32; FP32-class ops (LayerNorm, softmax, losses, exp/log/pow, sums, norms) compute and return FP32; other
// ops keep their input dtype (mixed inputs promote to the wider type). The zero Policy is FP32 everywhere.
type Policy struct {
	Enabled bool
	DType   tensor.DType // F16 or BF16 when Enabled
}

// FP32 is the disabled policy.
var FP32 = Policy{}

// GemmDType returns the dtype GEMM-class ops (Linear, attention products, classifier) compute in under p:
// p.DType when enabled, else F32.
func (p Policy) GemmDType() tensor.DType {
	if p.Enabled {
		return p.DType
	}
	return tensor.F32
}
