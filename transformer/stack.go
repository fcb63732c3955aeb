package transformer

import (
	"github.com/tune-ml/tune/tensor"
)

// LinearStack is bias-free Linears that read one input, computed as if they were one Linear whose output
// rows hold theirs side by side: out (N, ΣOut) with part i's columns after part i−1's (a decoder layer's
// q_proj, k_proj and v_proj into one packed buffer). When the parts' weights lie one after another in one
// buffer — ParamGroups.Pack lays consecutive parameters of one trainability out that way, so q, k and v of a
// Llama layer without biases do — the stack runs one GEMM for the forward, one for the input gradient and
// (gradients adjacent too) one for the weight gradients, instead of one each per part: a (N, 960) product
// instead of (N, 576) + 2·(N, 192) for SmolLM2, where the narrow ones run at a third of the wide one's rate.
// Otherwise it runs one GEMM per part into strided rows. Either way each output element is the same dot
// product accumulated in FP32 (the GEMM's blocking may differ, so results may differ in rounding).
type LinearStack struct {
	Parts []*Linear // the stacked Linears, in output-column order; equal In, no biases

	w, g joinedView // the parts' weights and gradients viewed as one (ΣOut, In) tensor
}

// joinedView caches the one tensor viewing several adjacent tensors, so that its pointer is stable (the
// weight-cast cache keys its half copies by it) until the parts move (a re-pack).
type joinedView struct {
	buf tensor.Buffer
	off int
	t   *tensor.Tensor
}

// NewLinearStack returns the stack of parts when every part is a plain *Linear without bias and all read In
// features, and nil otherwise (a LoRA wrapper, a biased projection: the caller keeps its per-part path).
func NewLinearStack(parts ...Projection) *LinearStack {
	s := &LinearStack{}
	for _, p := range parts {
		l, ok := p.(*Linear)
		if !ok || l.Bias != nil || (len(s.Parts) > 0 && l.In != s.Parts[0].In) {
			return nil
		}
		s.Parts = append(s.Parts, l)
	}
	if len(s.Parts) == 0 {
		return nil
	}
	return s
}

// Matches reports whether the stack's parts are exactly parts (a caller rebuilds it after a projection was
// replaced).
func (s *LinearStack) Matches(parts ...Projection) bool {
	if s == nil || len(parts) != len(s.Parts) {
		return false
	}
	for i, p := range parts {
		if l, ok := p.(*Linear); !ok || l != s.Parts[i] {
			return false
		}
	}
	return true
}

// Out returns ΣOut, the packed output's row width.
func (s *LinearStack) Out() int {
	n := 0
	for _, l := range s.Parts {
		n += l.Out
	}
	return n
}

// join returns the one (ΣOut, In) view of ts, consecutive tensors of one buffer and dtype, or nil when they
// are not (or one is nil).
func (s *LinearStack) join(v *joinedView, ts []*tensor.Tensor) *tensor.Tensor {
	next := -1
	for i, t := range ts {
		if t == nil || (i > 0 && (t.Buf != ts[0].Buf || t.DType != ts[0].DType || t.Offset != next)) {
			return nil
		}
		next = t.Offset + t.Numel()
	}
	if v.t != nil && v.buf == ts[0].Buf && v.off == ts[0].Offset {
		return v.t
	}
	t := *ts[0]
	t.Shape = tensor.Shape{s.Out(), s.Parts[0].In}
	*v = joinedView{buf: t.Buf, off: t.Offset, t: &t}
	return v.t
}

// weights and grads return the joined weight and gradient views, or nil.
func (s *LinearStack) weights() *tensor.Tensor {
	ts := make([]*tensor.Tensor, len(s.Parts))
	for i, l := range s.Parts {
		ts[i] = l.Weight.Value
	}
	return s.join(&s.w, ts)
}

func (s *LinearStack) grads() *tensor.Tensor {
	ts := make([]*tensor.Tensor, len(s.Parts))
	for i, l := range s.Parts {
		ts[i] = l.Weight.Grad
	}
	return s.join(&s.g, ts)
}

// Forward computes out (N, ΣOut) = in (N, In)·[W₁; W₂; …]ᵀ, overwritten.
func (s *LinearStack) Forward(p *Pass, out, in *tensor.Tensor) error {
	n, ld := in.Numel()/s.Parts[0].In, s.Out()
	if w := s.weights(); w != nil {
		wh, err := p.Weight(w)
		if err != nil {
			return err
		}
		return p.Backend.Gemm(tensor.GemmArgs{TransB: true, M: n, N: ld, K: s.Parts[0].In, A: in, B: wh, C: out, Alpha: 1, Batch: 1})
	}
	off := 0
	for _, l := range s.Parts {
		if err := l.forwardRows(p, viewFrom(out, off), ld, in); err != nil {
			return err
		}
		off += l.Out
	}
	return nil
}

