//go:build cuda

package cuda

import "github.com/tune-ml/tune/tensor"

// ewVec is vec for the elementwise kernels built on map1/map2 (and gelu_bwd_recompute): 2 when the pointers
// are aligned for four-element vector accesses (a thread then loads several groups before it stores any,
// kernels/elementwise.cu), 0 otherwise (element by element).
func (o *op) ewVec(ts ...*tensor.Tensor) uint64 {
	if vec(ts...) == 1 {
		return 2
	}
	return 0
}

// vec2 reports (as a kernel argument) whether every tensor starts at an address aligned for two-element
// accesses (8 bytes for F32, 4 for F16/BF16), as the column-sum kernels' vec=1 needs with an even C.
func vec2(ts ...*tensor.Tensor) uint64 {
	for _, t := range ts {
		if t != nil && addr(t)%uint64(2*t.DType.Size()) != 0 {
			return 0
		}
	}
	return 1
}
