package meta

import "github.com/tune-ml/tune/tensor"

// refusing implements every compute op of tensor.Backend by returning ErrMeta in an *tensor.OpError naming
// the op: a meta tensor has no values to compute with. The embedded interface is nil: it only lets an op added
// to tensor.Backend later compile here before it is written out (calling it panics, which bench.Plan reports).
type refusing struct{ tensor.Backend }

func refuse(op string) error { return &tensor.OpError{Op: op, Err: ErrMeta} }

// Gemm returns ErrMeta.
func (refusing) Gemm(a tensor.GemmArgs) error { return refuse("Gemm") }

// Add returns ErrMeta.
func (refusing) Add(out, a, b *tensor.Tensor) error { return refuse("Add") }

// Axpy returns ErrMeta.
func (refusing) Axpy(y, x *tensor.Tensor, alpha float32) error { return refuse("Axpy") }

// BiasAdd returns ErrMeta.
func (refusing) BiasAdd(y, bias *tensor.Tensor) error { return refuse("BiasAdd") }

// BiasGrad returns ErrMeta.
func (refusing) BiasGrad(dbias, dy *tensor.Tensor) error { return refuse("BiasGrad") }

// GELU returns ErrMeta.
func (refusing) GELU(out, x *tensor.Tensor) error { return refuse("GELU") }

// GELUBackward returns ErrMeta.
func (refusing) GELUBackward(dx, dout, x *tensor.Tensor) error { return refuse("GELUBackward") }

// GELUBackwardRecompute returns ErrMeta.
func (refusing) GELUBackwardRecompute(dx, out, dbias, dout, x *tensor.Tensor) error {
	return refuse("GELUBackwardRecompute")
}

// Tanh returns ErrMeta.
func (refusing) Tanh(out, x *tensor.Tensor) error { return refuse("Tanh") }

// TanhBackward returns ErrMeta.
func (refusing) TanhBackward(dx, dout, y *tensor.Tensor) error { return refuse("TanhBackward") }

// LayerNorm returns ErrMeta.
func (refusing) LayerNorm(out, mean, rstd, x, gamma, beta *tensor.Tensor, eps float32) error {
	return refuse("LayerNorm")
}

// LayerNormBackward returns ErrMeta.
func (refusing) LayerNormBackward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *tensor.Tensor) error {
	return refuse("LayerNormBackward")
}

// ResidualLayerNorm returns ErrMeta.
func (refusing) ResidualLayerNorm(a tensor.ResidualNormArgs) error {
	return refuse("ResidualLayerNorm")
}

// ResidualLayerNormBackward returns ErrMeta.
func (refusing) ResidualLayerNormBackward(a tensor.ResidualNormBackwardArgs) error {
	return refuse("ResidualLayerNormBackward")
}

// RMSNorm returns ErrMeta.
func (refusing) RMSNorm(out, rstd, x, weight *tensor.Tensor, eps float32) error {
	return refuse("RMSNorm")
}

// RMSNormBackward returns ErrMeta.
func (refusing) RMSNormBackward(dx, dweight, dout, x, weight, rstd *tensor.Tensor) error {
	return refuse("RMSNormBackward")
}

