package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// bagModel is a tiny classifier for the Trainer's tests, computed on the host so that its numerics are obvious:
// h = dropout(mean of the attended tokens' embeddings), logits = h·W + bias, loss = mean cross-entropy over the
// labelled rows. Under an enabled policy h and W are rounded to the autocast dtype before the product, as an
// autocast GEMM would take them. Parameters live in one flat F32 buffer on the CPU backend:
// emb (V, C) | W (C, L) | bias (L); emb and W decay, bias does not.
type bagModel struct {
	b           tensor.Backend
	V, C, L     int
	p           float32 // dropout probability
	params      *tensor.Tensor
	grads       *tensor.Tensor
	policy      amp.Policy
	infAtCall   map[int]bool // Backward calls (from 0) whose gradients get an +Inf, to force a skipped FP16 step
	calls       int
	saves       int
	last        *loaders.Batch // the batch of the last training Forward
	h, probs    []float32      // (B, C) and (B, L) of the last training Forward
	keep        []bool         // (B, C) dropout mask of the last training Forward
	seeds       []float32      // the seed of every Backward call, for the tests
	zeroed      [][]float32    // the gradients at every ZeroGrad (after clipping: what the optimizer used)
	updatedSeen int
}

var (
	_ Model  = (*bagModel)(nil)
	_ Loader = (*bagModel)(nil)
)

// newBagModel returns a bagModel with weights drawn from a fixed Philox stream (seed 7), identical every time.
func newBagModel(V, C, L int, p float32) *bagModel {
	b := cpu.New()
	n := V*C + C*L + L
	m := &bagModel{b: b, V: V, C: C, L: L, p: p, infAtCall: map[int]bool{}}
	m.params, _ = b.Alloc(tensor.F32, n)
	m.grads, _ = b.Alloc(tensor.F32, n)
	init := make([]float32, n)
	for i := range init {
		init[i] = (tensor.PhiloxUniform(7, 0, i) - 0.5) * 0.2
	}
	_ = b.Upload(m.params, init)
	return m
}

func (m *bagModel) host(t *tensor.Tensor) []float32 {
	out := make([]float32, t.Numel())
	if err := m.b.Download(out, t); err != nil {
		panic(err)
	}
	return out
}

func (m *bagModel) Backend() tensor.Backend { return m.b }
func (m *bagModel) SetPolicy(p amp.Policy)  { m.policy = p }

func (m *bagModel) round(x float32) float32 { return tensor.RoundTo(m.policy.GemmDType(), x) }

func (m *bagModel) Forward(b *loaders.Batch, opts ForwardOptions) (Output, error) {
	P := m.host(m.params)
	emb, W, bias := P[:m.V*m.C], P[m.V*m.C:m.V*m.C+m.C*m.L], P[m.V*m.C+m.C*m.L:]
	h := make([]float32, b.B*m.C)
	keep := make([]bool, b.B*m.C)
	for r := range b.B {
		n := 0
		for t := range b.T {
			if b.AttentionMask[r*b.T+t] == 0 {
				continue
			}
			id := int(b.InputIDs[r*b.T+t])
			if id < 0 || id >= m.V {
				return Output{}, fmt.Errorf("bagModel: id %d outside vocab %d", id, m.V)
			}
			n++
			for c := range m.C {
				h[r*m.C+c] += emb[id*m.C+c]
			}
		}
		for c := range m.C {
			i := r*m.C + c
			h[i] /= float32(max(n, 1))
			keep[i] = true
			if opts.Train && m.p > 0 {
				keep[i] = tensor.PhiloxKeep(opts.Seed, opts.Offset, i, m.p)
				if keep[i] {
					h[i] /= 1 - m.p
				} else {
					h[i] = 0
				}
			}
		}
	}
	out := Output{Logits: make([]float32, b.B*m.L), NumLabels: m.L}
	probs := make([]float32, b.B*m.L)
	var loss float64
	count := 0
	for r := range b.B {
		for l := range m.L {
			s := bias[l]
			for c := range m.C {
				s += m.round(h[r*m.C+c]) * m.round(W[c*m.L+l])
			}
			out.Logits[r*m.L+l] = s
		}
		row := out.Logits[r*m.L : (r+1)*m.L]
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v - mx))
		}
		for l, v := range row {
			probs[r*m.L+l] = float32(math.Exp(float64(v-mx)) / z)
		}
		if b.Labels != nil && b.Labels[r] != -100 {
			loss += -math.Log(float64(probs[r*m.L+int(b.Labels[r])]))
			count++
		}
	}
	out.Loss = float32(math.NaN())
	if count > 0 {
		out.Loss = float32(loss / float64(count))
	}
	if opts.Train {
		m.last, m.h, m.probs, m.keep = b, h, probs, keep
	}
	return out, nil
}

