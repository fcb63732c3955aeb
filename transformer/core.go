package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
)

// Slot is one replaceable projection of a model: its module path ("model.layers.0.self_attn.q_proj") and the
// field that holds it.
type Slot struct {
	Path string      // the module path, without ".weight"
	Proj *Projection // the model's field; ReplaceProjections writes the replacement into it
}

// ModelCore is the plumbing every model family shares, embedded in each family's model: the backend, the
// autocast policy with its per-step weight-cast cache, the flat parameter buffers (ParamGroups), the step arena,
// and the methods of Model and Adaptable that only need the parameter list and the projection slots —
// Backend, SetPolicy, Policy, Trainable, ZeroGrad, WeightsUpdated, NamedParameters, Parameter, SetTrainable,
// Projections and ReplaceProjections. A family initialises it with InitCore, then packs once (Pack).
type ModelCore struct {
	b       tensor.Backend
	name    string // error prefix: "transformer" (BERT), "llama", "gpt2"
	policy  amp.Policy
	cache   *amp.WeightCache
	groups  ParamGroups
	arena   *Arena
	params  func() []NamedParameter
	slots   func() []Slot
	changed func()
	// frozenDT is the dtype frozen projection weights are stored in (StoreFrozenIn; Invalid means F32).
	frozenDT tensor.DType
	// stacks lists the projection groups whose weights (and biases) the packing lays out adjacently (SetStacks).
	stacks func() [][]Projection
}

// SetStacks names the projections that run as LinearStacks: Pack lays out each group's base weights one after
// another at the place of its first parameter, then its biases likewise, instead of in params' order
// (weight, bias, weight, bias, …), so that the stack reads them as one (ΣOut, In) matrix and one (ΣOut)
// vector. Names, saving, loading and LoRA still follow params; only the flat buffers' order changes (and with
// it the order of the summation in the global gradient norm). Call it before the first Pack.
func (c *ModelCore) SetStacks(stacks func() [][]Projection) { c.stacks = stacks }

// packOrder returns the parameter list in the order Pack lays it out (SetStacks).
func (c *ModelCore) packOrder() []NamedParameter {
	list := c.params()
	if c.stacks == nil {
		return list
	}
	type member struct{ stack, part int }
	in := map[*Param]member{}
	groups := c.stacks()
	for i, g := range groups {
		for j, p := range g {
			if p == nil || p.Base() == nil {
				continue
			}
			l := p.Base()
			in[l.Weight] = member{i, j}
			if l.Bias != nil {
				in[l.Bias] = member{i, j}
			}
		}
	}
	byParam := make(map[*Param]NamedParameter, len(list))
	for _, np := range list {
		byParam[np.Param] = np
	}
	done := make([]bool, len(groups))
	out := make([]NamedParameter, 0, len(list))
	for _, np := range list {
		m, ok := in[np.Param]
		if !ok {
			out = append(out, np)
			continue
		}
		if done[m.stack] {
			continue
		}
		done[m.stack] = true
		var biases []NamedParameter
		for _, p := range groups[m.stack] {
			if p == nil || p.Base() == nil {
				continue
			}
			l := p.Base()
			if w, ok := byParam[l.Weight]; ok {
				out = append(out, w)
			}
			if b, ok := byParam[l.Bias]; ok && l.Bias != nil {
				biases = append(biases, b)
			}
		}
		out = append(out, biases...)
	}
	return out
}

// InitCore sets up the core on backend b. params lists the model's parameters with their full Hugging Face
// names in named_parameters() order (the one source of names: packing, saving, loading and LoRA read it);
// slots lists the replaceable projections in model order; changed is called whenever the policy changes or
// the parameters are re-packed, for the family to drop its carved arena shape and any pending Backward. name
// prefixes error messages.
func (c *ModelCore) InitCore(b tensor.Backend, name string, params func() []NamedParameter, slots func() []Slot, changed func()) {
	*c = ModelCore{b: b, name: name, groups: ParamGroups{B: b}, arena: NewArena(b), params: params, slots: slots, changed: changed}
}