// Backward computes dIn (N, In) (=, or += when accumulate; skipped when nil) = dOut·[W₁; W₂; …] and
// accumulates (+=) each trainable part's weight gradient dWᵢ += dOutᵢᵀ·in from dOut (N, ΣOut).
func (s *LinearStack) Backward(p *Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error {
	ld, k := s.Out(), s.Parts[0].In
	n := dOut.Numel() / ld
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	if dIn != nil {
		if w := s.weights(); w != nil {
			wh, err := p.Weight(w)
			if err != nil {
				return err
			}
			if err := p.Backend.Gemm(tensor.GemmArgs{M: n, N: k, K: ld, A: dOut, B: wh, C: dIn, Alpha: 1, Beta: beta, Batch: 1}); err != nil {
				return err
			}
		} else {
			off := 0
			for _, l := range s.Parts {
				wh, err := p.Weight(l.Weight.Value)
				if err != nil {
					return err
				}
				if err := p.Backend.Gemm(tensor.GemmArgs{
					M: n, N: k, K: l.Out, A: viewFrom(dOut, off), LDA: ld, B: wh, C: dIn, Alpha: 1, Beta: beta, Batch: 1,
				}); err != nil {
					return err
				}
				off, beta = off+l.Out, 1
			}
		}
	}
	if g := s.grads(); g != nil {
		return p.Backend.Gemm(tensor.GemmArgs{TransA: true, M: ld, N: k, K: n, A: dOut, B: in, C: g, Alpha: 1, Beta: 1, Batch: 1})
	}
	off := 0
	for _, l := range s.Parts {
		if g := l.Weight.Grad; g != nil {
			if err := p.Backend.Gemm(tensor.GemmArgs{
				TransA: true, M: l.Out, N: k, K: n, A: viewFrom(dOut, off), LDA: ld, B: in, C: g, Alpha: 1, Beta: 1, Batch: 1,
			}); err != nil {
				return err
			}
		}
		off += l.Out
	}
	return nil
}

// Joined reports whether the stack runs as one GEMM per product: the parts' weights are adjacent, and their
// gradients too (or none trains).
func (s *LinearStack) Joined() bool {
	if s.weights() == nil {
		return false
	}
	if s.grads() != nil {
		return true
	}
	for _, l := range s.Parts {
		if l.Weight.Grad != nil {
			return false
		}
	}
	return true
}

// ForwardT is Forward with the output transposed: outT (ΣOut, N) = [W₁; W₂; …]·inᵀ, so that each part's
// output is one dense (Outᵢ, N) block of outT (a gate and an up projection side by side for an elementwise
// op, without strided rows). The stack must be Joined.
func (s *LinearStack) ForwardT(p *Pass, outT, in *tensor.Tensor) error {
	w, err := p.Weight(s.weights())
	if err != nil {
		return err
	}
	k := s.Parts[0].In
	return p.Backend.Gemm(tensor.GemmArgs{TransB: true, M: s.Out(), N: in.Numel() / k, K: k, A: w, B: in, C: outT, Alpha: 1, Batch: 1})
}

// BackwardT is Backward from the transposed output gradient dOutT (ΣOut, N): dIn (N, In) (=, or += when
// accumulate; skipped when nil) = dOutTᵀ·[W₁; W₂; …] and dW += dOutT·in (one GEMM: the gradients are
// adjacent, or none trains). The stack must be Joined.
func (s *LinearStack) BackwardT(p *Pass, dIn, dOutT, in *tensor.Tensor, accumulate bool) error {
	ld, k := s.Out(), s.Parts[0].In
	n := dOutT.Numel() / ld
	if dIn != nil {
		w, err := p.Weight(s.weights())
		if err != nil {
			return err
		}
		beta := float32(0)
		if accumulate {
			beta = 1
		}
		if err := p.Backend.Gemm(tensor.GemmArgs{TransA: true, M: n, N: k, K: ld, A: dOutT, B: w, C: dIn, Alpha: 1, Beta: beta, Batch: 1}); err != nil {
			return err
		}
	}
	if g := s.grads(); g != nil {
		return p.Backend.Gemm(tensor.GemmArgs{M: ld, N: k, K: n, A: dOutT, B: in, C: g, Alpha: 1, Beta: 1, Batch: 1})
	}
	return nil
}

// ForwardFromT is Forward from a transposed input: out (N, Out) = (inT)ᵀ·Wᵀ + b for inT (In, N), as a
// LinearStack's ForwardT leaves it (down_proj after the gate/up pair).
func (l *Linear) ForwardFromT(p *Pass, out, inT *tensor.Tensor) error {
	w, err := p.Weight(l.Weight.Value)
	if err != nil {
		return err
	}
	var bias *tensor.Tensor
	if l.Bias != nil {
		if bias, err = p.Weight(l.Bias.Value); err != nil {
			return err
		}
	}
	return p.Backend.Gemm(tensor.GemmArgs{TransA: true, TransB: true, M: inT.Numel() / l.In, N: l.Out, K: l.In, A: inT, B: w, C: out,
		Alpha: 1, Bias: bias, Batch: 1})
}

// BackwardToT is Backward for ForwardFromT: dInT (In, N) = Wᵀ·dOutᵀ (overwritten; skipped when nil), the
// input gradient transposed as the input was, dW += dOutᵀ·(inT)ᵀ and db += Σ_rows dOut where trainable.
func (l *Linear) BackwardToT(p *Pass, dInT, dOut, inT *tensor.Tensor) error {
	if err := l.BackwardInputToT(p, dInT, dOut); err != nil {
		return err
	}
	return l.BackwardParamsFromT(p, dOut, inT)
}

// BackwardInputToT is BackwardToT's input gradient alone (nothing for nil dInT), for a caller that forms the
// input inT only afterwards (recomputed in the same pass as the gradient of the op before).
func (l *Linear) BackwardInputToT(p *Pass, dInT, dOut *tensor.Tensor) error {
	if dInT == nil {
		return nil
	}
	w, err := p.Weight(l.Weight.Value)
	if err != nil {
		return err
	}
	return p.Backend.Gemm(tensor.GemmArgs{TransA: true, TransB: true, M: l.In, N: dOut.Numel() / l.Out, K: l.Out, A: w, B: dOut,
		C: dInT, Alpha: 1, Batch: 1})
}

// BackwardParamsFromT is BackwardToT's parameter gradients alone: dW += dOutᵀ·(inT)ᵀ and db += Σ_rows dOut
// where trainable.
func (l *Linear) BackwardParamsFromT(p *Pass, dOut, inT *tensor.Tensor) error {
	if g := l.Weight.Grad; g != nil {
		if err := p.Backend.Gemm(tensor.GemmArgs{TransA: true, TransB: true, M: l.Out, N: l.In, K: dOut.Numel() / l.Out, A: dOut,
			B: inT, C: g, Alpha: 1, Beta: 1, Batch: 1}); err != nil {
			return err
		}
	}
	if l.Bias != nil && l.Bias.Grad != nil {
		return p.Backend.BiasGrad(l.Bias.Grad, dOut)
	}
	return nil
}

// SharedInput is implemented by projections that can run together with others of their kind reading the same
// input, sharing work between them (package lora's adapters: one GEMM for their stacked lora_A matrices,
// which all multiply the input). A layer whose projections share an input (q, k, v; gate, up) asks the first
// for a group at layout time and calls the group instead of each projection.
type SharedInput interface {
	Projection
	// Group returns a ProjectionGroup that runs ps (the receiver first) on one shared input, or nil when they
	// cannot run as one (another kind of projection among them, an adapter dropout).
	Group(ps []Projection) ProjectionGroup
}

// ProjectionGroup runs projections that read one input: Forward and Backward are the parts' Forward and
// Backward (outs[i], dOuts[i] the part i's), with the same values up to the GEMMs' blocking.
type ProjectionGroup interface {
	// Layout takes the group's per-pass buffers for rows input rows in GEMM dtype dt (the parts keep their own
	// Layout).
	Layout(a *Arena, rows int, dt tensor.DType)
	// Forward computes outs[i] = part i's Forward of in.
	Forward(p *Pass, outs []*tensor.Tensor, in *tensor.Tensor) error
	// Backward accumulates every part's parameter gradients from dOuts and computes dIn (=, or += when
	// accumulate) = Σ_i part i's input gradient.
	Backward(p *Pass, dIn *tensor.Tensor, dOuts []*tensor.Tensor, in *tensor.Tensor, accumulate bool) error
}

// GroupOf returns the group of ps when the first is a SharedInput that can group them, else nil.
func GroupOf(ps ...Projection) ProjectionGroup {
	if s, ok := ps[0].(SharedInput); ok {
		return s.Group(ps)
	}
	return nil
}
