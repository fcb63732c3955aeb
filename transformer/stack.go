package transformer

import (
	"errors"

	"github.com/tune-ml/tune/tensor"
)

// LinearStack is Linears that read one input, computed as if they were one Linear whose output rows hold
// theirs side by side: out (N, ΣOut) with part i's columns after part i−1's (a decoder layer's q_proj,
// k_proj and v_proj, or BERT's query, key and value, into one packed buffer). When the parts' weights lie one
// after another in one buffer — ParamGroups.Pack lays consecutive parameters of one trainability out that way,
// and ModelCore.SetStacks puts a stack's weights, then its biases, next to each other — the stack runs one
// GEMM for the forward (the packed bias in its epilogue), one for the input gradient and (gradients adjacent
// too) one for the weight gradients, instead of one each per part: a (N, 960) product instead of (N, 576) +
// 2·(N, 192) for SmolLM2, (N, 2304) instead of 3·(N, 768) for BERT-base, where the narrow ones run at half to
// a third of the wide one's rate. The bias gradients are one column sum (BiasGrad) over the packed dOut.
// Otherwise it runs one GEMM per part into strided rows. Either way each output element is the same dot
// product accumulated in FP32 (the GEMM's blocking may differ, so results may differ in rounding).
//
// A part may also be an Adapter (package lora's adapters): the stack then runs the parts' base Linears packed
// as above and adds each adapter's term into its column block (Adapter.ForwardDelta, BackwardDelta), so a
// LoRA layer's frozen base projections still run as one GEMM each way. When the first Adapter part is a
// SharedDelta that groups the Adapter parts (Layout asks it), their terms run as one DeltaGroup instead:
// LoRA's lora_A products, which all read the stack's input, as one GEMM each way.
type LinearStack struct {
	Parts []*Linear // the stacked Linears (an Adapter's Base()), in output-column order; equal In, all with biases or none

	projs []Projection // the parts as given: a *Linear, or an Adapter around Parts[i]

	w, g  joinedView     // the parts' weights and gradients viewed as one (ΣOut, In) tensor
	b, bg joinedView     // the parts' biases and their gradients viewed as one (ΣOut) tensor
	dbias *tensor.Tensor // (ΣOut) F32 scratch for the bias gradients when they are not adjacent (Layout)

	group DeltaGroup // the Adapter parts' terms run as one group (Layout: SharedDelta), or nil
	offs  []int      // the Adapter parts' column offsets in the packed output, in order (with group)
}

// joinedView caches the one tensor viewing several adjacent tensors, so that its pointer is stable (the
// weight-cast cache keys its half copies by it) until the parts move (a re-pack).
type joinedView struct {
	buf tensor.Buffer
	off int
	t   *tensor.Tensor
}

// Adapter is a projection computed as its Base() Linear plus a term of its own (package lora's adapters:
// scaling·(dropout(x)·Aᵀ)·Bᵀ), which it can compute alone into a column block of a wider buffer, so that a
// LinearStack runs the bases of several projections as one GEMM.
type Adapter interface {
	Projection
	// ForwardDelta adds the term to out (N, Out), whose rows are ld elements apart (0: dense), from in (N, In),
	// and keeps what BackwardDelta needs when p.Train. The base's output must already be in out.
	ForwardDelta(p *Pass, out *tensor.Tensor, ld int, in *tensor.Tensor) error
	// BackwardDelta accumulates the term's parameter gradients and adds (+=) its input gradient into dIn
	// (skipped when nil) from dOut (N, Out) with rows ld elements apart. The base's gradients are not touched.
	BackwardDelta(p *Pass, dIn, dOut *tensor.Tensor, ld int, in *tensor.Tensor) error
}

// NewLinearStack returns the stack of parts when every part is a plain *Linear or an Adapter, their base
// Linears all read In features and either all have biases or none has, and nil otherwise (another wrapper,
// a mix of biased and bias-free projections: the caller keeps its per-part path).
func NewLinearStack(parts ...Projection) *LinearStack {
	s := &LinearStack{}
	for _, p := range parts {
		var l *Linear
		switch q := p.(type) {
		case *Linear:
			l = q
		case Adapter:
			l = q.Base()
		}
		if l == nil || (len(s.Parts) > 0 && (l.In != s.Parts[0].In || (l.Bias == nil) != (s.Parts[0].Bias == nil))) {
			return nil
		}
		s.Parts, s.projs = append(s.Parts, l), append(s.projs, p)
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
		if p != s.projs[i] {
			return false
		}
	}
	return true
}