// CrossEntropyWithGrad returns ErrMeta.
func (refusing) CrossEntropyWithGrad(losses, pred, dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (int, error) {
	return 0, refuse("CrossEntropyWithGrad")
}

// SwiGLUBackwardRecompute returns ErrMeta.
func (refusing) SwiGLUBackwardRecompute(dgate, dup, out, dout, gate, up *tensor.Tensor) error {
	return refuse("SwiGLUBackwardRecompute")
}

// ResidualRMSNorm returns ErrMeta.
func (refusing) ResidualRMSNorm(a tensor.ResidualRMSNormArgs) error {
	return refuse("ResidualRMSNorm")
}

// ResidualRMSNormBackward returns ErrMeta.
func (refusing) ResidualRMSNormBackward(a tensor.ResidualRMSNormBackwardArgs) error {
	return refuse("ResidualRMSNormBackward")
}

// RoPE returns ErrMeta.
func (refusing) RoPE(x tensor.AttnOperand, b, h, t, d int, positions, cos, sin *tensor.Tensor, inverse bool) error {
	return refuse("RoPE")
}

// SwiGLU returns ErrMeta.
func (refusing) SwiGLU(out, gate, up *tensor.Tensor) error { return refuse("SwiGLU") }

// SwiGLUBackward returns ErrMeta.
func (refusing) SwiGLUBackward(dgate, dup, dout, gate, up *tensor.Tensor) error {
	return refuse("SwiGLUBackward")
}

// GELUTanh returns ErrMeta.
func (refusing) GELUTanh(out, x *tensor.Tensor) error { return refuse("GELUTanh") }

// GELUTanhBackward returns ErrMeta.
func (refusing) GELUTanhBackward(dx, dout, x *tensor.Tensor) error { return refuse("GELUTanhBackward") }

// Softmax returns ErrMeta.
func (refusing) Softmax(out, x, mask *tensor.Tensor) error { return refuse("Softmax") }

// SoftmaxBackward returns ErrMeta.
func (refusing) SoftmaxBackward(dx, dout, y *tensor.Tensor) error { return refuse("SoftmaxBackward") }

// Dropout returns ErrMeta.
func (refusing) Dropout(out, x *tensor.Tensor, p float32, seed, offset uint64) error {
	return refuse("Dropout")
}

// DropoutBackward returns ErrMeta.
func (refusing) DropoutBackward(dx, dout *tensor.Tensor, p float32, seed, offset uint64) error {
	return refuse("DropoutBackward")
}

// Transpose12 returns ErrMeta.
func (refusing) Transpose12(out, x *tensor.Tensor, a, b, c, d int) error {
	return refuse("Transpose12")
}

// Attention returns ErrMeta.
func (refusing) Attention(a tensor.AttentionArgs) error { return refuse("Attention") }

// AttentionBackward returns ErrMeta.
func (refusing) AttentionBackward(a tensor.AttentionBackwardArgs) error {
	return refuse("AttentionBackward")
}

// Embedding returns ErrMeta.
func (refusing) Embedding(out, ids, table *tensor.Tensor) error { return refuse("Embedding") }

// EmbeddingBackward returns ErrMeta.
func (refusing) EmbeddingBackward(dtable, ids, dout *tensor.Tensor) error {
	return refuse("EmbeddingBackward")
}

// CrossEntropy returns ErrMeta.
func (refusing) CrossEntropy(losses, logits, labels *tensor.Tensor, ignoreIndex int) (int, error) {
	return 0, refuse("CrossEntropy")
}

// CrossEntropyBackward returns ErrMeta.
func (refusing) CrossEntropyBackward(dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) error {
	return refuse("CrossEntropyBackward")
}

// ArgMax returns ErrMeta.
func (refusing) ArgMax(out, x *tensor.Tensor) error { return refuse("ArgMax") }

// MSELoss returns ErrMeta.
func (refusing) MSELoss(losses, pred, target *tensor.Tensor) error { return refuse("MSELoss") }

// MSELossBackward returns ErrMeta.
func (refusing) MSELossBackward(dpred, pred, target *tensor.Tensor, scale float32, scaleBy *tensor.Tensor) error {
	return refuse("MSELossBackward")
}

// GlobalNorm returns ErrMeta.
func (refusing) GlobalNorm(ts []*tensor.Tensor) (float64, error) { return 0, refuse("GlobalNorm") }

// NonFiniteCheckAndUnscale returns ErrMeta.
func (refusing) NonFiniteCheckAndUnscale(ts []*tensor.Tensor, invScale float32) (bool, error) {
	return false, refuse("NonFiniteCheckAndUnscale")
}

// GlobalNormTo returns ErrMeta.
func (refusing) GlobalNormTo(norm *tensor.Tensor, ts []*tensor.Tensor) error {
	return refuse("GlobalNormTo")
}

// ClipByNorm returns ErrMeta.
func (refusing) ClipByNorm(ts []*tensor.Tensor, norm *tensor.Tensor, maxNorm float32, nonFinite *tensor.Tensor) error {
	return refuse("ClipByNorm")
}

// NonFiniteCheckAndUnscaleOnDevice returns ErrMeta.
func (refusing) NonFiniteCheckAndUnscaleOnDevice(ts []*tensor.Tensor, scale, found *tensor.Tensor) error {
	return refuse("NonFiniteCheckAndUnscaleOnDevice")
}

// UpdateScale returns ErrMeta.
func (refusing) UpdateScale(a tensor.UpdateScaleArgs) error { return refuse("UpdateScale") }

// AdamW returns ErrMeta.
func (refusing) AdamW(a tensor.AdamWArgs) error { return refuse("AdamW") }
