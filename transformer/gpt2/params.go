package gpt2

import (
	"strconv"

	"github.com/tune-ml/tune/transformer"
)

// projectionSlots returns every projection of the model with its module path, in Hugging Face order: per
// block attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj (transformers' Conv1D modules). ModelCore's
// Projections and ReplaceProjections read it; PEFT's default LoRA target for GPT-2 is c_attn
// (DefaultLoRATargets).
func (m *GPT2LMHeadModel) projectionSlots() []transformer.Slot {
	var s []transformer.Slot
	for i, k := range m.Blocks {
		pre := blockPath(i) + "."
		s = append(s, transformer.Slot{Path: pre + "attn.c_attn", Proj: &k.CAttn}, transformer.Slot{Path: pre + "attn.c_proj", Proj: &k.CProj},
			transformer.Slot{Path: pre + "mlp.c_fc", Proj: &k.CFc}, transformer.Slot{Path: pre + "mlp.c_proj", Proj: &k.MProj})
	}
	return s
}

// DefaultLoRATargets returns PEFT's target_modules for model_type gpt2
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["gpt2"]).
func (m *GPT2LMHeadModel) DefaultLoRATargets() []string { return []string{"c_attn"} }

// FanInFanOut reports that every projection of GPT-2 is a Conv1D in transformers (weight stored (in, out)),
// so a PEFT LoraConfig for it has fan_in_fan_out true. tune keeps (out, in) in memory (see GPT2LMHeadModel),
// so the flag changes only what adapter_config.json says.
func (m *GPT2LMHeadModel) FanInFanOut(path string) bool { return true }

// namedParameters lists every parameter with its full Hugging Face name in GPT2LMHeadModel.named_parameters()
// order; a tied lm_head.weight is the same parameter as transformer.wte.weight and is not listed again.
func (m *GPT2LMHeadModel) namedParameters() []transformer.NamedParameter {
	ps := []transformer.NamedParameter{{Name: "transformer.wte.weight", Param: m.WTE}, {Name: "transformer.wpe.weight", Param: m.WPE}}
	for i, k := range m.Blocks {
		ps = transformer.AppendPrefixed(ps, "transformer.h."+strconv.Itoa(i)+".", k.Parameters())
	}
	ps = transformer.AppendPrefixed(ps, "transformer.ln_f.", m.LnF.Parameters())
	if m.LMHead != nil {
		ps = append(ps, transformer.NamedParameter{Name: "lm_head.weight", Param: m.LMHead})
	}
	return ps
}

// ProjectionPaths returns the module paths of the projections a model of cfg has (projectionSlots' paths, the
// names LoRA's target_modules are matched against), without building it: the slots of a skeleton with
// cfg.NLayer empty blocks, which holds no tensor.
func ProjectionPaths(cfg Config) []string {
	m := &GPT2LMHeadModel{Config: cfg}
	for range max(cfg.NLayer, 0) {
		m.Blocks = append(m.Blocks, &Block{})
	}
	return transformer.SlotPaths(m.projectionSlots())
}
