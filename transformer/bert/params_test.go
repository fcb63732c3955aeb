package bert

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestNamedParametersMatchTransformers checks names, order, shapes and weight-decay flags against transformers/models/bert/modeling_bert.py; get_decay_parameter_names in transformers' trainer.py for a 2-layer model: 5 + 16·2 + 2 BERT tensors plus the classifier's 2.
func TestNamedParametersMatchTransformers(t *testing.T) {
	cfg := tinyConfig()
	m := newTestModel(t, cpuBackend(), cfg, 1)
	ps := m.NamedParameters()
	if len(ps) != 5+16*2+2+2 {
		t.Fatalf("%d parameters, want 41", len(ps))
	}
	c, inter, l := cfg.HiddenSize, cfg.IntermediateSize, cfg.NumLabels()
	want := []struct {
		name  string
		shape []int
		decay bool
	}{
		{"bert.embeddings.word_embeddings.weight", []int{cfg.VocabSize, c}, true},
		{"bert.embeddings.position_embeddings.weight", []int{cfg.MaxPositionEmbeddings, c}, true},
		{"bert.embeddings.token_type_embeddings.weight", []int{2, c}, true},
		{"bert.embeddings.LayerNorm.weight", []int{c}, false},
		{"bert.embeddings.LayerNorm.bias", []int{c}, false},
		{"bert.encoder.layer.0.attention.self.query.weight", []int{c, c}, true},
		{"bert.encoder.layer.0.attention.self.query.bias", []int{c}, false},
		{"bert.encoder.layer.0.attention.self.key.weight", []int{c, c}, true},
		{"bert.encoder.layer.0.attention.self.key.bias", []int{c}, false},
		{"bert.encoder.layer.0.attention.self.value.weight", []int{c, c}, true},
		{"bert.encoder.layer.0.attention.self.value.bias", []int{c}, false},
		{"bert.encoder.layer.0.attention.output.dense.weight", []int{c, c}, true},
		{"bert.encoder.layer.0.attention.output.dense.bias", []int{c}, false},
		{"bert.encoder.layer.0.attention.output.LayerNorm.weight", []int{c}, false},
		{"bert.encoder.layer.0.attention.output.LayerNorm.bias", []int{c}, false},
		{"bert.encoder.layer.0.intermediate.dense.weight", []int{inter, c}, true},
		{"bert.encoder.layer.0.intermediate.dense.bias", []int{inter}, false},
		{"bert.encoder.layer.0.output.dense.weight", []int{c, inter}, true},
		{"bert.encoder.layer.0.output.dense.bias", []int{c}, false},
		{"bert.encoder.layer.0.output.LayerNorm.weight", []int{c}, false},
		{"bert.encoder.layer.0.output.LayerNorm.bias", []int{c}, false},
	}
	for i, w := range want {
		p := ps[i]
		if p.Name != w.name || !p.Value.Shape.Equal(w.shape) || p.Decay != w.decay || !p.Trainable || p.Grad == nil {
			t.Errorf("parameter %d = %s %v decay=%v trainable=%v; want %s %v decay=%v trainable", i, p.Name,
				p.Value.Shape, p.Decay, p.Trainable, w.name, w.shape, w.decay)
		}
	}
	tail := []string{"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"}
	for i, name := range tail {
		if got := ps[len(ps)-4+i].Name; got != name {
			t.Errorf("parameter %d = %s, want %s", len(ps)-4+i, got, name)
		}
	}
	if got := ps[len(ps)-2].Value.Shape; !got.Equal(tensor.Shape{l, c}) {
		t.Errorf("classifier.weight shape %v, want [%d %d]", got, l, c)
	}
}

