package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// LayerNorm is torch.nn.LayerNorm over the last axis with FP32 weight (gamma) and bias (beta). It is an
// FP32-class op under autocast: it reads any float input and writes F32 (the op lists of aten/src/ATen/autocast_mode.cpp).
type LayerNorm struct {
	C            int     // the normalized width (hidden_size)
	Weight, Bias *Param  // (C), (C)
	Eps          float32 // ε added to the variance before the square root (layer_norm_eps, 1e-12 in BERT)
}

// NewLayerNorm allocates a trainable LayerNorm of width c with weight 1 and bias 0 (torch's init).
func NewLayerNorm(b tensor.Backend, c int, eps float32) (*LayerNorm, error) {
	w, err := b.Alloc(tensor.F32, c)
	if err != nil {
		return nil, fmt.Errorf("transformer: LayerNorm (%d): %w", c, err)
	}
	bias, err := b.Alloc(tensor.F32, c)
	if err != nil {
		b.Free(w)
		return nil, fmt.Errorf("transformer: LayerNorm (%d): %w", c, err)
	}
	if err := b.Fill(w, 1); err != nil {
		return nil, fmt.Errorf("transformer: LayerNorm (%d): %w", c, err)
	}
	return &LayerNorm{C: c, Weight: &Param{Value: w, Trainable: true}, Bias: &Param{Value: bias, Trainable: true}, Eps: eps}, nil
}

// Parameters returns "weight" and "bias".
func (l *LayerNorm) Parameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: l.Weight}, {Name: "bias", Param: l.Bias}}
}

// Forward: out (N, C) F32 = (x − μ)·rstd·weight + bias with mean (N) and rstd (N) F32 saved for Backward.
func (l *LayerNorm) Forward(p *Pass, out, mean, rstd, x *tensor.Tensor) error {
	return p.Backend.LayerNorm(out, mean, rstd, x, l.Weight.Value, l.Bias.Value, l.Eps)
}

// ForwardResidual is Forward of sum = dropout(y) + x (the residual add of a post-LayerNorm block, sum kept
// for Backward) fused into one op: with prob > 0 the dropout draws y's mask from (p.Seed, offset). outHalf,
// when non-nil, also receives out in its dtype (the next GEMM's input). y is not written.
func (l *LayerNorm) ForwardResidual(p *Pass, out, outHalf, mean, rstd, sum, y, x *tensor.Tensor, prob float32, offset uint64) error {
	return p.Backend.ResidualLayerNorm(tensor.ResidualNormArgs{
		Sum: sum, Out: out, OutHalf: outHalf, Mean: mean, Rstd: rstd, Y: y, X: x,
		Gamma: l.Weight.Value, Beta: l.Bias.Value, Eps: l.Eps, DropoutP: prob, Seed: p.Seed, Offset: offset,
	})
}

// BackwardResidual is Backward for ForwardResidual: dx (N, C) = is the gradient of the residual x (and of
// sum), and dy (N, C) = that of the branch y, dx through the forward's dropout (prob, offset; a cast to dy's
// dtype when prob is 0), in one op; dbias (C), when set, += Σ_rows dy (the bias gradient of the projection
// whose output y was).
func (l *LayerNorm) BackwardResidual(p *Pass, dx, dy, dbias, dout, sum, mean, rstd *tensor.Tensor, prob float32, offset uint64) error {
	return p.Backend.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{
		DX: dx, DY: dy, DGamma: l.Weight.Grad, DBeta: l.Bias.Grad, DBias: dbias, DOut: dout, X: sum, Gamma: l.Weight.Value,
		Mean: mean, Rstd: rstd, DropoutP: prob, Seed: p.Seed, Offset: offset,
	})
}

// Backward: dx (N, C) = from dout (N, C) and the forward's x, mean, rstd; weight and bias gradients (+=) only
// for the trainable ones.
func (l *LayerNorm) Backward(p *Pass, dx, dout, x, mean, rstd *tensor.Tensor) error {
	return p.Backend.LayerNormBackward(dx, l.Weight.Grad, l.Bias.Grad, dout, x, l.Weight.Value, mean, rstd)
}
