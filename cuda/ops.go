//go:build cuda

package cuda

import (
	"fmt"
	"os"

	"github.com/tune-ml/tune/tensor"
)

// opsDefault is the kernel design (opsVariant) used when TUNE_CUDA_OPS is unset or empty.
const opsDefault = "v3"

// opsVariant selects the kernels behind the elementwise ops (GELU, GELUBackward, GELUBackwardRecompute,
// Cast, Add, Axpy, Scale, Tanh, MSE), the column sums (BiasGrad, GELUBackwardRecompute's bias gradient, the
// unfused LayerNorm and RMSNorm weight gradients), the BERT-width ResidualLayerNorm and EmbeddingBackward's
// plan, read once from TUNE_CUDA_OPS: "v2" loads several groups or rows per thread before it stores any
// (kernels/elementwise.cu with vec=2; colsum_partial_v2 and gelu_bwd_colsum_v2 in kernels/norm.cu;
// kernels/layernorm2.cu); "v3" (the default) is v2 with EmbeddingBackward planned on the device (no host
// work on the ids, nothing uploaded); "v1" is the earlier design, kept for A/B measurements. All give the
// same bits (H200, r7: TestOpsV2MatchV1 and its memcheck). Any other value makes those ops fail naming it.
var opsVariant = func() string {
	if v := os.Getenv("TUNE_CUDA_OPS"); v != "" {
		return v
	}
	return opsDefault
}()

// opsV2 reports whether the v2 kernels are selected (v2 or v3); an unknown TUNE_CUDA_OPS fails the op.
func (o *op) opsV2() bool {
	switch opsVariant {
	case "v2", "v3":
		return true
	case "v1":
		return false
	}
	o.fail(fmt.Errorf("cuda: TUNE_CUDA_OPS=%q is not a kernel variant (use v1, v2 or v3, or unset it for the default %s)", opsVariant, opsDefault))
	return false
}

// opsV3 reports whether TUNE_CUDA_OPS=v3 (the default) is selected: v2 plus EmbeddingBackward's plan built on
// the device (embeddingBackwardDevice).
func (o *op) opsV3() bool { return o.opsV2() && opsVariant == "v3" }

// ewVec is vec for the elementwise kernels built on map1/map2 (and gelu_bwd_recompute): 2 (several groups
// in flight per thread) when the pointers are aligned and the v2 kernels are selected.
func (o *op) ewVec(ts ...*tensor.Tensor) uint64 {
	v := vec(ts...)
	if v == 1 && o.opsV2() {
		return 2
	}
	return v
}

// vec2 reports (as a kernel argument) whether every tensor starts at an address aligned for two-element
// accesses (8 bytes for F32, 4 for F16/BF16), as the v2 column-sum kernels' vec=1 needs with an even C.
func vec2(ts ...*tensor.Tensor) uint64 {
	for _, t := range ts {
		if t != nil && addr(t)%uint64(2*t.DType.Size()) != 0 {
			return 0
		}
	}
	return 1
}
