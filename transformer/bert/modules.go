package bert

import (
	"strconv"

	"github.com/tune-ml/tune/transformer"
)

// projectionSlots returns every projection field of the model with its module path, in Hugging Face order:
// per layer query, key, value, attention.output.dense, intermediate.dense, output.dense; then bert.pooler.dense
// and classifier. This is what LoRA's target_modules are matched against (ModelCore.Projections).
func (m *BertForSequenceClassification) projectionSlots() []transformer.Slot {
	var s []transformer.Slot
	for i, l := range m.Layers {
		pre := "bert.encoder.layer." + strconv.Itoa(i) + "."
		s = append(s,
			transformer.Slot{Path: pre + "attention.self.query", Proj: &l.Attention.Query},
			transformer.Slot{Path: pre + "attention.self.key", Proj: &l.Attention.Key},
			transformer.Slot{Path: pre + "attention.self.value", Proj: &l.Attention.Value},
			transformer.Slot{Path: pre + "attention.output.dense", Proj: &l.AttnOut},
			transformer.Slot{Path: pre + "intermediate.dense", Proj: &l.Intermediate},
			transformer.Slot{Path: pre + "output.dense", Proj: &l.Output},
		)
	}
	return append(s, transformer.Slot{Path: "bert.pooler.dense", Proj: &m.Pooler.Dense},
		transformer.Slot{Path: "classifier", Proj: &m.Head.Classifier})
}

// qkvStacks returns each layer's query, key and value, the projections its attention runs as one packed
// LinearStack: their weights (and biases) are laid out next to each other (ModelCore.SetStacks).
func (m *BertForSequenceClassification) qkvStacks() [][]transformer.Projection {
	s := make([][]transformer.Projection, len(m.Layers))
	for i, l := range m.Layers {
		s[i] = []transformer.Projection{l.Attention.Query, l.Attention.Key, l.Attention.Value}
	}
	return s
}

// namedParameters lists every parameter with its full Hugging Face name, in transformers' named_parameters()
// order (transformers/models/bert/modeling_bert.py).
func (m *BertForSequenceClassification) namedParameters() []transformer.NamedParameter {
	var ps []transformer.NamedParameter
	ps = transformer.AppendPrefixed(ps, "bert.embeddings.", m.Embeddings.Parameters())
	for i, l := range m.Layers {
		ps = transformer.AppendPrefixed(ps, "bert.encoder.layer."+strconv.Itoa(i)+".", l.Parameters())
	}
	ps = transformer.AppendPrefixed(ps, "bert.pooler.dense.", m.Pooler.Dense.Parameters())
	ps = transformer.AppendPrefixed(ps, "classifier.", m.Head.Classifier.Parameters())
	return ps
}

// ProjectionPaths returns the module paths of the projections a model of cfg has (projectionSlots' paths, the
// names LoRA's target_modules are matched against), without building it: the slots of a skeleton with
// cfg.NumHiddenLayers empty layers, which holds no tensor.
func ProjectionPaths(cfg BertConfig) []string {
	m := &BertForSequenceClassification{Pooler: &Pooler{}, Head: &ClassificationHead{}}
	for range max(cfg.NumHiddenLayers, 0) {
		m.Layers = append(m.Layers, &transformer.Layer{})
	}
	return transformer.SlotPaths(m.projectionSlots())
}
