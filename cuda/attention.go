//go:build cuda

package cuda

import (
	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// Attention validates its arguments as every backend does (opcheck.AttentionGeometry) and then reports that
// this build has no fused attention kernel yet: an error wrapping tensor.ErrUnsupported, on which the
// attention layer takes the two-pass path (Gemm → Softmax → Dropout → Gemm).
func (b *Backend) Attention(a tensor.AttentionArgs) (err error) {
	o := b.begin("Attention", opcheck.AttentionTensors(a)...)
	defer o.end(&err)
	if _, gerr := opcheck.AttentionGeometry(a, b.owner); o.fail(gerr) != nil {
		return
	}
	o.failf(tensor.ErrUnsupported, "the CUDA backend has no fused attention kernel yet (B, Hq, Hkv, Tq, Tk, D = %d, %d, %d, %d, %d, %d); use the two-pass path",
		a.B, a.Hq, a.Hkv, a.Tq, a.Tk, a.D)
	return
}

// AttentionBackward validates its arguments (opcheck.AttentionBackwardGeometry) and reports, as Attention does,
// an error wrapping tensor.ErrUnsupported.
func (b *Backend) AttentionBackward(a tensor.AttentionBackwardArgs) (err error) {
	o := b.begin("AttentionBackward", opcheck.AttentionBackwardTensors(a)...)
	defer o.end(&err)
	if _, gerr := opcheck.AttentionBackwardGeometry(a, b.owner); o.fail(gerr) != nil {
		return
	}
	o.failf(tensor.ErrUnsupported, "the CUDA backend has no fused attention kernel yet (B, Hq, Hkv, Tq, Tk, D = %d, %d, %d, %d, %d, %d); use the two-pass path",
		a.B, a.Hq, a.Hkv, a.Tq, a.Tk, a.D)
	return
}
