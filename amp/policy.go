package amp

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/tensor"
)

// Policy is an autocast setting: when Enabled, GEMM-class ops take DType (F16 or BF16) inputs and accumulate in
// FP32; FP32-class ops (LayerNorm, softmax, losses, exp/log/pow, sums, norms) compute and return FP32; other
// ops keep their input dtype (mixed inputs promote to the wider type). The zero Policy is FP32 everywhere.
//
// A Policy is a value, so a region that disables autocast is lexical: a layer that must run in full precision
// is handed p.Disabled() and the caller's p is untouched, which is what leaving PyTorch's
// `with autocast(enabled=False):` block restores (torch/amp/autocast_mode.py). Nesting composes the same way:
// p.Disabled().Enable(tensor.BF16) re-enables inside a disabled region, as a nested `autocast(dtype=bf16)` does.
// Inside a disabled region nothing is cast: ops run in their inputs' dtype (an F16 activation reaching an F32
// weight must be cast to F32 by the caller, as PyTorch requires `.float()` there).
type Policy struct {
	Enabled bool         // autocast on (PyTorch's autocast(enabled=True)); false runs every op in its inputs' dtype
	DType   tensor.DType // F16 or BF16 when Enabled
}

// FP32 is the disabled policy.
var FP32 = Policy{}

// FP16 is FP16 autocast (pair it with a GradScaler: NewGradScalerFor(b, FP16) returns an enabled one).
var FP16 = Policy{Enabled: true, DType: tensor.F16}

// BF16 is BF16 autocast (needs no loss scaling: NewGradScalerFor(b, BF16) returns a disabled scaler).
var BF16 = Policy{Enabled: true, DType: tensor.BF16}

// ParsePrecision maps a recipe's precision name to a Policy: "fp32" (also "no", as HF's mixed_precision spells
// it) → FP32, "fp16" → FP16, "bf16" → BF16. Case is ignored; anything else is an error naming the valid values.
func ParsePrecision(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "no", "":
		return FP32, nil
	case "fp16":
		return FP16, nil
	case "bf16":
		return BF16, nil
	}
	return Policy{}, fmt.Errorf("amp: unknown precision %q (want fp32, fp16 or bf16)", s)
}

// Precision returns the recipe name of p: "fp32", "fp16" or "bf16" (the inverse of ParsePrecision).
func (p Policy) Precision() string {
	if !p.Enabled {
		return "fp32"
	}
	switch p.DType {
	case tensor.F16:
		return "fp16"
	case tensor.BF16:
		return "bf16"
	}
	return "autocast(" + p.DType.String() + ")"
}

// String describes p as "fp32", "fp16 autocast" or "bf16 autocast".
func (p Policy) String() string {
	if !p.Enabled {
		return "fp32"
	}
	return p.Precision() + " autocast"
}

// Validate reports an enabled Policy whose DType is not F16 or BF16.
func (p Policy) Validate() error {
	if p.Enabled && !p.DType.IsHalf() {
		return fmt.Errorf("amp: autocast dtype must be F16 or BF16, got %v", p.DType)
	}
	return nil
}

// Disabled returns p with autocast switched off (PyTorch's nested `autocast(enabled=False)`): every op then runs
// in its inputs' dtype. The dtype is kept so Enable() of the result restores p.
func (p Policy) Disabled() Policy { return Policy{Enabled: false, DType: p.DType} }

// Enable returns an enabled policy casting to dt (F16 or BF16), whatever p was: a nested
// `autocast(dtype=dt)` region. Passing tensor.Invalid re-enables with p.DType.
func (p Policy) Enable(dt tensor.DType) Policy {
	if dt == tensor.Invalid {
		dt = p.DType
	}
	return Policy{Enabled: true, DType: dt}
}

// GemmDType returns the dtype GEMM-class ops (Linear, attention products, classifier) compute in under p:
// p.DType when enabled, else F32.
func (p Policy) GemmDType() tensor.DType {
	if p.Enabled {
		return p.DType
	}
	return tensor.F32
}

// AttentionScoresDType returns the dtype of the attention logits QKᵀ/√D + mask and of the softmax that reads
// them: F32 under every policy. The QKᵀ GEMM takes GemmDType() inputs and writes an F32 C (FP32 accumulation,
// no rounding to half), and the softmax returns F32 probabilities, which are cast to GemmDType() only as the
// input of the P·V product. This is better than PyTorch eager, whose fp16 QKᵀ output rounds the logits to half
// before its FP32 softmax (a logit of 20 then carries an error of up to 0.008, and large logits can overflow).
func (p Policy) AttentionScoresDType() tensor.DType { return tensor.F32 }