// TestTrainableSegments checks that Trainable's flat buffers hold exactly the trainable parameters, in
// NamedParameters order except that each layer's query, key and value weights lie together, then their biases
// (the packed LinearStack reads them as one matrix and one vector), with contiguous decay/no-decay segments
// that cover them; and that the stacks are joined.
func TestTrainableSegments(t *testing.T) {
	m := newTestModel(t, cpuBackend(), tinyConfig(), 1)
	params, grads, segs := m.Trainable()
	qkv := regexp.MustCompile(`^(.*attention\.self\.)(query|key|value)\.(weight|bias)$`)
	var order []transformer.NamedParam
	byName := map[string]transformer.NamedParam{}
	for _, p := range m.NamedParameters() {
		byName[p.Name] = p
	}
	for _, p := range m.NamedParameters() {
		sm := qkv.FindStringSubmatch(p.Name)
		switch {
		case sm == nil:
			order = append(order, p)
		case sm[2] == "query" && sm[3] == "weight":
			for _, kind := range []string{"weight", "bias"} {
				for _, proj := range []string{"query", "key", "value"} {
					order = append(order, byName[sm[1]+proj+"."+kind])
				}
			}
		}
	}
	if len(order) != len(m.NamedParameters()) {
		t.Fatalf("pack order lists %d of %d parameters", len(order), len(m.NamedParameters()))
	}
	total := 0
	for _, p := range order {
		if p.Value.Buf != params.Buf || p.Grad.Buf != grads.Buf || p.Value.Offset-params.Offset != total {
			t.Fatalf("%s is not at offset %d of the flat buffers", p.Name, total)
		}
		total += p.Value.Numel()
	}
	b := testBatch(1, 4, m.Config.VocabSize, m.Config.NumLabels(), []int{4})
	transformertest.Step(t, m, b, 1)
	for i, l := range m.Layers {
		if st := l.Attention.Stack(); st == nil || !st.Joined() {
			t.Errorf("layer %d: query/key/value are not one joined LinearStack (%v)", i, st)
		}
	}
	if params.Numel() != total || grads.Numel() != total {
		t.Fatalf("flat buffers hold %d/%d elements, parameters %d", params.Numel(), grads.Numel(), total)
	}
	next := 0
	for i, s := range segs {
		if s.Offset != next || (i > 0 && segs[i-1].Decay == s.Decay) {
			t.Fatalf("segment %d %+v does not follow %d or repeats the previous flag", i, s, next)
		}
		next += s.Len
	}
	if next != total {
		t.Fatalf("segments cover %d of %d elements", next, total)
	}
}

// TestFrozenParametersGetNoGradient freezes everything but the classifier and the last layer's value projection:
// frozen parameters have no gradient, the others get exactly the gradient the fully trainable model computes.
func TestFrozenParametersGetNoGradient(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	batch := testBatch(2, 6, cfg.VocabSize, cfg.NumLabels(), []int{6, 4})
	full := newTestModel(t, b, cfg, 2)
	transformertest.Step(t, full, batch, 3)
	m := newTestModel(t, b, cfg, 2)
	keep := func(name string) bool {
		return strings.HasPrefix(name, "classifier.") || strings.Contains(name, "layer.1.attention.self.value.")
	}
	if err := m.SetTrainable(keep); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []amp.Policy{amp.FP32, amp.BF16} {
		t.Run(policy.String(), func(t *testing.T) {
			m.SetPolicy(policy)
			full.SetPolicy(policy)
			transformertest.Step(t, full, batch, 3)
			transformertest.Step(t, m, batch, 3)
			params, _, _ := m.Trainable()
			fullParams := full.namedParameters()
			n := 0
			for i, np := range m.namedParameters() {
				switch {
				case keep(np.Name) != (np.Param.Grad != nil):
					t.Errorf("%s: trainable=%v but has gradient=%v", np.Name, keep(np.Name), np.Param.Grad != nil)
				case np.Param.Grad != nil:
					n += np.Param.Value.Numel()
					got, want := tensortest.Download(t, b, np.Param.Grad), tensortest.Download(t, b, fullParams[i].Param.Grad)
					if e, j := tensortest.RelErr(got, want); e != 0 {
						t.Errorf("%s: gradient differs from the unfrozen model's (error %g at %d)", np.Name, e, j)
					}
				}
			}
			if params.Numel() != n {
				t.Errorf("trainable buffer holds %d elements, trainable parameters %d", params.Numel(), n)
			}
		})
	}
}

// countingBackend counts Alloc calls (every other op goes to the wrapped backend).
type countingBackend struct {
	tensor.Backend
	allocs int
}

func (c *countingBackend) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	c.allocs++
	return c.Backend.Alloc(dt, shape...)
}

// TestSteadyStateAllocatesNothing: after the first step at the largest shape (which carves the arena and, under
// autocast, fills the weight cache), further steps — at the same or a smaller shape, with weights updated in
// between — allocate nothing on the backend.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	for _, policy := range []amp.Policy{amp.FP32, amp.BF16} {
		t.Run(policy.String(), func(t *testing.T) {
			b := &countingBackend{Backend: cpuBackend()}
			cfg := tinyConfig()
			cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.1
			m := newTestModel(t, b, cfg, 4)
			m.SetPolicy(policy)
			big := testBatch(3, 8, cfg.VocabSize, 3, []int{8, 6, 3})
			small := testBatch(2, 5, cfg.VocabSize, 3, []int{5, 2})
			transformertest.Step(t, m, big, 1)
			before := b.allocs
			for i, batch := range []*struct {
				name string
				b    int
			}{{"same shape", 0}, {"smaller shape", 1}, {"back to the larger shape", 0}} {
				bt := big
				if batch.b == 1 {
					bt = small
				}
				transformertest.Step(t, m, bt, uint64(i))
				m.WeightsUpdated()
				if b.allocs != before {
					t.Fatalf("%s: %d allocations in a steady-state step", batch.name, b.allocs-before)
				}
			}
			t.Logf("arena %d bytes", m.Arena().Bytes())
		})
	}
}