func (m *bagModel) Supervised(b *loaders.Batch) int { return b.NumLabelled() }

func (m *bagModel) Backward(seed float32) error {
	if m.last == nil {
		return fmt.Errorf("bagModel: Backward before a training Forward")
	}
	m.seeds = append(m.seeds, seed)
	b := m.last
	P, G := m.host(m.params), m.host(m.grads)
	W := P[m.V*m.C : m.V*m.C+m.C*m.L]
	gEmb, gW, gBias := G[:m.V*m.C], G[m.V*m.C:m.V*m.C+m.C*m.L], G[m.V*m.C+m.C*m.L:]
	n := b.NumLabelled()
	for r := range b.B {
		if b.Labels[r] == -100 {
			continue
		}
		dh := make([]float32, m.C)
		for l := range m.L {
			d := m.probs[r*m.L+l]
			if int64(l) == b.Labels[r] {
				d--
			}
			d *= seed / float32(n)
			gBias[l] += d
			for c := range m.C {
				gW[c*m.L+l] += m.round(m.h[r*m.C+c]) * d
				dh[c] += m.round(W[c*m.L+l]) * d
			}
		}
		cnt := 0
		for t := range b.T {
			cnt += int(b.AttentionMask[r*b.T+t])
		}
		for c := range m.C {
			if !m.keep[r*m.C+c] {
				dh[c] = 0
			} else if m.p > 0 {
				dh[c] /= 1 - m.p
			}
		}
		for t := range b.T {
			if b.AttentionMask[r*b.T+t] == 0 {
				continue
			}
			id := int(b.InputIDs[r*b.T+t])
			for c := range m.C {
				gEmb[id*m.C+c] += dh[c] / float32(max(cnt, 1))
			}
		}
	}
	if m.infAtCall[m.calls] {
		gBias[0] = float32(math.Inf(1))
	}
	m.calls++
	return m.b.Upload(m.grads, G)
}

func (m *bagModel) Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment) {
	dec := m.V*m.C + m.C*m.L
	return m.params, m.grads, []tensor.Segment{{Offset: 0, Len: dec, Decay: true}, {Offset: dec, Len: m.L, Decay: false}}
}

func (m *bagModel) ZeroGrad() error {
	m.zeroed = append(m.zeroed, m.host(m.grads))
	return m.b.Fill(m.grads, 0)
}
func (m *bagModel) WeightsUpdated() { m.updatedSeen++ }

func (m *bagModel) NamedParameters() []NamedParam {
	emb, _ := m.params.View(0, m.V, m.C)
	W, _ := m.params.View(m.V*m.C, m.C, m.L)
	bias, _ := m.params.View(m.V*m.C+m.C*m.L, m.L)
	gEmb, _ := m.grads.View(0, m.V, m.C)
	gW, _ := m.grads.View(m.V*m.C, m.C, m.L)
	gBias, _ := m.grads.View(m.V*m.C+m.C*m.L, m.L)
	return []NamedParam{
		{Name: "embeddings.weight", Value: emb, Grad: gEmb, Trainable: true, Decay: true},
		{Name: "classifier.weight", Value: W, Grad: gW, Trainable: true, Decay: true},
		{Name: "classifier.bias", Value: bias, Grad: gBias, Trainable: true},
	}
}

