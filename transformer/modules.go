package transformer

import (
	"fmt"
	"strconv"

	"github.com/tune-ml/tune/tensor"
)

// ModuleProjection is a projection with its module path as transformers names the module
// ("bert.encoder.layer.0.attention.self.query", "bert.pooler.dense", "classifier").
type ModuleProjection struct {
	Path       string     // the module path, without ".weight"
	Projection Projection // the module now in that slot: a *Linear, or what ReplaceProjections put there
}

// projectionSlots returns every projection field of the model with its module path, in Hugging Face order.
func (m *BertForSequenceClassification) projectionSlots() []struct {
	path string
	slot *Projection
} {
	type slot = struct {
		path string
		slot *Projection
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
func (m *BertForSequenceClassification) Projections() []ModuleProjection {
	slots := m.projectionSlots()
	out := make([]ModuleProjection, len(slots))
	for i, s := range slots {
		out[i] = ModuleProjection{Path: s.path, Projection: *s.slot}
	}
	return out
}

// ReplaceProjections puts each projection of repl in place of the module at its path (as PEFT swaps a
// target nn.Linear for a lora.Linear) and re-packs the parameters once. A replacement must compute the same
// shape as the module it replaces (equal Base().In and Base().Out). The model takes ownership of the
// replacement's parameter tensors: their values move into the model's flat buffers, the tensors a replacement
// allocated itself are freed, and every Param's Value is updated in place. Gradients restart at zero. On an
// error nothing is replaced.
func (m *BertForSequenceClassification) ReplaceProjections(repl map[string]Projection) error {
	slots := m.projectionSlots()
	byPath := make(map[string]*Projection, len(slots))
	paths := make([]string, len(slots))
	for i, s := range slots {
		byPath[s.path] = s.slot
		paths[i] = s.path
	}
	for path, p := range repl {
		slot, ok := byPath[path]
		if !ok {
			return fmt.Errorf("transformer: no projection module %q (closest: %q; Projections lists them)", path, closestName(path, paths))
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
	saved := make(map[*Projection]Projection, len(repl))
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
	if err := m.groups.pack(m.namedParameters()); err != nil {
		return err
	}
	if m.cache != nil {
		m.cache.Invalidate()
	}
	return nil
}

// namedParameters lists every parameter with its full Hugging Face name, in transformers' named_parameters()
// order (FACTS §4.2).
func (m *BertForSequenceClassification) namedParameters() []NamedParameter {
	var ps []NamedParameter
	add := func(prefix string, list []NamedParameter) {
		for _, np := range list {
			ps = append(ps, NamedParameter{Name: prefix + np.Name, Param: np.Param})
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
func (m *BertForSequenceClassification) NamedParameters() []NamedParam {
	list := m.namedParameters()
	out := make([]NamedParam, len(list))
	for i, np := range list {
		out[i] = NamedParam{
			Name: np.Name, Value: np.Param.Value, Grad: np.Param.Grad,
			Trainable: np.Param.Grad != nil, Decay: DecayApplies(np.Name),
		}
	}
	return out
}

// Parameter returns the parameter with the given full name.
func (m *BertForSequenceClassification) Parameter(name string) (*Param, bool) {
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
	return m.groups.train, m.groups.grads, append([]tensor.Segment(nil), m.groups.segs...)
}

// ZeroGrad sets every trainable gradient to 0 (one fill of the flat gradient buffer).
func (m *BertForSequenceClassification) ZeroGrad() error {
	if m.groups.grads == nil {
		return nil
	}
	return m.b.Fill(m.groups.grads, 0)
}

// WeightsUpdated invalidates the weight-cast cache after the optimizer (or a load) changed the master weights.
func (m *BertForSequenceClassification) WeightsUpdated() {
	if m.cache != nil {
		m.cache.Invalidate()
	}
}

// closestName returns the name in names sharing the longest prefix with want, and among those the one sharing
// the longest suffix (so "layer.9...value" suggests a value projection), for error messages.
func closestName(want string, names []string) string {
	common := func(a, b string, fromEnd bool) int {
		k := 0
		for k < len(a) && k < len(b) {
			i, j := k, k
			if fromEnd {
				i, j = len(a)-1-k, len(b)-1-k
			}
			if a[i] != b[j] {
				break
			}
			k++
		}
		return k
	}
	best, bestPre, bestSuf := "", -1, -1
	for _, n := range names {
		pre, suf := common(want, n, false), common(want, n, true)
		if pre > bestPre || (pre == bestPre && suf > bestSuf) {
			best, bestPre, bestSuf = n, pre, suf
		}
	}
	return best
}
