package gpt2

import (
	"math"

	"github.com/tune-ml/tune/amp"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// tinyConfig is a small GPT-2 for fast tests: V 40, P 16, C 16, 2 layers, 2 heads, I 4·C, no dropout.
func tinyConfig() Config {
	c := DefaultConfig()
	c.VocabSize, c.NPositions, c.NEmbd, c.NLayer, c.NHead = 40, 16, 16, 2, 2
	c.ResidPdrop, c.EmbdPdrop, c.AttnPdrop = 0, 0, 0
	return c
}

// newTestModel builds a model for cfg with detweights values from seed (biases and LayerNorms included, so
// every parameter matters).
func newTestModel(t testing.TB, b tensor.Backend, cfg Config, seed uint64) *GPT2LMHeadModel {
	t.Helper()
	m, err := newModel(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.namedParameters() {
		v := np.Param.Value
		vals := detweights.Values(seed, np.Name, v.Shape)
		if strings.Contains(np.Name, "ln_") && strings.HasSuffix(np.Name, "weight") {
			for i := range vals {
				vals[i] += 1
			}
		}
		if err := b.Upload(v, vals); err != nil {
			t.Fatal(err)
		}
	}
	m.WeightsUpdated()
	return m
}

// testBatch returns a (b, t) batch whose row i has lens[i] real tokens followed by padding (id 0, mask 0,
// label −100), ids drawn deterministically from [1, vocab), labels equal to the ids (the causal-LM
// convention) with position 2 of row 0 ignored.
func testBatch(b, t, vocab int, lens []int) *loaders.Batch {
	bt := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), AttentionMask: make([]int32, b*t), Labels: make([]int64, b*t)}
	x := uint64(4242)
	for i := 0; i < b; i++ {
		for j := 0; j < t; j++ {
			bt.Labels[i*t+j] = -100
			if j < lens[i] {
				x = detweights.SplitMix64(x)
				id := int32(1 + x%uint64(vocab-1))
				bt.InputIDs[i*t+j], bt.AttentionMask[i*t+j], bt.Labels[i*t+j] = id, 1, int64(id)
			}
		}
	}
	bt.Labels[2] = -100
	return bt
}

// TestTensorSpecsMatchParameters: the checkpoint name table is the parameter list (one source of names), with
// the Conv1D weights transposed.
func TestTensorSpecsMatchParameters(t *testing.T) {
	for _, tied := range []bool{true, false} {
		cfg := tinyConfig()
		cfg.TieWordEmbeddings = tied
		m := newTestModel(t, cpu.New(), cfg, 1)
		specs := tensorSpecs(cfg)
		fromParams := transformer.CheckpointTensors(m.namedParameters(), checkpointRules(cfg))
		if len(specs) != len(fromParams) {
			t.Fatalf("tied=%v: %d specs, %d parameters", tied, len(specs), len(fromParams))
		}
		for i := range specs {
			if specs[i].Name != fromParams[i].Name || !slices.Equal(specs[i].Shape, fromParams[i].Shape) {
				t.Errorf("tied=%v: spec %d = %+v, parameter %+v", tied, i, specs[i], fromParams[i])
			}
		}
	}
}

