package llama

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// namedParameters lists every parameter with its full Hugging Face name in transformers' named_parameters()
// order: model.embed_tokens, model.layers.i.…, model.norm, then lm_head.weight unless it is tied (a tied weight
// is listed once, under the embedding's name, as named_parameters() and save_pretrained list it). This list is
// the one source of the model's names: loading, saving, LoRA and the optimizer all read it.
func (m *ForCausalLM) namedParameters() []transformer.NamedParameter {
	ps := []transformer.NamedParameter{{Name: "model.embed_tokens.weight", Param: m.Embed}}
	for i, l := range m.Layers {
		pre := layerPath(i) + "."
		for _, np := range l.Parameters() {
			ps = append(ps, transformer.NamedParameter{Name: pre + np.Name, Param: np.Param})
		}
	}
	ps = append(ps, transformer.NamedParameter{Name: "model.norm.weight", Param: m.Norm.Weight})
	if !m.Config.TieWordEmbeddings {
		ps = append(ps, transformer.NamedParameter{Name: "lm_head.weight", Param: m.LMHead.Weight})
	}
	return ps
}

// NamedParameters lists all parameters in Hugging Face order and naming, with HF Trainer's weight-decay flags.
func (m *ForCausalLM) NamedParameters() []transformer.NamedParam {
	list := m.namedParameters()
	out := make([]transformer.NamedParam, len(list))
	for i, np := range list {
		out[i] = transformer.NamedParam{Name: np.Name, Value: np.Param.Value, Grad: np.Param.Grad,
			Trainable: np.Param.Grad != nil, Decay: transformer.DecayApplies(np.Name)}
	}
	return out
}

// Parameter returns the parameter with the given full name.
func (m *ForCausalLM) Parameter(name string) (*transformer.Param, bool) {
	for _, np := range m.namedParameters() {
		if np.Name == name {
			return np.Param, true
		}
	}
	return nil, false
}

type slot struct {
	path string
	slot *transformer.Projection
}

// projectionSlots returns every adaptable projection with its module path, in model order. The LM head is not
// among them: it runs chunk by chunk (its Forward is called again in Backward), which a LoRA wrapper's
// per-pass state does not allow.
func (m *ForCausalLM) projectionSlots() []slot {
	var s []slot
	for i, l := range m.Layers {
		pre := layerPath(i) + "."
		s = append(s,
			slot{pre + "self_attn.q_proj", &l.Attn.Q}, slot{pre + "self_attn.k_proj", &l.Attn.K},
			slot{pre + "self_attn.v_proj", &l.Attn.V}, slot{pre + "self_attn.o_proj", &l.Attn.O},
			slot{pre + "mlp.gate_proj", &l.MLP.Gate}, slot{pre + "mlp.up_proj", &l.MLP.Up},
			slot{pre + "mlp.down_proj", &l.MLP.Down},
		)
	}
	return s
}

// Projections lists every projection of the decoder layers with its module path ("model.layers.0.self_attn.
// q_proj"): what LoRA's target_modules are matched against. lm_head is not adaptable (see projectionSlots).
func (m *ForCausalLM) Projections() []transformer.ModuleProjection {
	slots := m.projectionSlots()
	out := make([]transformer.ModuleProjection, len(slots))
	for i, s := range slots {
		out[i] = transformer.ModuleProjection{Path: s.path, Projection: *s.slot}
	}
	return out
}

// ReplaceProjections puts each projection of repl in place of the module at its path and re-packs the
// parameters once (the model takes ownership of the replacements' tensors). On an error nothing is replaced.
func (m *ForCausalLM) ReplaceProjections(repl map[string]transformer.Projection) error {
	slots := m.projectionSlots()
	byPath := make(map[string]*transformer.Projection, len(slots))
	paths := make([]string, len(slots))
	for i, s := range slots {
		byPath[s.path], paths[i] = s.slot, s.path
	}
	for path, p := range repl {
		slot, ok := byPath[path]
		if !ok {
			hint := "Projections lists them"
			if path == "lm_head" {
				hint = "lm_head is not adaptable in tune"
			}
			return fmt.Errorf("llama: no projection module %q (closest: %q; %s)", path, transformer.ClosestName(path, paths), hint)
		}
		if p == nil || p.Base() == nil {
			return fmt.Errorf("llama: replacement for %q is nil", path)
		}
		old, nb := (*slot).Base(), p.Base()
		if old.In != nb.In || old.Out != nb.Out {
			return fmt.Errorf("llama: replacement for %q maps %d → %d features, the module maps %d → %d", path, nb.In, nb.Out, old.In, old.Out)
		}
	}
	saved := make(map[*transformer.Projection]transformer.Projection, len(repl))
	for path, p := range repl {
		saved[byPath[path]] = *byPath[path]
		*byPath[path] = p
	}
	if err := m.repack(); err != nil {
		for s, p := range saved {
			*s = p
		}
		return err
	}
	return nil
}

// SetTrainable sets every parameter's trainability from its full name and re-packs once.
func (m *ForCausalLM) SetTrainable(keep func(name string) bool) error {
	for _, np := range m.namedParameters() {
		np.Param.Trainable = keep(np.Name)
	}
	return m.repack()
}

func (m *ForCausalLM) repack() error {
	m.last.ready = false
	m.shape = carveKey{}
	if err := m.groups.Pack(m.namedParameters()); err != nil {
		return err
	}
	if m.cache != nil {
		m.cache.Invalidate()
	}
	return nil
}

// Trainable returns the flat FP32 trainable parameter and gradient buffers and their segments.
func (m *ForCausalLM) Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment) {
	return m.groups.Train, m.groups.Grads, append([]tensor.Segment(nil), m.groups.Segs...)
}

// ZeroGrad sets every trainable gradient to 0.
func (m *ForCausalLM) ZeroGrad() error {
	if m.groups.Grads == nil {
		return nil
	}
	return m.b.Fill(m.groups.Grads, 0)
}

// WeightsUpdated invalidates the weight-cast cache after the master weights changed.
func (m *ForCausalLM) WeightsUpdated() {
	if m.cache != nil {
		m.cache.Invalidate()
	}
}

// InitWeights re-initialises every parameter as New describes, each from its own stream (seed, index).
func (m *ForCausalLM) InitWeights(seed uint64) error {
	for i, np := range m.namedParameters() {
		if err := m.initParam(np, seed, uint64(i)); err != nil {
			return err
		}
	}
	m.WeightsUpdated()
	return nil
}

func (m *ForCausalLM) initParam(np transformer.NamedParameter, seed, index uint64) error {
	v, name := np.Param.Value, np.Name
	switch {
	case strings.HasSuffix(name, "norm.weight"):
		return m.b.Fill(v, 1)
	case strings.HasSuffix(name, "bias") || len(v.Shape) != 2:
		return m.b.Fill(v, 0)
	}
	rng := rand.New(rand.NewPCG(seed, index))
	host := make([]float32, v.Numel())
	for i := range host {
		host[i] = float32(rng.NormFloat64() * m.Config.InitializerRange)
	}
	if name == "model.embed_tokens.weight" && m.Config.PadTokenID >= 0 {
		c := v.Shape[1]
		clear(host[m.Config.PadTokenID*c : (m.Config.PadTokenID+1)*c])
	}
	if err := m.b.Upload(v, host); err != nil {
		return fmt.Errorf("llama: initialising %s: %w", name, err)
	}
	return nil
}
