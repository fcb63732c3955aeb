package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// RMSNorm is transformers' LlamaRMSNorm (and Qwen2/Qwen3/Mistral's): out = weight·round_x(x·rstd) with
// rstd = 1/sqrt(mean(x²) + eps) in FP32 and an FP32 weight (models/llama/modeling_llama.py LlamaRMSNorm.forward:
// the normalised value is cast back to the input's dtype before the weight multiply). It runs in FP32 under
// autocast whatever the GEMM dtype (tensor.Backend.RMSNorm); out may be F32 or the GEMM dtype (the product
// rounded once).
type RMSNorm struct {
	C      int     // the normalized width (hidden_size, or head_dim for Qwen3's q_norm/k_norm)
	Weight *Param  // (C)
	Eps    float32 // rms_norm_eps
}

// NewRMSNorm allocates a trainable RMSNorm of width c with weight 1 (transformers' init).
func NewRMSNorm(b tensor.Backend, c int, eps float32) (*RMSNorm, error) {
	w, err := b.Alloc(tensor.F32, c)
	if err != nil {
		return nil, fmt.Errorf("transformer: RMSNorm (%d): %w", c, err)
	}
	if err := b.Fill(w, 1); err != nil {
		return nil, fmt.Errorf("transformer: RMSNorm (%d): %w", c, err)
	}
	return &RMSNorm{C: c, Weight: &Param{Value: w, Trainable: true}, Eps: eps}, nil
}

// Parameters returns "weight".
func (l *RMSNorm) Parameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: l.Weight}}
}

// Forward: out (N, C) = weight·round_x(x·rstd), rstd (N) F32 saved for Backward.
func (l *RMSNorm) Forward(p *Pass, out, rstd, x *tensor.Tensor) error {
	return p.Backend.RMSNorm(out, rstd, x, l.Weight.Value, l.Eps)
}

// Backward: dx (N, C) = from dout and the forward's x and rstd; the weight's gradient (+=) when trainable.
func (l *RMSNorm) Backward(p *Pass, dx, dout, x, rstd *tensor.Tensor) error {
	return p.Backend.RMSNormBackward(dx, l.Weight.Grad, dout, x, l.Weight.Value, rstd)
}

// ResidualForward is the residual add before the norm fused with it: sum (N, C) = x + y (the residual
// stream, in sum's dtype), then out = weight·round(sum·rstd) and rstd as Forward (tensor.Backend.ResidualRMSNorm:
// the bits of the Add and the Forward it replaces).
func (l *RMSNorm) ResidualForward(p *Pass, sum, out, rstd, x, y *tensor.Tensor) error {
	return p.Backend.ResidualRMSNorm(tensor.ResidualRMSNormArgs{Sum: sum, Out: out, Rstd: rstd, X: x, Y: y, Weight: l.Weight.Value, Eps: l.Eps})
}

// ResidualBackward is Backward for a norm whose input is the residual stream x (the forward's sum): its dx is
// added to the stream's gradient dx (stored when !accumulate), and dxHalf, when non-nil, receives dx's new
// value in its dtype (the next GEMM's copy); the weight's gradient (+=) when trainable
// (tensor.Backend.ResidualRMSNormBackward).
func (l *RMSNorm) ResidualBackward(p *Pass, dx, dxHalf, dout, x, rstd *tensor.Tensor, accumulate bool) error {
	return p.Backend.ResidualRMSNormBackward(tensor.ResidualRMSNormBackwardArgs{DX: dx, DXHalf: dxHalf, DWeight: l.Weight.Grad,
		DOut: dout, X: x, Weight: l.Weight.Value, Rstd: rstd, Accumulate: accumulate})
}