// Backend returns the backend the model's tensors live on.
func (c *ModelCore) Backend() tensor.Backend { return c.b }

// Arena returns the model's step arena.
func (c *ModelCore) Arena() *Arena { return c.arena }

// Cache returns the weight-cast cache of the current policy (nil under FP32).
func (c *ModelCore) Cache() *amp.WeightCache { return c.cache }

// SetPolicy sets the autocast policy for the following Forward and Backward calls. Changing it drops the
// weight-cast cache; a pending Backward is cancelled.
func (c *ModelCore) SetPolicy(p amp.Policy) {
	if p == c.policy {
		return
	}
	c.policy = p
	if c.cache != nil {
		c.cache.Free()
		c.cache = nil
	}
	if p.Enabled {
		c.cache = amp.NewWeightCache(c.b, p.DType)
		c.cache.SetFlat(c.castSpan()) // the trainable projections' casts are one Cast
	}
	c.changed()
}

// Policy returns the autocast policy in effect.
func (c *ModelCore) Policy() amp.Policy { return c.policy }

// NewPass returns the Pass of one Forward with opts: every master weight is cast afresh under autocast unless
// opts.ReuseWeightCasts.
func (c *ModelCore) NewPass(opts ForwardOptions) Pass {
	if c.cache != nil && !opts.ReuseWeightCasts {
		c.cache.Invalidate() // every master weight is cast afresh: edits since the last Forward are seen
	}
	return Pass{Backend: c.b, Policy: c.policy, Cache: c.cache, Train: opts.Train, Seed: opts.Seed, Offset: opts.Offset, LossScale: opts.LossScale,
		Observe: opts.Observe}
}

// Pack lays the parameters out again (ParamGroups.Pack over the parameter list) after a change of modules or
// trainability; gradients restart at zero and the family's changed hook runs.
func (c *ModelCore) Pack() error {
	c.changed()
	if err := c.groups.PackStored(c.packOrder(), c.frozenDT, c.storable()); err != nil {
		return err
	}
	if c.cache != nil {
		c.cache.SetFlat(c.castSpan())
		c.cache.Invalidate()
	}
	return nil
}

// FreeParameters releases the flat parameter buffers (a model whose load failed).
func (c *ModelCore) FreeParameters() {
	if c.cache != nil {
		c.cache.SetFlat(nil)
	}
	c.b.Free(c.groups.Train)
	c.b.Free(c.groups.Grads)
	c.b.Free(c.groups.Frozen)
	c.b.Free(c.groups.Half)
	c.groups.Train, c.groups.Grads, c.groups.Frozen, c.groups.Half = nil, nil, nil, nil
}

// castSpan returns the view of the trainable buffer from the first to the end of the last trainable
// parameter of a projection slot (a Linear's weight and bias, a LoRA wrapper's adapters: the parameters
// read through Pass.Weight by GEMMs), which the weight-cast cache casts as one copy (amp.WeightCache.SetFlat);
// nil when there is none. Embeddings before the first layer stay outside it (a tied LM head's table gets a
// copy of its own); norms between projections are inside, a few elements each.
func (c *ModelCore) castSpan() *tensor.Tensor {
	t := c.groups.Train
	if t == nil {
		return nil
	}
	lo, hi := -1, -1
	for _, s := range c.slots() {
		if s.Proj == nil || *s.Proj == nil {
			continue
		}
		for _, np := range (*s.Proj).Parameters() {
			v := np.Param.Value
			if np.Param.Grad == nil || v.Buf != t.Buf {
				continue
			}
			if off := v.Offset - t.Offset; lo < 0 || off < lo {
				lo = off
			}
			if end := v.Offset - t.Offset + v.Numel(); end > hi {
				hi = end
			}
		}
	}
	if lo < 0 {
		return nil
	}
	v, err := t.View(lo, hi-lo)
	if err != nil {
		return nil
	}
	return v
}

