package bert

import (
	"fmt"
	"strconv"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// projectionSlots returns every projection field of the model with its module path, in Hugging Face order.
func (m *BertForSequenceClassification) projectionSlots() []struct {
	path string
	slot *transformer.Projection
} {
	type slot = struct {
		path string
		slot *transformer.Projection
	}
	var s []slot
	for i, l := range m.Layers {
		pre := "bert.encoder.layer." + strconv.Itoa(i) + "."
		s = append(s,
			slot{pre + "attention.self.query", &l.Attention.Query},
			slot{pre + "attention.self.key", &l.Attention.Key},
			slot{pre + "attention.self.value", &l.Attention.Value},
			slot{pre + "attention.output.dense", &l.AttnOut},
			slot{pre + "intermediate.dense", &l.Intermediate},
			slot{pre + "output.dense", &l.Output},
		)
	}
	return append(s, slot{"bert.pooler.dense", &m.Pooler.Dense}, slot{"classifier", &m.Head.Classifier})
}

// Projections lists every projection module with its path, in Hugging Face order: per layer query, key, value,
// attention.output.dense, intermediate.dense, output.dense; then bert.pooler.dense and classifier. This is what
// LoRA's target_modules are matched against.
func (m *BertForSequenceClassification) Projections() []transformer.ModuleProjection {
	slots := m.projectionSlots()
	out := make([]transformer.ModuleProjection, len(slots))
	for i, s := range slots {
		out[i] = transformer.ModuleProjection{Path: s.path, Projection: *s.slot}
	}
	return out
}

// ReplaceProjections puts each projection of repl in place of the module at its path (as PEFT swaps a
// target nn.Linear for a lora.Linear) and re-packs the parameters once. A replacement must compute the same
// shape as the module it replaces (equal Base().In and Base().Out). The model takes ownership of the
// replacement's parameter tensors: their values move into the model's flat buffers, the tensors a replacement
// allocated itself are freed, and every Param's Value is updated in place. Gradients restart at zero. On an
// error nothing is replaced.
func (m *BertForSequenceClassification) ReplaceProjections(repl map[string]transformer.Projection) error {
	slots := m.projectionSlots()
	byPath := make(map[string]*transformer.Projection, len(slots))
	paths := make([]string, len(slots))
	for i, s := range slots {
		byPath[s.path] = s.slot
		paths[i] = s.path
	}
	for path, p := range repl {
		slot, ok := byPath[path]
		if !ok {
			return fmt.Errorf("transformer: no projection module %q (closest: %q; Projections lists them)", path, transformer.ClosestName(path, paths))
		}
		if p == nil || p.Base() == nil {
			return fmt.Errorf("transformer: replacement for %q is nil", path)
		}
		old, nb := (*slot).Base(), p.Base()
		if old.In != nb.In || old.Out != nb.Out {
			return fmt.Errorf("transformer: replacement for %q maps %d → %d features, the module maps %d → %d",
				path, nb.In, nb.Out, old.In, old.Out)
		}
	}
	saved := make(map[*transformer.Projection]transformer.Projection, len(repl))
	for path, p := range repl {
		saved[byPath[path]] = *byPath[path]
		*byPath[path] = p
	}
	if err := m.repack(); err != nil {
		for slot, p := range saved {
			*slot = p
		}
		return err
	}
	return nil
}

// SetTrainable sets every parameter's trainability from its full Hugging Face name (keep returns true to train
// it) and re-packs the parameters once; gradients restart at zero. SetTrainable(func(string) bool { return
// false }) freezes the whole model, as PEFT does before adding adapters.
func (m *BertForSequenceClassification) SetTrainable(keep func(name string) bool) error {
	for _, np := range m.namedParameters() {
		np.Param.Trainable = keep(np.Name)
	}
	return m.repack()
}

// repack lays the parameters out again after a change of modules or trainability. The step arena is carved
// anew at the next Forward, so that a replacement projection takes its own pass buffers (Projection.Layout).
func (m *BertForSequenceClassification) repack() error {
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

// namedParameters lists every parameter with its full Hugging Face name, in transformers' named_parameters()
// order (FACTS §4.2).
func (m *BertForSequenceClassification) namedParameters() []transformer.NamedParameter {
	var ps []transformer.NamedParameter
	add := func(prefix string, list []transformer.NamedParameter) {
		for _, np := range list {
			ps = append(ps, transformer.NamedParameter{Name: prefix + np.Name, Param: np.Param})
		}
	}
	add("bert.embeddings.", m.Embeddings.Parameters())
	for i, l := range m.Layers {
		add("bert.encoder.layer."+strconv.Itoa(i)+".", l.Parameters())
	}
	add("bert.pooler.dense.", m.Pooler.Dense.Parameters())
	add("classifier.", m.Head.Classifier.Parameters())
	return ps
}

// NamedParameters lists all parameters in Hugging Face order and naming, with their weight-decay flags as HF's
// Trainer sets them (DecayApplies).
func (m *BertForSequenceClassification) NamedParameters() []transformer.NamedParam {
	list := m.namedParameters()
	out := make([]transformer.NamedParam, len(list))
	for i, np := range list {
		out[i] = transformer.NamedParam{
			Name: np.Name, Value: np.Param.Value, Grad: np.Param.Grad,
			Trainable: np.Param.Grad != nil, Decay: transformer.DecayApplies(np.Name),
		}
	}
	return out
}

// Parameter returns the parameter with the given full name.
func (m *BertForSequenceClassification) Parameter(name string) (*transformer.Param, bool) {
	for _, np := range m.namedParameters() {
		if np.Name == name {
			return np.Param, true
		}
	}
	return nil, false
}

// Trainable returns the flat FP32 buffers of every trainable parameter and its gradient (equal length, in
// NamedParameters order) and their segments with weight-decay flags. All three are nil when nothing is
// trainable.
func (m *BertForSequenceClassification) Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment) {
	return m.groups.Train, m.groups.Grads, append([]tensor.Segment(nil), m.groups.Segs...)
}

// ZeroGrad sets every trainable gradient to 0 (one fill of the flat gradient buffer).
func (m *BertForSequenceClassification) ZeroGrad() error {
	if m.groups.Grads == nil {
		return nil
	}
	return m.b.Fill(m.groups.Grads, 0)
}

// WeightsUpdated invalidates the weight-cast cache after the optimizer (or a load) changed the master weights.
func (m *BertForSequenceClassification) WeightsUpdated() {
	if m.cache != nil {
		m.cache.Invalidate()
	}
}
