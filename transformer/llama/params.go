package llama

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/transformer"
)

// namedParameters lists every parameter with its full Hugging Face name in transformers' named_parameters()
// order: model.embed_tokens, model.layers.i.…, model.norm, then lm_head.weight unless it is tied (a tied weight
// is listed once, under the embedding's name, as named_parameters() and save_pretrained list it). This list is
// the one source of the model's names: loading, saving, LoRA and the optimizer all read it.
func (m *ForCausalLM) namedParameters() []transformer.NamedParameter {
	ps := []transformer.NamedParameter{{Name: "model.embed_tokens.weight", Param: m.Embed}}
	for i, l := range m.Layers {
		ps = transformer.AppendPrefixed(ps, layerPath(i)+".", l.Parameters())
	}
	ps = append(ps, transformer.NamedParameter{Name: "model.norm.weight", Param: m.Norm.Weight})
	if !m.Config.TieWordEmbeddings {
		ps = append(ps, transformer.NamedParameter{Name: "lm_head.weight", Param: m.Head.Weight})
	}
	return ps
}

// projectionSlots returns every adaptable projection with its module path, in model order. The LM head is not
// among them: it runs chunk by chunk (its Forward is called again in Backward), which a LoRA wrapper's
// per-pass state does not allow. ModelCore's Projections and ReplaceProjections read this list.
func (m *ForCausalLM) projectionSlots() []transformer.Slot {
	var s []transformer.Slot
	for i, l := range m.Layers {
		pre := layerPath(i) + "."
		s = append(s,
			transformer.Slot{Path: pre + "self_attn.q_proj", Proj: &l.Attn.Q}, transformer.Slot{Path: pre + "self_attn.k_proj", Proj: &l.Attn.K},
			transformer.Slot{Path: pre + "self_attn.v_proj", Proj: &l.Attn.V}, transformer.Slot{Path: pre + "self_attn.o_proj", Proj: &l.Attn.O},
			transformer.Slot{Path: pre + "mlp.gate_proj", Proj: &l.MLP.Gate}, transformer.Slot{Path: pre + "mlp.up_proj", Proj: &l.MLP.Up},
			transformer.Slot{Path: pre + "mlp.down_proj", Proj: &l.MLP.Down},
		)
	}
	return s
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
		return m.Backend().Fill(v, 1)
	case strings.HasSuffix(name, "bias") || len(v.Shape) != 2:
		return m.Backend().Fill(v, 0)
	}
	pad := -1
	if name == "model.embed_tokens.weight" {
		pad = m.Config.PadTokenID
	}
	if err := transformer.InitNormal(m.Backend(), v, m.Config.InitializerRange, seed, index, pad); err != nil {
		return fmt.Errorf("llama: initialising %s: %w", name, err)
	}
	return nil
}

// ProjectionPaths returns the module paths of the projections a model of cfg has (projectionSlots' paths, the
// names LoRA's target_modules are matched against), without building it: the slots of a skeleton with
// cfg.NumHiddenLayers empty layers, which holds no tensor.
func ProjectionPaths(cfg Config) []string {
	m := &ForCausalLM{Config: cfg}
	for range max(cfg.NumHiddenLayers, 0) {
		m.Layers = append(m.Layers, &DecoderLayer{})
	}
	return transformer.SlotPaths(m.projectionSlots())
}