// WeightCastSpan returns the elements of the trainable parameters the weight-cast cache casts as one copy
// under autocast (the span of the projections' trainable parameters in the flat buffer; 0 for none), for
// a memory plan.
func (c *ModelCore) WeightCastSpan() int {
	if v := c.castSpan(); v != nil {
		return v.Numel()
	}
	return 0
}

// storable returns the parameters StoreFrozenIn may keep in half: the weights and biases of every projection
// slot's plain Linear (Slot.Proj's Base()), the only parameters read solely by GEMM-class ops through
// Pass.Weight. Embeddings (read by the F32 Embedding op, and tied LM heads with them) and LayerNorm/RMSNorm
// parameters (FP32 ops under autocast) stay F32.
func (c *ModelCore) storable() func(*Param) bool {
	set := map[*Param]bool{}
	for _, s := range c.slots() {
		if s.Proj == nil || *s.Proj == nil || (*s.Proj).Base() == nil {
			continue
		}
		l := (*s.Proj).Base()
		set[l.Weight] = true
		if l.Bias != nil {
			set[l.Bias] = true
		}
	}
	return func(p *Param) bool { return set[p] }
}

// StoreFrozenIn stores every frozen projection weight and bias in dt (F16 or BF16: the autocast dtype the
// model trains in), or back in F32. In half they are cast once here — the same rounding the weight-cast cache
// applies every step, so Forward and Backward compute exactly what they computed before — and then read
// directly by the GEMMs: no FP32 copy, no per-step cast, and (being frozen) no gradient or optimizer state.
// Trainable parameters keep their FP32 masters and buffers untouched (an optimizer built over Trainable stays
// valid). Later re-packs (SetTrainable, ReplaceProjections, loading) keep the setting. Embeddings and norms
// stay F32 (storable).
//
// What it changes: the FP32 values of the stored weights are gone. Saving writes their rounded values
// widened to F32; a LoRA merge into such a base rounds W + scaling·B·A once into dt (lora.Linear.Merge);
// making a stored parameter trainable again widens the rounded value; StoreFrozenIn(tensor.F32) widens too.
// A Forward under FP32 or under the other half dtype refuses (Pass.Weight) rather than compute with rounded
// weights: reload the model from its checkpoint for that. Switching F16 ↔ BF16 directly is an error.
func (c *ModelCore) StoreFrozenIn(dt tensor.DType) error {
	if dt != tensor.F32 && dt != tensor.F16 && dt != tensor.BF16 {
		return fmt.Errorf("%s: frozen weights can be stored in F32, F16 or BF16, not %v", c.name, dt)
	}
	cur := c.frozenDT
	if cur == tensor.Invalid {
		cur = tensor.F32
	}
	if dt == cur {
		return nil
	}
	if cur != tensor.F32 && dt != tensor.F32 {
		return fmt.Errorf("%s: frozen weights are stored in %v; storing them in %v would round them twice: reload the model",
			c.name, cur, dt)
	}
	if err := c.groups.RepackFrozen(c.packOrder(), dt, c.storable()); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	c.frozenDT = dt
	if c.cache != nil {
		c.cache.Free() // drops the copies of the weights that moved; the next Forward casts the F32 ones afresh
	}
	c.changed()
	return nil
}

// FrozenDType returns the dtype frozen projection weights are stored in (StoreFrozenIn): F32 unless changed.
func (c *ModelCore) FrozenDType() tensor.DType {
	if c.frozenDT == tensor.Invalid {
		return tensor.F32
	}
	return c.frozenDT
}

// FrozenStoredBytes returns the bytes of the frozen parameters stored in half (the Half buffer): 0 unless
// StoreFrozenIn chose F16 or BF16 and some projection is frozen.
func (c *ModelCore) FrozenStoredBytes() int64 {
	if c.groups.Half == nil {
		return 0
	}
	return int64(c.groups.Half.Bytes())
}

// Trainable returns the flat FP32 buffers of every trainable parameter and its gradient (equal length, in
// NamedParameters order except that a stack's weights and biases lie together: SetStacks) and their segments with weight-decay flags. All three are nil when nothing is
// trainable.
func (c *ModelCore) Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment) {
	return c.groups.Train, c.groups.Grads, append([]tensor.Segment(nil), c.groups.Segs...)
}

