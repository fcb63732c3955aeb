package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// Projection is a module that maps rows of In features to rows of Out features: BERT's query, key, value and
// dense layers, the pooler and the classifier. The model calls its projections only through this interface, so
// package lora can wrap a projection's Linear with an adapter and put the wrapper in its place
// (BertForSequenceClassification.ReplaceProjections) without this package knowing about LoRA.
//
// Shapes: in (N, In), out (N, Out) with N rows (B·T tokens, or B for the pooler and classifier). Both have the
// pass's GEMM dtype (p.GemmDType(): F32, or F16/BF16 under autocast).
type Projection interface {
	// Forward computes out (N, Out) = in (N, In)·Wᵀ + b (overwritten), and keeps what Backward needs when
	// p.Train. in is not modified and stays valid until Backward.
	Forward(p *Pass, out, in *tensor.Tensor) error
	// Backward, given dOut (N, Out) and the forward's in, computes the input gradient dIn (N, In) — overwritten,
	// or accumulated (+=) when accumulate is set; skipped when dIn is nil — and accumulates (+=) the FP32
	// gradient of every trainable parameter. dIn may be F32 while dOut is half (the GEMM accumulates in FP32
	// and rounds once into dIn's dtype). dOut and in are read-only: dOut may be a buffer the model still needs
	// (the residual gradient). A frozen parameter gets no gradient and costs no GEMM.
	Backward(p *Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error
	// Layout takes from a the per-step buffers the module keeps between Forward and Backward for a pass over
	// rows input rows in GEMM dtype dt. A plain Linear needs none.
	Layout(a *Arena, rows int, dt tensor.DType)
	// Base returns the plain Linear the projection computes with (the projection itself for a *Linear).
	Base() *Linear
	// Parameters lists the module's parameters with names relative to its path, in Hugging Face order.
	Parameters() []NamedParameter
}

// Linear is torch.nn.Linear: y = x·Wᵀ + b with W (Out, In) and b (Out) FP32 master parameters.
type Linear struct {
	In, Out int    // in_features and out_features
	Weight  *Param // (Out, In)
	Bias    *Param // (Out), nil for a Linear without bias
}

var _ Projection = (*Linear)(nil)

// NewLinear allocates a trainable Linear with zero weight and bias on b (the model initialises and packs it).
func NewLinear(b tensor.Backend, in, out int, bias bool) (*Linear, error) {
	w, err := b.Alloc(tensor.F32, out, in)
	if err != nil {
		return nil, fmt.Errorf("transformer: linear (%d, %d): %w", out, in, err)
	}
	l := &Linear{In: in, Out: out, Weight: &Param{Value: w, Trainable: true}}
	if bias {
		t, err := b.Alloc(tensor.F32, out)
		if err != nil {
			b.Free(w)
			return nil, fmt.Errorf("transformer: linear bias (%d): %w", out, err)
		}
		l.Bias = &Param{Value: t, Trainable: true}
	}
	return l, nil
}

// Base returns l.
func (l *Linear) Base() *Linear { return l }

// Layout takes nothing: a Linear's backward needs only its input, which the caller keeps.
func (l *Linear) Layout(*Arena, int, tensor.DType) {}

// Parameters returns "weight" and, if present, "bias".
func (l *Linear) Parameters() []NamedParameter {
	ps := []NamedParameter{{Name: "weight", Param: l.Weight}}
	if l.Bias != nil {
		ps = append(ps, NamedParameter{Name: "bias", Param: l.Bias})
	}
	return ps
}

// Forward computes out (N, Out) = in (N, In)·Wᵀ + b in one GEMM with the bias in its epilogue. Under autocast
// W and b are the step's half copies (p.Weight), the product accumulates in FP32 and out is rounded once.
func (l *Linear) Forward(p *Pass, out, in *tensor.Tensor) error { return l.forwardRows(p, out, 0, in) }

// forwardRows is Forward with out's rows ld elements apart (0: dense, Out): out is then a column block of a
// wider row-major buffer, such as the Q, K or V block of attention's packed (N, 3C) projections, starting at
// out's first element.
func (l *Linear) forwardRows(p *Pass, out *tensor.Tensor, ld int, in *tensor.Tensor) error {
	n := in.Numel() / l.In
	w, err := p.Weight(l.Weight.Value) // (Out, In)
	if err != nil {
		return err
	}
	var bias *tensor.Tensor
	if l.Bias != nil {
		if bias, err = p.Weight(l.Bias.Value); err != nil { // (Out)
			return err
		}
	}
	return p.Backend.Gemm(tensor.GemmArgs{
		TransB: true, M: n, N: l.Out, K: l.In,
		A: in, B: w, C: out, LDC: ld, Alpha: 1, Bias: bias, Batch: 1,
	})
}

// Backward computes dIn (N, In) (=, or += when accumulate) = dOut (N, Out)·W, dW (Out, In) += dOutᵀ·in and
// db (Out) += Σ_rows dOut, each only where needed (dIn non-nil, W or b trainable). dW accumulates straight into
// the FP32 master gradient (beta = 1): under autocast the half inputs meet in an FP32 accumulator and nothing is
// rounded to half on the way (PyTorch instead rounds the weight gradient to half before its FP32 cast).
func (l *Linear) Backward(p *Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error {
	if err := l.backwardInput(p, dIn, dOut, accumulate); err != nil {
		return err
	}
	return l.backwardParams(p, dOut, in)
}

// backwardInput is Backward's input gradient: dIn (=, or += when accumulate) = dOut·W; nothing for nil dIn.
func (l *Linear) backwardInput(p *Pass, dIn, dOut *tensor.Tensor, accumulate bool) error {
	n := dOut.Numel() / l.Out
	if dIn != nil {
		w, err := p.Weight(l.Weight.Value)
		if err != nil {
			return err
		}
		beta := float32(0)
		if accumulate {
			beta = 1
		}
		if err := p.Backend.Gemm(tensor.GemmArgs{
			M: n, N: l.In, K: l.Out, A: dOut, B: w, C: dIn, Alpha: 1, Beta: beta, Batch: 1,
		}); err != nil {
			return err
		}
	}
	return nil
}

// backwardParams is Backward's parameter gradients: dW += dOutᵀ·in and db += Σ_rows dOut where trainable (in
// is read only for a trainable W).
func (l *Linear) backwardParams(p *Pass, dOut, in *tensor.Tensor) error {
	if err := l.backwardWeight(p, dOut, in); err != nil {
		return err
	}
	if l.Bias != nil && l.Bias.Grad != nil {
		return p.Backend.BiasGrad(l.Bias.Grad, dOut)
	}
	return nil
}

// backwardWeight is dW += dOutᵀ·in for a trainable W, without the bias gradient (for a caller that got it
// from a fused op).
func (l *Linear) backwardWeight(p *Pass, dOut, in *tensor.Tensor) error {
	if g := l.Weight.Grad; g != nil {
		n := dOut.Numel() / l.Out
		return p.Backend.Gemm(tensor.GemmArgs{
			TransA: true, M: l.Out, N: l.In, K: n, A: dOut, B: in, C: g, Alpha: 1, Beta: 1, Batch: 1,
		})
	}
	return nil
}