// TestGradientMatchesFiniteDifferences checks Backward against central differences of the FP32 loss for
// every parameter tensor (its largest-gradient element and two others), with padding, an ignored label, both
// tied and untied heads, and with dropout on (the masks are a function of (seed, offset), so the loss stays
// deterministic).
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	untied := tinyConfig()
	untied.TieWordEmbeddings = false
	dropout := tinyConfig()
	dropout.ResidPdrop, dropout.EmbdPdrop, dropout.AttnPdrop = 0.1, 0.1, 0.1
	exact := tinyConfig()
	exact.ActivationFunc, exact.ScaleAttnByInverseLayerIdx = "gelu", true
	for _, c := range []struct {
		name string
		cfg  Config
		impl string
	}{{"tied head, padding", tinyConfig(), ""}, {"untied head", untied, ""}, {"dropout everywhere", dropout, ""},
		{"exact GELU, scores scaled by layer index", exact, ""}, {"eager attention with dropout", dropout, transformer.AttnEager}} {
		t.Run(c.name, func(t *testing.T) {
			b := cpu.New()
			m := newTestModel(t, b, c.cfg, 3)
			if err := m.SetAttnImplementation(c.impl); err != nil {
				t.Fatal(err)
			}
			batch := testBatch(2, 7, c.cfg.VocabSize, []int{7, 4})
			const seed = 91
			transformertest.Step(t, m, batch, seed)
			loss := func() float64 {
				out, err := m.Forward(batch, transformer.ForwardOptions{Train: true, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				return float64(out.Loss)
			}
			const eps = 1e-2
			checked := 0
			for _, np := range m.namedParameters() {
				g := tensortest.Download(t, b, np.Param.Grad)
				w := tensortest.Download(t, b, np.Param.Value)
				idx := []int{argmaxAbs(g)}
				x := detweights.FNV1a64(np.Name)
				for range 2 {
					x = detweights.SplitMix64(x)
					idx = append(idx, int(x%uint64(len(w))))
				}
				for _, i := range idx {
					orig := w[i]
					w[i] = orig + eps
					upload(t, m, np, w)
					lp := loss()
					w[i] = orig - eps
					upload(t, m, np, w)
					lm := loss()
					w[i] = orig
					upload(t, m, np, w)
					fd, an := (lp-lm)/(2*eps), float64(g[i])
					if math.Abs(fd-an) > 2e-2*math.Abs(an)+3e-4 {
						t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", np.Name, i, an, fd)
					}
					checked++
				}
			}
			if checked < 3*len(m.namedParameters()) {
				t.Fatalf("only %d elements checked", checked)
			}
		})
	}
}

func argmaxAbs(v []float32) int {
	best := 0
	for i, x := range v {
		if math.Abs(float64(x)) > math.Abs(float64(v[best])) {
			best = i
		}
	}
	return best
}

func upload(t testing.TB, m *GPT2LMHeadModel, np transformer.NamedParameter, w []float32) {
	t.Helper()
	if err := m.Backend().Upload(np.Param.Value, w); err != nil {
		t.Fatal(err)
	}
	m.WeightsUpdated()
}

// TestCausalAndLoss checks the model's causal structure and loss definition directly: the logits at
// position t do not change when a later token changes, and the loss equals the mean over supervised targets
// of −log softmax(logits[t])[labels[t+1]], computed on the host from the returned logits.
func TestCausalAndLoss(t *testing.T) {
	b := cpu.New()
	cfg := tinyConfig()
	m := newTestModel(t, b, cfg, 5)
	batch := testBatch(2, 6, cfg.VocabSize, []int{6, 6})
	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.VocabSize
	var sum float64
	n := 0
	for r := 0; r < 2; r++ {
		for i := 0; i+1 < 6; i++ {
			lab := batch.Labels[r*6+i+1]
			if lab == -100 {
				continue
			}
			row := out.Logits[(r*6+i)*v : (r*6+i+1)*v]
			mx := slices.Max(row)
			var z float64
			for _, x := range row {
				z += math.Exp(float64(x - mx))
			}
			sum += math.Log(z) + float64(mx) - float64(row[lab])
			n++
		}
	}
	if n != m.Supervised(batch) {
		t.Fatalf("Supervised = %d, counted %d", m.Supervised(batch), n)
	}
	if want := sum / float64(n); math.Abs(float64(out.Loss)-want) > 1e-5*math.Abs(want) {
		t.Fatalf("loss %v, host computation %v", out.Loss, want)
	}
	before := slices.Clone(out.Logits)
	batch.InputIDs[4] = (batch.InputIDs[4] + 1) % int32(v) // row 0, position 4
	out, err = m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4*v; i++ {
		if out.Logits[i] != before[i] {
			t.Fatalf("logit %d of row 0 (position %d) changed when position 4 changed: attention is not causal", i, i/v)
		}
	}
	if slices.Equal(out.Logits[4*v:5*v], before[4*v:5*v]) {
		t.Fatal("the changed position's own logits did not change")
	}
}

// TestEagerMatchesFused: the two-pass causal path (attn_implementation eager, also the fallback for head sizes
// a backend's fused kernel lacks) gives the fused path's logits, loss and gradients on a padded batch.
func TestEagerMatchesFused(t *testing.T) {
	for _, c := range []struct {
		policy amp.Policy
		tol    float64
	}{{amp.FP32, 1e-5}, {amp.BF16, 2e-2}, {amp.FP16, 3e-3}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			b := cpu.New()
			cfg := tinyConfig()
			batch := testBatch(2, 7, cfg.VocabSize, []int{7, 4})
			var outs []transformer.Output
			var grads [][][]float32
			for _, impl := range []string{transformer.AttnSDPA, transformer.AttnEager} {
				m := newTestModel(t, b, cfg, 13)
				if err := m.SetAttnImplementation(impl); err != nil {
					t.Fatal(err)
				}
				m.SetPolicy(c.policy)
				outs = append(outs, transformertest.Step(t, m, batch, 0))
				var g [][]float32
				for _, np := range m.namedParameters() {
					g = append(g, tensortest.Download(t, b, np.Param.Grad))
				}
				grads = append(grads, g)
			}
			if e, i := tensortest.RelErr(outs[1].Logits, outs[0].Logits); e > c.tol {
				t.Errorf("logits: eager vs sdpa relative error %.3g at %d", e, i)
			}
			if e := math.Abs(float64(outs[1].Loss-outs[0].Loss)) / float64(outs[0].Loss); e > c.tol {
				t.Errorf("loss: eager %v, sdpa %v", outs[1].Loss, outs[0].Loss)
			}
			for i := range grads[0] {
				if e, j := tensortest.RelErr(grads[1][i], grads[0][i]); e > c.tol {
					t.Errorf("gradient %d: eager vs sdpa relative error %.3g at %d", i, e, j)
				}
			}
		})
	}
}