// adapted reports whether a part is an Adapter.
func (s *LinearStack) adapted() bool {
	for _, p := range s.projs {
		if _, ok := p.(Adapter); ok {
			return true
		}
	}
	return false
}

// deltas adds the adapters' terms into their column blocks of out (N, ΣOut) (forward) or their gradients
// from dOut's blocks into dIn (backward, dIn may be nil): through the group when Layout formed one, else one
// adapter at a time.
func (s *LinearStack) deltas(p *Pass, backward bool, dIn, out, in *tensor.Tensor) error {
	off, ld := 0, s.Out()
	if s.group != nil {
		blocks := make([]*tensor.Tensor, len(s.offs))
		for i, o := range s.offs {
			blocks[i] = viewFrom(out, o)
		}
		if backward {
			return s.group.BackwardDelta(p, dIn, blocks, ld, in)
		}
		return s.group.ForwardDelta(p, blocks, ld, in)
	}
	for i, q := range s.projs {
		if a, ok := q.(Adapter); ok {
			var err error
			if backward {
				err = a.BackwardDelta(p, dIn, viewFrom(out, off), ld, in)
			} else {
				err = a.ForwardDelta(p, viewFrom(out, off), ld, in)
			}
			if err != nil {
				return err
			}
		}
		off += s.Parts[i].Out
	}
	return nil
}

// Out returns ΣOut, the packed output's row width.
func (s *LinearStack) Out() int {
	n := 0
	for _, l := range s.Parts {
		n += l.Out
	}
	return n
}

// join returns the one view of ts, consecutive tensors of one buffer and dtype, with the given shape
// ((ΣOut, In) for weights, (ΣOut) for biases), or nil when they are not consecutive (or one is nil).
func (s *LinearStack) join(v *joinedView, ts []*tensor.Tensor, shape tensor.Shape) *tensor.Tensor {
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
	t.Shape = shape
	*v = joinedView{buf: t.Buf, off: t.Offset, t: &t}
	return v.t
}

// weights, grads, biases and biasGrads return the joined weight, weight-gradient, bias and bias-gradient
// views, or nil.
func (s *LinearStack) weights() *tensor.Tensor {
	return s.join(&s.w, s.collect(func(l *Linear) *Param { return l.Weight }, false), s.wShape())
}

func (s *LinearStack) grads() *tensor.Tensor {
	return s.join(&s.g, s.collect(func(l *Linear) *Param { return l.Weight }, true), s.wShape())
}

func (s *LinearStack) biases() *tensor.Tensor {
	if !s.hasBias() {
		return nil
	}
	return s.join(&s.b, s.collect(func(l *Linear) *Param { return l.Bias }, false), tensor.Shape{s.Out()})
}

func (s *LinearStack) biasGrads() *tensor.Tensor {
	if !s.hasBias() {
		return nil
	}
	return s.join(&s.bg, s.collect(func(l *Linear) *Param { return l.Bias }, true), tensor.Shape{s.Out()})
}

func (s *LinearStack) wShape() tensor.Shape { return tensor.Shape{s.Out(), s.Parts[0].In} }

// hasBias reports whether the parts have biases (all or none do).
func (s *LinearStack) hasBias() bool { return s.Parts[0].Bias != nil }

// collect returns each part's parameter values (or gradients, for grad) as param picks them.
func (s *LinearStack) collect(param func(*Linear) *Param, grad bool) []*tensor.Tensor {
	ts := make([]*tensor.Tensor, len(s.Parts))
	for i, l := range s.Parts {
		if grad {
			ts[i] = param(l).Grad
		} else {
			ts[i] = param(l).Value
		}
	}
	return ts
}

// biasTrains reports whether some part's bias gets a gradient.
func (s *LinearStack) biasTrains() bool {
	for _, l := range s.Parts {
		if l.Bias != nil && l.Bias.Grad != nil {
			return true
		}
	}
	return false
}