// ZeroGrad sets every trainable gradient to 0 (one fill of the flat gradient buffer).
func (c *ModelCore) ZeroGrad() error {
	if c.groups.Grads == nil {
		return nil
	}
	return c.b.Fill(c.groups.Grads, 0)
}

// WeightsUpdated invalidates the weight-cast cache after the optimizer (or a load) changed the master weights.
func (c *ModelCore) WeightsUpdated() {
	if c.cache != nil {
		c.cache.Invalidate()
	}
}

// NamedParameters lists all parameters in Hugging Face order and naming, with their weight-decay flags as HF's
// Trainer sets them (DecayApplies).
func (c *ModelCore) NamedParameters() []NamedParam {
	list := c.params()
	out := make([]NamedParam, len(list))
	for i, np := range list {
		out[i] = NamedParam{Name: np.Name, Value: np.Param.Value, Grad: np.Param.Grad,
			Trainable: np.Param.Grad != nil, Decay: DecayApplies(np.Name)}
	}
	return out
}

// Parameter returns the parameter with the given full name.
func (c *ModelCore) Parameter(name string) (*Param, bool) {
	for _, np := range c.params() {
		if np.Name == name {
			return np.Param, true
		}
	}
	return nil, false
}

// SetTrainable sets every parameter's trainability from its full name (keep returns true to train it) and
// re-packs once; gradients restart at zero. SetTrainable(func(string) bool { return false }) freezes the whole
// model, as PEFT does before adding adapters.
func (c *ModelCore) SetTrainable(keep func(name string) bool) error {
	for _, np := range c.params() {
		np.Param.Trainable = keep(np.Name)
	}
	return c.Pack()
}

// Projections lists every replaceable projection with its module path, in model order: what LoRA's
// target_modules are matched against.
func (c *ModelCore) Projections() []ModuleProjection {
	slots := c.slots()
	out := make([]ModuleProjection, len(slots))
	for i, s := range slots {
		out[i] = ModuleProjection{Path: s.Path, Projection: *s.Proj}
	}
	return out
}

// ReplaceProjections puts each projection of repl in place of the module at its path (as PEFT swaps a target
// nn.Linear for a lora.Linear) and re-packs the parameters once. A replacement must compute the same shape as
// the module it replaces (equal Base().In and Base().Out). The model takes ownership of the replacement's
// parameter tensors: their values move into the flat buffers, the tensors a replacement allocated itself are
// freed, and every Param's Value is updated in place. Gradients restart at zero. On an error nothing is
// replaced.
func (c *ModelCore) ReplaceProjections(repl map[string]Projection) error {
	slots := c.slots()
	byPath := make(map[string]*Projection, len(slots))
	paths := make([]string, len(slots))
	for i, s := range slots {
		byPath[s.Path], paths[i] = s.Proj, s.Path
	}
	for path, p := range repl {
		slot, ok := byPath[path]
		if !ok {
			return fmt.Errorf("%s: no projection module %q (closest: %q; Projections lists them)", c.name, path, ClosestName(path, paths))
		}
		if p == nil || p.Base() == nil {
			return fmt.Errorf("%s: replacement for %q is nil", c.name, path)
		}
		old, nb := (*slot).Base(), p.Base()
		if old.In != nb.In || old.Out != nb.Out {
			return fmt.Errorf("%s: replacement for %q maps %d → %d features, the module maps %d → %d",
				c.name, path, nb.In, nb.Out, old.In, old.Out)
		}
	}
	saved := make(map[*Projection]Projection, len(repl))
	for path, p := range repl {
		saved[byPath[path]] = *byPath[path]
		*byPath[path] = p
	}
	if err := c.Pack(); err != nil {
		for s, p := range saved {
			*s = p
		}
		return err
	}
	return nil
}

// SlotPaths returns the Path of each slot, in order.
func SlotPaths(slots []Slot) []string {
	paths := make([]string, len(slots))
	for i, s := range slots {
		paths[i] = s.Path
	}
	return paths
}
