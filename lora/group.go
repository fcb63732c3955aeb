package lora

import (
	"errors"
	"fmt"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

var (
	_ transformer.SharedInput = (*Linear)(nil)
	_ transformer.SharedDelta = (*Linear)(nil)
)

// groupingOff makes Group refuse every group (the tests' per-adapter reference).
var groupingOff bool

// group is adapters on projections that read one input (a decoder layer's q_proj, k_proj, v_proj, or
// gate_proj, up_proj): their lora_A matrices all multiply that input, so the group stacks them, A = [A₁; A₂; …]
// (ΣR, In), and runs h = x·Aᵀ, dA = dhᵀ·x and dx += dh·A as one GEMM each instead of one per adapter (rank-16
// products with K or N = 16 run at 8–40 TFLOP/s: each is a pass over the (N, In) input or gradient). The B
// side stays per adapter, reading and writing its column block of h and dh. PEFT's parameters, names and
// saved format are the adapters' own; only the pass's buffers are shared.
//
// A group runs whole projections (transformer.ProjectionGroup: the parts' bases too, for a layer that calls
// them one by one) or the adapters' terms alone (transformer.DeltaGroup: a transformer.LinearStack computed
// the bases packed, the B products read and write the parts' column blocks of its packed buffers).
type group struct {
	parts []*Linear
	in    int            // the shared In
	r     int            // ΣR
	h, dh *tensor.Tensor // (N, ΣR) h: x·Aᵀ, and the gradient of h (scaling folded in)
	a     *tensor.Tensor // (ΣR, In) h: the stacked A as the GEMMs read it (copied from the parts' casts each pass)
	da    *tensor.Tensor // (ΣR, In) F32: the stacked A's gradient, added to each part's
	ready bool           // the last Forward ran grouped in a training pass
}

// Group returns the adapters ps (l first) as one group when each is an unmerged *Linear without
// lora_dropout reading In features (the dropout draws a mask per adapter, so their inputs would differ);
// nil otherwise, and for fewer than two.
func (l *Linear) Group(ps []transformer.Projection) transformer.ProjectionGroup {
	if g := l.newGroup(len(ps), func(i int) transformer.Projection { return ps[i] }); g != nil {
		return g
	}
	return nil
}

// DeltaGroup is Group for the terms alone (a transformer.LinearStack's Adapter parts), on the same
// conditions.
func (l *Linear) DeltaGroup(as []transformer.Adapter) transformer.DeltaGroup {
	if g := l.newGroup(len(as), func(i int) transformer.Projection { return as[i] }); g != nil {
		return g
	}
	return nil
}

// newGroup returns the group of the n projections part(0), … when Group's conditions hold, else nil.
func (l *Linear) newGroup(n int, part func(int) transformer.Projection) *group {
	if n < 2 || groupingOff {
		return nil
	}
	g := &group{in: l.base.In}
	for i := range n {
		q, ok := part(i).(*Linear)
		if !ok || q.merged || q.Dropout > 0 || q.base.In != g.in {
			return nil
		}
		g.parts = append(g.parts, q)
		g.r += q.R
	}
	return g
}

// Layout takes h and dh (rows, ΣR) and the stacked A (ΣR, In) in dt, and its F32 gradient, and lays the
// parts out on h and dh: part i's own (rows, Rᵢ) h and dh, which it uses only when the group falls back to
// it (a part merged since layout), are dense blocks of the group's, so the group costs no more memory than
// its parts.
func (g *group) Layout(a *transformer.Arena, rows int, dt tensor.DType) {
	g.h, g.dh = a.Take(dt, rows, g.r), a.Take(dt, rows, g.r)
	g.a, g.da = a.Take(dt, g.r, g.in), a.Take(tensor.F32, g.r, g.in)
	off := 0
	for _, q := range g.parts {
		q.c = linearCache{h: block(g.h, rows*off, rows, q.R), dh: block(g.dh, rows*off, rows, q.R)}
		off += q.R
	}
}

// block returns the (rows, cols) view of t from element off (the layout guarantees it fits).
func block(t *tensor.Tensor, off, rows, cols int) *tensor.Tensor {
	v, err := t.View(off, rows, cols)
	if err != nil {
		panic(err)
	}
	return v
}

// grouped reports whether the parts can run grouped now (none merged since layout).
func (g *group) grouped() bool {
	for _, q := range g.parts {
		if q.merged || q.Dropout > 0 {
			return false
		}
	}
	return true
}

// view returns the view of t from element off to its end (a column block whose rows the caller's GEMM
// steps through with t's row length).
func view(t *tensor.Tensor, off int) *tensor.Tensor { return span(t, off, t.Numel()-off) }

// span returns the 1-D view of n elements of t from element off (the layout guarantees it fits).
func span(t *tensor.Tensor, off, n int) *tensor.Tensor {
	v, err := t.View(off, n)
	if err != nil {
		panic(err)
	}
	return v
}

// Forward computes each part's base output, then the terms as ForwardDelta does (outs dense).
func (g *group) Forward(p *transformer.Pass, outs []*tensor.Tensor, in *tensor.Tensor) error {
	g.ready = false
	if !g.grouped() {
		for i, q := range g.parts {
			if err := q.Forward(p, outs[i], in); err != nil {
				return err
			}
		}
		return nil
	}
	for i, q := range g.parts {
		if err := q.base.Forward(p, outs[i], in); err != nil {
			return err
		}
	}
	return g.forwardTerms(p, outs, 0, in)
}

// ForwardDelta adds the parts' terms into outs (rows ld elements apart): grouped as forwardTerms, or each
// part's own ForwardDelta when a part merged since layout.
func (g *group) ForwardDelta(p *transformer.Pass, outs []*tensor.Tensor, ld int, in *tensor.Tensor) error {
	g.ready = false
	if !g.grouped() {
		for i, q := range g.parts {
			if err := q.ForwardDelta(p, outs[i], ld, in); err != nil {
				return err
			}
		}
		return nil
	}
	return g.forwardTerms(p, outs, ld, in)
}

// forwardTerms computes h = x·[A₁; A₂; …]ᵀ in one GEMM, then outs[i] += scalingᵢ·hᵢ·Bᵢᵀ with hᵢ part i's column
// block of h and outs[i]'s rows ld elements apart (0: dense).
func (g *group) forwardTerms(p *transformer.Pass, outs []*tensor.Tensor, ld int, in *tensor.Tensor) error {
	bk := p.Backend
	n, err := g.rows(in)
	if err != nil {
		return err
	}
	off := 0
	for _, q := range g.parts {
		q.c.ready = false
		a, err := p.Weight(q.A.Value) // (R, In)
		if err != nil {
			return err
		}
		if err := bk.Copy(span(g.a, off*g.in, q.R*g.in), a); err != nil {
			return err
		}
		off += q.R
	}
	h := g.h
	if err := bk.Gemm(tensor.GemmArgs{TransB: true, M: n, N: g.r, K: g.in, A: in, B: g.a, C: h, Alpha: 1, Batch: 1}); err != nil {
		return err
	}
	off = 0
	for i, q := range g.parts {
		bw, err := p.Weight(q.B.Value) // (Out, R)
		if err != nil {
			return err
		}
		if err := bk.Gemm(tensor.GemmArgs{TransB: true, M: n, N: q.base.Out, K: q.R, A: view(h, off), LDA: g.r, B: bw, C: outs[i],
			LDC: ld, Alpha: q.Scaling, Beta: 1, Batch: 1}); err != nil {
			return err
		}
		off += q.R
	}
	g.ready = p.Train
	return nil
}

// rows returns in's row count, checking the layout's buffers hold it.
func (g *group) rows(in *tensor.Tensor) (int, error) {
	n := in.Numel() / g.in
	if g.h == nil || g.h.Buf == nil {
		return 0, errors.New("lora: no pass buffers for the adapter group: the model must call Layout before Forward")
	}
	if n*g.r > g.h.Numel() {
		return 0, fmt.Errorf("lora: the adapter group's input has %d rows but the pass's buffers were laid out for %d", n, g.h.Shape[0])
	}
	return n, nil
}

// Backward computes the parts' base input gradients into dIn, then the terms' gradients as BackwardDelta
// does (dOuts dense).
func (g *group) Backward(p *transformer.Pass, dIn *tensor.Tensor, dOuts []*tensor.Tensor, in *tensor.Tensor, accumulate bool) error {
	if !g.ready {
		for i, q := range g.parts {
			if err := q.Backward(p, dIn, dOuts[i], in, accumulate || i > 0); err != nil {
				return err
			}
		}
		return nil
	}
	for i, q := range g.parts {
		if err := q.base.Backward(p, dIn, dOuts[i], in, accumulate || i > 0); err != nil {
			return err
		}
	}
	return g.backwardTerms(p, dIn, dOuts, 0, in)
}

// BackwardDelta accumulates the terms' gradients from dOuts (rows ld elements apart) and adds their input
// gradient into dIn (skipped when nil): grouped as backwardTerms after a grouped training forward, else
// each part's own BackwardDelta (which errors without a training forward).
func (g *group) BackwardDelta(p *transformer.Pass, dIn *tensor.Tensor, dOuts []*tensor.Tensor, ld int, in *tensor.Tensor) error {
	if !g.ready {
		for i, q := range g.parts {
			if err := q.BackwardDelta(p, dIn, dOuts[i], ld, in); err != nil {
				return err
			}
		}
		return nil
	}
	return g.backwardTerms(p, dIn, dOuts, ld, in)
}

// backwardTerms computes per part dBᵢ += scalingᵢ·dOutᵢᵀ·hᵢ and dhᵢ = scalingᵢ·dOutᵢ·Bᵢ into its column block
// of dh (dOuts[i]'s rows ld elements apart, 0: dense), then dA = dhᵀ·x in one GEMM (added to each part's
// lora_A gradient) and dIn += dh·[A₁; A₂; …] in one (skipped when dIn is nil).
func (g *group) backwardTerms(p *transformer.Pass, dIn *tensor.Tensor, dOuts []*tensor.Tensor, ld int, in *tensor.Tensor) error {
	g.ready = false
	bk := p.Backend
	n, err := g.rows(in)
	if err != nil {
		return err
	}
	off := 0
	for i, q := range g.parts {
		bw, err := p.Weight(q.B.Value) // (Out, R)
		if err != nil {
			return err
		}
		if gr := q.B.Grad; gr != nil {
			if err := bk.Gemm(tensor.GemmArgs{TransA: true, M: q.base.Out, N: q.R, K: n, A: dOuts[i], LDA: ld, B: view(g.h, off), LDB: g.r,
				C: gr, Alpha: q.Scaling, Beta: 1, Batch: 1}); err != nil {
				return err
			}
		}
		if err := bk.Gemm(tensor.GemmArgs{M: n, N: q.R, K: q.base.Out, A: dOuts[i], LDA: ld, B: bw, C: view(g.dh, off), LDC: g.r,
			Alpha: q.Scaling, Batch: 1}); err != nil {
			return err
		}
		off += q.R
	}
	if err := bk.Gemm(tensor.GemmArgs{TransA: true, M: g.r, N: g.in, K: n, A: g.dh, B: in, C: g.da, Alpha: 1, Batch: 1}); err != nil {
		return err
	}
	off = 0
	for _, q := range g.parts {
		if gr := q.A.Grad; gr != nil {
			if err := bk.Axpy(gr, span(g.da, off*g.in, q.R*g.in), 1); err != nil {
				return err
			}
		}
		off += q.R
	}
	if dIn == nil {
		return nil
	}
	return bk.Gemm(tensor.GemmArgs{M: n, N: g.in, K: g.r, A: g.dh, B: g.a, C: dIn, Alpha: 1, Beta: 1, Batch: 1})
}