// Layout takes the stack's per-pass scratch from a for rows input rows in GEMM dtype dt: the (ΣOut) F32 sum
// of the bias gradients when some bias trains and the biases' gradients do not lie adjacent (BiasGrad needs
// dense rows, so the stack sums the packed gradient once and adds each part's share); and it lays out the
// parts (the caller does not call their Layout): each part's own Layout, or, when the first Adapter part
// groups the Adapter parts (two or more), the DeltaGroup's, which lays those parts out on its buffers. Call
// it whenever the pass is laid out (after a re-pack, a merge, a new adapter).
func (s *LinearStack) Layout(a *Arena, rows int, dt tensor.DType) {
	s.dbias = nil
	if s.biasTrains() && s.biasGrads() == nil {
		s.dbias = a.Take(tensor.F32, s.Out())
	}
	s.group, s.offs = nil, nil
	var as []Adapter
	var offs []int
	off := 0
	for i, q := range s.projs {
		if ad, ok := q.(Adapter); ok {
			as, offs = append(as, ad), append(offs, off)
		}
		off += s.Parts[i].Out
	}
	if len(as) > 1 {
		if sd, ok := as[0].(SharedDelta); ok {
			if g := sd.DeltaGroup(as); g != nil {
				g.Layout(a, rows, dt)
				s.group, s.offs = g, offs
			}
		}
	}
	for _, q := range s.projs {
		if _, ok := q.(Adapter); !ok || s.group == nil {
			q.Layout(a, rows, dt)
		}
	}
}

// GroupedDeltas reports whether the last Layout runs the Adapter parts' terms as one DeltaGroup.
func (s *LinearStack) GroupedDeltas() bool { return s.group != nil }

// Forward computes out (N, ΣOut) = in (N, In)·[W₁; W₂; …]ᵀ + [b₁, b₂, …], overwritten, and adds each
// Adapter part's term into its block.
func (s *LinearStack) Forward(p *Pass, out, in *tensor.Tensor) error {
	if err := s.forwardBase(p, out, in); err != nil {
		return err
	}
	return s.deltas(p, false, nil, out, in)
}

