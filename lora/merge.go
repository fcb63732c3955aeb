package lora

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// AddDelta adds alpha·ΔW to the base weight w in place, where ΔW is PEFT's get_delta_weight (peft/tuners/lora/layer.py,
// PEFT's merge and unmerge) for lora_A a (R, In) and lora_B bm (Out, R), all F32:
//
//	fanInFanOut false: w (Out, In) += alpha·B·A
//	fanInFanOut true:  w (In, Out) += alpha·(B·A)ᵀ = alpha·Aᵀ·Bᵀ   (a layer that stores its weight transposed,
//	                                                                 as GPT-2's Conv1D does)
//
// Merging passes alpha = scaling and unmerging alpha = −scaling; each is one GEMM with beta = 1 (FP32
// accumulation over R, one rounding per element), so unmerge restores w to within one rounding of its value.
// Errors name the mismatched shapes.
func AddDelta(bk tensor.Backend, w, a, bm *tensor.Tensor, alpha float32, fanInFanOut bool) error {
	if len(a.Shape) != 2 || len(bm.Shape) != 2 || len(w.Shape) != 2 {
		return fmt.Errorf("lora: merge: want 2-D weights, got W %v, A %v, B %v", w.Shape, a.Shape, bm.Shape)
	}
	if w.DType != tensor.F32 || a.DType != tensor.F32 || bm.DType != tensor.F32 {
		return fmt.Errorf("lora: merge: W, A and B must be F32 master weights, got %v, %v, %v", w.DType, a.DType, bm.DType)
	}
	r, in, out := a.Shape[0], a.Shape[1], bm.Shape[0]
	want := tensor.Shape{out, in}
	if fanInFanOut {
		want = tensor.Shape{in, out}
	}
	if bm.Shape[1] != r || !w.Shape.Equal(want) {
		return fmt.Errorf("lora: merge: A %v and B %v give a delta of %v (fan_in_fan_out %v), the weight is %v",
			a.Shape, bm.Shape, want, fanInFanOut, w.Shape)
	}
	if fanInFanOut { // w (In, Out) += alpha·Aᵀ (In, R)·Bᵀ (R, Out)
		return bk.Gemm(tensor.GemmArgs{TransA: true, TransB: true, M: in, N: out, K: r, A: a, B: bm, C: w,
			Alpha: alpha, Beta: 1, Batch: 1})
	}
	// w (Out, In) += alpha·B (Out, R)·A (R, In)
	return bk.Gemm(tensor.GemmArgs{M: out, N: in, K: r, A: bm, B: a, C: w, Alpha: alpha, Beta: 1, Batch: 1})
}

// Merge adds scaling·B·A to the base weight (PEFT's merge), after which Forward computes the base alone and
// gives the same output up to rounding. The caller invalidates the weight-cast cache (Model.Merge does). It
// errors, wrapping ErrMerged, when already merged.
func (l *Linear) Merge(bk tensor.Backend) error {
	if l.merged {
		return fmt.Errorf("lora: merge: %w", ErrMerged)
	}
	if err := addDeltaStored(bk, l.base.Weight.Value, l.A.Value, l.B.Value, l.Scaling); err != nil {
		return err
	}
	l.merged = true
	return nil
}

// Unmerge subtracts scaling·B·A from the base weight again (PEFT's unmerge); a no-op when not merged.
func (l *Linear) Unmerge(bk tensor.Backend) error {
	if !l.merged {
		return nil
	}
	if err := addDeltaStored(bk, l.base.Weight.Value, l.A.Value, l.B.Value, -l.Scaling); err != nil {
		return err
	}
	l.merged = false
	return nil
}

// addDeltaStored is AddDelta for a base weight w in any float dtype. An F32 w is updated in place as AddDelta
// does. A w stored in F16/BF16 (transformer.ModelCore.StoreFrozenIn) is widened into an FP32 scratch, gets the
// FP32 delta there and is rounded back once: W_half = round(widen(W_half) + alpha·B·A). PEFT's merge of a half
// base rounds the delta to the base's dtype first and adds in that dtype (two roundings,
// peft/tuners/lora/layer.py Linear.merge and get_delta_weight); here only the sum is rounded. Unmerge of a half
// base is therefore not exact: the base comes back within one rounding in its dtype per merge/unmerge.
func addDeltaStored(bk tensor.Backend, w, a, bm *tensor.Tensor, alpha float32) error {
	if w.DType == tensor.F32 {
		return AddDelta(bk, w, a, bm, alpha, false)
	}
	wide, err := bk.Alloc(tensor.F32, w.Shape...)
	if err != nil {
		return fmt.Errorf("lora: merge: %w", err)
	}
	defer bk.Free(wide)
	if err := bk.Cast(wide, w); err != nil {
		return fmt.Errorf("lora: merge: %w", err)
	}
	if err := AddDelta(bk, wide, a, bm, alpha, false); err != nil {
		return err
	}
	return bk.Cast(w, wide)
}
