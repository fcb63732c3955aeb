package gpt2

import (
	"fmt"
	"strconv"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// slot is one projection field of the model with its module path.
type slot struct {
	path string
	slot *transformer.Projection
}

// projectionSlots returns every projection of the model with its module path, in Hugging Face order.
func (m *GPT2LMHeadModel) projectionSlots() []slot {
	var s []slot
	for i, k := range m.Blocks {
		pre := blockPath(i) + "."
		s = append(s, slot{pre + "attn.c_attn", &k.CAttn}, slot{pre + "attn.c_proj", &k.CProj},
			slot{pre + "mlp.c_fc", &k.CFc}, slot{pre + "mlp.c_proj", &k.MProj})
	}
	return s
}

// Projections lists every projection (transformers' Conv1D modules) with its path, in Hugging Face order:
// per block attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj. This is what LoRA's target_modules are matched
// against; PEFT's default for GPT-2 is c_attn (DefaultLoRATargets).
func (m *GPT2LMHeadModel) Projections() []transformer.ModuleProjection {
	slots := m.projectionSlots()
	out := make([]transformer.ModuleProjection, len(slots))
	for i, s := range slots {
		out[i] = transformer.ModuleProjection{Path: s.path, Projection: *s.slot}
	}
	return out
}

// DefaultLoRATargets returns PEFT's target_modules for model_type gpt2
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["gpt2"]).
func (m *GPT2LMHeadModel) DefaultLoRATargets() []string { return []string{"c_attn"} }

// FanInFanOut reports that every projection of GPT-2 is a Conv1D in transformers (weight stored (in, out)),
// so a PEFT LoraConfig for it has fan_in_fan_out true. tune keeps (out, in) in memory (see GPT2LMHeadModel),
// so the flag changes only what adapter_config.json says.
func (m *GPT2LMHeadModel) FanInFanOut(path string) bool { return true }

// ReplaceProjections puts each projection of repl in place of the module at its path (as PEFT swaps a target
// Conv1D for a lora layer) and re-packs the parameters once. A replacement must map the same features (equal
// Base().In and Base().Out). On an error nothing is replaced.
func (m *GPT2LMHeadModel) ReplaceProjections(repl map[string]transformer.Projection) error {
	slots := m.projectionSlots()
	byPath := make(map[string]*transformer.Projection, len(slots))
	paths := make([]string, len(slots))
	for i, s := range slots {
		byPath[s.path] = s.slot
		paths[i] = s.path
	}
	for path, p := range repl {
		sl, ok := byPath[path]
		if !ok {
			return fmt.Errorf("gpt2: no projection module %q (closest: %q; Projections lists them)", path, transformer.ClosestName(path, paths))
		}
		if p == nil || p.Base() == nil {
			return fmt.Errorf("gpt2: replacement for %q is nil", path)
		}
		old, nb := (*sl).Base(), p.Base()
		if old.In != nb.In || old.Out != nb.Out {
			return fmt.Errorf("gpt2: replacement for %q maps %d → %d features, the module maps %d → %d", path, nb.In, nb.Out, old.In, old.Out)
		}
	}
	saved := make(map[*transformer.Projection]transformer.Projection, len(repl))
	for path, p := range repl {
		saved[byPath[path]] = *byPath[path]
		*byPath[path] = p
	}
	if err := m.repack(); err != nil {
		for sl, p := range saved {
			*sl = p
		}
		return err
	}
	return nil
}

// SetTrainable sets every parameter's trainability from its full Hugging Face name and re-packs once;
// gradients restart at zero.
func (m *GPT2LMHeadModel) SetTrainable(keep func(name string) bool) error {
	for _, np := range m.namedParameters() {
		np.Param.Trainable = keep(np.Name)
	}
	return m.repack()
}

// repack lays the parameters out again after a change of modules or trainability; the step arena is carved
// anew at the next Forward.
func (m *GPT2LMHeadModel) repack() error {
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

// namedParameters lists every parameter with its full Hugging Face name in GPT2LMHeadModel.named_parameters()
// order; a tied lm_head.weight is the same parameter as transformer.wte.weight and is not listed again.
func (m *GPT2LMHeadModel) namedParameters() []transformer.NamedParameter {
	ps := []transformer.NamedParameter{{Name: "transformer.wte.weight", Param: m.WTE}, {Name: "transformer.wpe.weight", Param: m.WPE}}
	add := func(prefix string, list []transformer.NamedParameter) {
		for _, np := range list {
			ps = append(ps, transformer.NamedParameter{Name: prefix + np.Name, Param: np.Param})
		}
	}
	for i, k := range m.Blocks {
		add("transformer.h."+strconv.Itoa(i)+".", k.Parameters())
	}
	add("transformer.ln_f.", m.LnF.Parameters())
	if m.LMHead != nil {
		ps = append(ps, transformer.NamedParameter{Name: "lm_head.weight", Param: m.LMHead})
	}
	return ps
}

// NamedParameters lists all parameters in Hugging Face order and naming with Trainer's weight-decay flags.
// The Conv1D weights are (out, in) here (see GPT2LMHeadModel).
func (m *GPT2LMHeadModel) NamedParameters() []transformer.NamedParam {
	list := m.namedParameters()
	out := make([]transformer.NamedParam, len(list))
	for i, np := range list {
		out[i] = transformer.NamedParam{Name: np.Name, Value: np.Param.Value, Grad: np.Param.Grad,
			Trainable: np.Param.Grad != nil, Decay: transformer.DecayApplies(np.Name)}
	}
	return out
}

// Parameter returns the parameter with the given full name.
func (m *GPT2LMHeadModel) Parameter(name string) (*transformer.Param, bool) {
	for _, np := range m.namedParameters() {
		if np.Name == name {
			return np.Param, true
		}
	}
	return nil, false
}

// Trainable returns the flat FP32 buffers of every trainable parameter and its gradient and their segments
// with weight-decay flags; all nil when nothing is trainable.
func (m *GPT2LMHeadModel) Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment) {
	return m.groups.Train, m.groups.Grads, append([]tensor.Segment(nil), m.groups.Segs...)
}

// ZeroGrad sets every trainable gradient to 0.
func (m *GPT2LMHeadModel) ZeroGrad() error {
	if m.groups.Grads == nil {
		return nil
	}
	return m.b.Fill(m.groups.Grads, 0)
}

// WeightsUpdated invalidates the weight-cast cache after the master weights changed.
func (m *GPT2LMHeadModel) WeightsUpdated() {
	if m.cache != nil {
		m.cache.Invalidate()
	}
}