// scaledProjection is a test Projection wrapping a Linear: out = s·(x·Wᵀ + b), with an extra trainable
// parameter of its own (never used numerically) to check re-packing and naming, and a per-pass scratch buffer
// from the arena for its scaled output gradient (dOut is read-only).
type scaledProjection struct {
	base    *transformer.Linear
	s       float32
	extra   *transformer.Param
	scratch *tensor.Tensor // (N, Out) h
}

func (p *scaledProjection) Forward(ps *transformer.Pass, out, in *tensor.Tensor) error {
	if err := p.base.Forward(ps, out, in); err != nil {
		return err
	}
	return ps.Backend.Scale(out, p.s)
}

func (p *scaledProjection) Backward(ps *transformer.Pass, dIn, dOut, in *tensor.Tensor, acc bool) error {
	d, err := p.scratch.Reshape(dOut.Shape...)
	if err != nil {
		return err
	}
	if err := ps.Backend.Copy(d, dOut); err != nil {
		return err
	}
	if err := ps.Backend.Scale(d, p.s); err != nil {
		return err
	}
	return p.base.Backward(ps, dIn, d, in, acc)
}

func (p *scaledProjection) Layout(a *transformer.Arena, rows int, dt tensor.DType) {
	p.scratch = a.Take(dt, rows, p.base.Out)
}
func (p *scaledProjection) Base() *transformer.Linear { return p.base }
func (p *scaledProjection) Parameters() []transformer.NamedParameter {
	ps := []transformer.NamedParameter{}
	for _, np := range p.base.Parameters() {
		ps = append(ps, transformer.NamedParameter{Name: "base_layer." + np.Name, Param: np.Param})
	}
	return append(ps, transformer.NamedParameter{Name: "extra.weight", Param: p.extra})
}

// TestReplaceProjections replaces a value projection by a wrapper from outside the package (as LoRA does):
// names follow the wrapper, its new parameter is packed into the trainable buffer, the frozen base gets no
// gradient, and the forward changes exactly as the wrapper says (a scale of 1 keeps the logits bit for bit).
func TestReplaceProjections(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	batch := testBatch(2, 6, cfg.VocabSize, 3, []int{6, 4})
	m := newTestModel(t, b, cfg, 6)
	before := transformertest.Step(t, m, batch, 1)
	const path = "bert.encoder.layer.1.attention.self.value"
	var base *transformer.Linear
	for _, mp := range m.Projections() {
		if mp.Path == path {
			base = mp.Projection.Base()
		}
	}
	if base == nil {
		t.Fatalf("no projection %s in %v", path, m.Projections())
	}
	extra, err := b.Alloc(tensor.F32, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	base.Weight.Trainable, base.Bias.Trainable = false, false
	wrapper := &scaledProjection{base: base, s: 1, extra: &transformer.Param{Value: extra, Trainable: true}}
	if err := m.ReplaceProjections(map[string]transformer.Projection{path: wrapper}); err != nil {
		t.Fatal(err)
	}
	after := transformertest.Step(t, m, batch, 1)
	if e, _ := tensortest.RelErr(after.Logits, before.Logits); e != 0 {
		t.Errorf("identity wrapper changed the logits (error %g)", e)
	}
	names := map[string]bool{}
	for _, p := range m.NamedParameters() {
		names[p.Name] = p.Trainable
	}
	for name, trainable := range map[string]bool{
		path + ".base_layer.weight": false, path + ".base_layer.bias": false, path + ".extra.weight": true,
	} {
		if got, ok := names[name]; !ok || got != trainable {
			t.Errorf("%s: present=%v trainable=%v, want present, trainable=%v", name, ok, got, trainable)
		}
	}
	if base.Weight.Grad != nil {
		t.Errorf("frozen base weight has a gradient")
	}
	wrapper.s = 2
	scaled := transformertest.Step(t, m, batch, 1)
	if e, _ := tensortest.RelErr(scaled.Logits, before.Logits); e == 0 {
		t.Errorf("a scale of 2 left the logits unchanged: the replacement is not called")
	}
	for _, c := range []struct {
		why  string
		repl map[string]transformer.Projection
	}{
		{"unknown path", map[string]transformer.Projection{"bert.encoder.layer.9.attention.self.value": wrapper}},
		{"wrong shape", map[string]transformer.Projection{"bert.encoder.layer.0.intermediate.dense": wrapper}},
	} {
		if err := m.ReplaceProjections(c.repl); err == nil {
			t.Errorf("%s: no error", c.why)
		} else {
			t.Logf("%s: %v", c.why, err)
		}
	}
}