// forwardBase is Forward of the base Linears alone.
func (s *LinearStack) forwardBase(p *Pass, out, in *tensor.Tensor) error {
	n, ld := in.Numel()/s.Parts[0].In, s.Out()
	if w, b := s.weights(), s.biases(); w != nil && (b != nil || !s.hasBias()) {
		wh, err := p.Weight(w)
		if err != nil {
			return err
		}
		var bh *tensor.Tensor
		if b != nil {
			if bh, err = p.Weight(b); err != nil {
				return err
			}
		}
		return p.Backend.Gemm(tensor.GemmArgs{TransB: true, M: n, N: ld, K: s.Parts[0].In, A: in, B: wh, C: out, Alpha: 1, Bias: bh, Batch: 1})
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
// accumulates (+=) each trainable part's weight gradient dWᵢ += dOutᵢᵀ·in and bias gradient dbᵢ += Σ_rows
// dOutᵢ from dOut (N, ΣOut); then each Adapter part's BackwardDelta adds its gradients.
func (s *LinearStack) Backward(p *Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error {
	if err := s.backwardMain(p, dIn, dOut, in, accumulate); err != nil {
		return err
	}
	if err := s.biasBackward(p, dOut); err != nil {
		return err
	}
	return s.deltas(p, true, dIn, dOut, in)
}

// biasBackward accumulates the trainable bias gradients from dOut (N, ΣOut): one BiasGrad into the joined
// gradients, or into the Layout scratch and from there into each part's.
func (s *LinearStack) biasBackward(p *Pass, dOut *tensor.Tensor) error {
	if !s.biasTrains() {
		return nil
	}
	if g := s.biasGrads(); g != nil {
		return p.Backend.BiasGrad(g, dOut)
	}
	if s.dbias == nil {
		return errors.New("transformer: LinearStack's bias gradients are not adjacent and Layout took no scratch for them")
	}
	if err := p.Backend.Fill(s.dbias, 0); err != nil {
		return err
	}
	if err := p.Backend.BiasGrad(s.dbias, dOut); err != nil {
		return err
	}
	off := 0
	for _, l := range s.Parts {
		if g := l.Bias.Grad; g != nil {
			if err := p.Backend.Axpy(g, viewRange(s.dbias, off, l.Out), 1); err != nil {
				return err
			}
		}
		off += l.Out
	}
	return nil
}

// backwardMain is Backward without the bias gradients.
func (s *LinearStack) backwardMain(p *Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error {
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
// gradients too (or none trains), and likewise their biases and bias gradients.
func (s *LinearStack) Joined() bool {
	if s.weights() == nil || (s.hasBias() && s.biases() == nil) {
		return false
	}
	for _, l := range s.Parts {
		if l.Weight.Grad != nil && s.grads() == nil {
			return false
		}
		if l.Bias != nil && l.Bias.Grad != nil && s.biasGrads() == nil {
			return false
		}
	}
	return true
}

// ForwardT is Forward with the output transposed: outT (ΣOut, N) = [W₁; W₂; …]·inᵀ, so that each part's
// output is one dense (Outᵢ, N) block of outT (a gate and an up projection side by side for an elementwise
// op, without strided rows). The stack must be Joined, bias-free and without Adapters.
func (s *LinearStack) ForwardT(p *Pass, outT, in *tensor.Tensor) error {
	if s.hasBias() || s.adapted() {
		return errors.New("transformer: LinearStack.ForwardT of biased or adapted parts")
	}
	w, err := p.Weight(s.weights())
	if err != nil {
		return err
	}
	k := s.Parts[0].In
	return p.Backend.Gemm(tensor.GemmArgs{TransB: true, M: s.Out(), N: in.Numel() / k, K: k, A: w, B: in, C: outT, Alpha: 1, Batch: 1})
}

// BackwardT is Backward from the transposed output gradient dOutT (ΣOut, N): dIn (N, In) (=, or += when
// accumulate; skipped when nil) = dOutTᵀ·[W₁; W₂; …] and dW += dOutT·in (one GEMM: the gradients are
// adjacent, or none trains). The stack must be Joined, bias-free and without Adapters.
func (s *LinearStack) BackwardT(p *Pass, dIn, dOutT, in *tensor.Tensor, accumulate bool) error {
	if s.hasBias() || s.adapted() {
		return errors.New("transformer: LinearStack.BackwardT of biased or adapted parts")
	}
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
	// Layout takes the group's per-pass buffers for rows input rows in GEMM dtype dt and lays the parts out
	// (on those buffers where it can): the caller need not call the parts' Layout, and if it does, before.
	Layout(a *Arena, rows int, dt tensor.DType)
	// Forward computes outs[i] = part i's Forward of in.
	Forward(p *Pass, outs []*tensor.Tensor, in *tensor.Tensor) error
	// Backward accumulates every part's parameter gradients from dOuts and computes dIn (=, or += when
	// accumulate) = Σ_i part i's input gradient.
	Backward(p *Pass, dIn *tensor.Tensor, dOuts []*tensor.Tensor, in *tensor.Tensor, accumulate bool) error
}

// SharedDelta is an Adapter whose term can run together with other Adapters' terms reading the same input
// into one packed output (package lora's adapters: one GEMM for their stacked lora_A matrices). A
// LinearStack asks its first Adapter part at layout time and runs the group instead of each
// ForwardDelta and BackwardDelta.
type SharedDelta interface {
	Adapter
	// DeltaGroup returns a DeltaGroup that runs the terms of as (the receiver first), or nil when they cannot
	// run as one (another kind of adapter among them, an adapter dropout, a merged adapter).
	DeltaGroup(as []Adapter) DeltaGroup
}

// DeltaGroup runs the terms of Adapters that read one input: ForwardDelta and BackwardDelta are the parts'
// (outs[i], dOuts[i] part i's column block, rows ld elements apart, 0: dense), with the same values up to the
// GEMMs' blocking.
type DeltaGroup interface {
	// Layout takes the group's per-pass buffers for rows input rows in GEMM dtype dt and lays the parts out
	// (on those buffers where it can): the caller does not call the parts' Layout.
	Layout(a *Arena, rows int, dt tensor.DType)
	// ForwardDelta adds part i's term of in into outs[i], the bases' outputs already there.
	ForwardDelta(p *Pass, outs []*tensor.Tensor, ld int, in *tensor.Tensor) error
	// BackwardDelta accumulates every part's parameter gradients from dOuts and adds (+=) Σ_i part i's term's
	// input gradient into dIn (skipped when nil).
	BackwardDelta(p *Pass, dIn *tensor.Tensor, dOuts []*tensor.Tensor, ld int, in *tensor.Tensor) error
}

// GroupOf returns the group of ps when the first is a SharedInput that can group them, else nil.
func GroupOf(ps ...Projection) ProjectionGroup {
	if s, ok := ps[0].(SharedInput); ok {
		return s.Group(ps)
	}
	return nil
}