// The test model's weights file is a name its checkpoints write, as config.json and model.safetensors are a
// real model's (foreignCheckpointFiles).
func init() { checkpointFiles = append(checkpointFiles, "model.json") }

// Save writes the flat parameters as JSON (float32 values round-trip exactly through Go's shortest encoding).
func (m *bagModel) Save(dir string) error {
	m.saves++
	data, err := json.Marshal(m.host(m.params))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "model.json"), data, 0o644)
}

func (m *bagModel) Load(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "model.json"))
	if err != nil {
		return err
	}
	var p []float32
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if len(p) != m.params.Numel() {
		return fmt.Errorf("bagModel: %d values, want %d", len(p), m.params.Numel())
	}
	m.WeightsUpdated()
	return m.b.Upload(m.params, p)
}

// scriptModel is a linear model with scripted per-example losses for the accumulation and clipping cases: the
// example whose first token id is k has loss a[k] + g[k]·p over the parameter vector p, so the gradient of the
// mean loss over n examples is the mean of their g[k]. It records the gradient the optimizer saw at each
// ZeroGrad.
type scriptModel struct {
	b      tensor.Backend
	a      map[int32]float32
	g      map[int32][]float32
	params *tensor.Tensor
	grads  *tensor.Tensor
	last   *loaders.Batch
	seeds  []float32
	zeroed [][]float32
}

var _ Model = (*scriptModel)(nil)

func newScriptModel(dim int, a map[int32]float32, g map[int32][]float32) *scriptModel {
	b := cpu.New()
	m := &scriptModel{b: b, a: a, g: g}
	m.params, _ = b.Alloc(tensor.F32, dim)
	m.grads, _ = b.Alloc(tensor.F32, dim)
	return m
}

func (m *scriptModel) Backend() tensor.Backend { return m.b }
func (m *scriptModel) SetPolicy(amp.Policy)    {}

func (m *scriptModel) Forward(b *loaders.Batch, opts ForwardOptions) (Output, error) {
	p := make([]float32, m.params.Numel())
	_ = m.b.Download(p, m.params)
	var sum float64
	n := 0
	for r := range b.B {
		if b.Labels[r] == -100 {
			continue
		}
		k := b.InputIDs[r*b.T]
		l := m.a[k]
		for i, gi := range m.g[k] {
			l += gi * p[i]
		}
		sum += float64(l)
		n++
	}
	if opts.Train {
		m.last = b
	}
	return Output{Logits: make([]float32, 2*b.B), NumLabels: 2, Loss: float32(sum / float64(n))}, nil
}

func (m *scriptModel) Supervised(b *loaders.Batch) int { return b.NumLabelled() }

func (m *scriptModel) Backward(seed float32) error {
	m.seeds = append(m.seeds, seed)
	g := make([]float32, m.grads.Numel())
	_ = m.b.Download(g, m.grads)
	b := m.last
	n := float32(b.NumLabelled())
	for r := range b.B {
		if b.Labels[r] == -100 {
			continue
		}
		for i, gi := range m.g[b.InputIDs[r*b.T]] {
			g[i] += seed / n * gi
		}
	}
	return m.b.Upload(m.grads, g)
}

func (m *scriptModel) Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment) {
	return m.params, m.grads, []tensor.Segment{{Offset: 0, Len: m.params.Numel(), Decay: true}}
}

func (m *scriptModel) ZeroGrad() error {
	g := make([]float32, m.grads.Numel())
	_ = m.b.Download(g, m.grads)
	m.zeroed = append(m.zeroed, g)
	return m.b.Fill(m.grads, 0)
}

func (m *scriptModel) WeightsUpdated() {}

func (m *scriptModel) NamedParameters() []NamedParam {
	return []NamedParam{{Name: "p", Value: m.params, Grad: m.grads, Trainable: true, Decay: true}}
}

func (m *scriptModel) Save(string) error { return nil }
