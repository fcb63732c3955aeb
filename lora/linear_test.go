package lora

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
)

// TestLinearMatchesReference runs one lora.Linear outside a model (N 5, In 6, Out 7, R 3, scaling 2) against a
// float64 host computation of PEFT's formulas: out = x·Wᵀ + b + s·B·A·drop(x), dIn = dOut·W + drop'(s·dOut·B·A),
// dB = s·dOutᵀ·(drop(x)·Aᵀ), dA = (s·dOut·B)ᵀ·drop(x), the dropout mask being Philox's from the pass's seed.
// The base weight and bias have no gradient buffer and must get none.
func TestLinearMatchesReference(t *testing.T) {
	const n, in, out, r = 5, 6, 7, 3
	for _, c := range []struct {
		name       string
		dropout    float64
		accumulate bool
		noDIn      bool
	}{
		{"no dropout, dIn overwritten", 0, false, false},
		{"no dropout, dIn accumulated", 0, true, false},
		{"dropout 0.4 on the adapter branch only", 0.4, true, false},
		{"no input gradient wanted", 0.4, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			bk := cpuBackend()
			base, err := transformer.NewLinear(bk, in, out, true)
			if err != nil {
				t.Fatal(err)
			}
			host := func(name string, shape ...int) []float32 { return detweights.Values(11, name, shape) }
			w, bias := host("w.weight", out, in), host("w.bias", out)
			must(t, bk.Upload(base.Weight.Value, w))
			must(t, bk.Upload(base.Bias.Value, bias))
			cfg := DefaultConfig()
			cfg.R, cfg.LoraAlpha, cfg.LoraDropout = r, 6, c.dropout
			l, err := NewLinear(bk, base, cfg, false, 3)
			if err != nil {
				t.Fatal(err)
			}
			a, bm := host("lora_A.weight", r, in), host("lora_B.weight", out, r)
			must(t, bk.Upload(l.A.Value, a))
			must(t, bk.Upload(l.B.Value, bm))
			l.A.Grad, l.B.Grad = tensortest.Alloc(t, bk, tensor.F32, r, in), tensortest.Alloc(t, bk, tensor.F32, out, r)
			arena := transformer.NewArena(bk)
			must(t, arena.Carve(func(a *transformer.Arena) error { l.Layout(a, n, tensor.F32); return nil }))

			x, dOut := host("x.weight", n, in), host("dout.weight", n, out)
			dIn0 := host("din.weight", n, in)
			xt, outT := tensortest.Upload(t, bk, tensor.F32, x, n, in), tensortest.Alloc(t, bk, tensor.F32, n, out)
			dOutT, dInT := tensortest.Upload(t, bk, tensor.F32, dOut, n, out), tensortest.Upload(t, bk, tensor.F32, dIn0, n, in)
			const seed, offset = 99, 12
			p := &transformer.Pass{Backend: bk, Policy: amp.FP32, Train: true, Seed: seed, Offset: offset}
			must(t, l.Forward(p, outT, xt))
			if c.noDIn {
				dInT = nil
			}
			must(t, l.Backward(p, dInT, dOutT, xt, c.accumulate))

			// float64 reference
			s, keep := 2.0, 1/(1-c.dropout)
			xd := make([]float64, n*in)
			for i := range xd {
				if c.dropout == 0 || tensor.PhiloxKeep(seed, offset, i, float32(c.dropout)) {
					xd[i] = float64(x[i]) * keep
				}
			}
			h := matmulT(xd, f64(a), n, in, r) // (n, r) = xd·Aᵀ
			wantOut := matmulT(f64(x), f64(w), n, in, out)
			delta := matmulT(h, f64(bm), n, r, out)
			for i := range wantOut {
				wantOut[i] += float64(bias[i%out]) + s*delta[i]
			}
			dh := matmul(f64(dOut), f64(bm), n, out, r) // (n, r) = dOut·B
			for i := range dh {
				dh[i] *= s
			}
			wantDB := matmul(transpose(f64(dOut), n, out), h, out, n, r)
			for i := range wantDB {
				wantDB[i] *= s
			}
			wantDA := matmul(transpose(dh, n, r), xd, r, n, in)
			wantDIn := matmul(f64(dOut), f64(w), n, out, in)
			dxd := matmul(dh, f64(a), n, r, in)
			for i := range wantDIn {
				if c.dropout == 0 || tensor.PhiloxKeep(seed, offset, i, float32(c.dropout)) {
					wantDIn[i] += dxd[i] * keep
				}
				if c.accumulate {
					wantDIn[i] += float64(dIn0[i])
				}
			}
			check := func(name string, got *tensor.Tensor, want []float64) {
				t.Helper()
				if e := relErr64(tensortest.Download(t, bk, got), want); e > 1e-6 {
					t.Errorf("%s: relative error %.3g", name, e)
				}
			}
			check("out", outT, wantOut)
			check("dB", l.B.Grad, wantDB)
			check("dA", l.A.Grad, wantDA)
			if !c.noDIn {
				check("dIn", dInT, wantDIn)
			}
			if base.Weight.Grad != nil || base.Bias.Grad != nil || base.Weight.Trainable || base.Bias.Trainable {
				t.Errorf("the base is not frozen: weight trainable %v, bias trainable %v", base.Weight.Trainable, base.Bias.Trainable)
			}
			if c.dropout > 0 && p.Offset == offset {
				t.Errorf("the dropout did not advance the pass's Philox offset")
			}
		})
	}
}

// TestGradientMatchesFiniteDifferences checks the model-level gradients of every lora_A and lora_B (and of the
// trained base biases and the classifier) against central differences of the FP32 loss, at each tensor's
// largest-gradient element and two pseudo-random ones. B starts non-zero so that A's gradient is not zero. The
// dropout row keeps lora_dropout on: masks are a function of (seed, offset), so the loss stays a deterministic
// function of the weights.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
		eps  float32 // the step; rslora's scaling of 4 with every Linear adapted curves the loss strongly in A
	}{
		{"query/value, bias none", func(*Config) {}, 1e-2},
		{"lora_dropout 0.2", func(c *Config) { c.LoraDropout = 0.2 }, 1e-2},
		{"all-linear, rslora, bias lora_only", func(c *Config) {
			c.TargetModules, c.UseRSLoRA, c.Bias = TargetModules{Regex: AllLinear}, true, BiasLoRAOnly
		}, 1e-3},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads = 40, 16, 24, 2
			lc := seqCls()
			c.edit(&lc)
			m, err := Apply(newBase(t, cpuBackend(), cfg, 2), lc, 5)
			if err != nil {
				t.Fatal(err)
			}
			setParams(t, m, 8, func(n string) bool { return strings.Contains(n, "lora_B") })
			batch := testBatch(3, 6, cfg.VocabSize, []int{6, 3, 5})
			const seed = 21
			step(t, m, batch, seed)
			loss := func() float64 {
				out, err := m.Forward(batch, trainer.ForwardOptions{HostLogits: true, Train: true, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				return float64(out.Loss)
			}
			eps := c.eps
			checked, worst := 0, 0.0
			for _, np := range m.NamedParameters() {
				if !np.Trainable {
					continue
				}
				g, w := tensortest.Download(t, m.Backend(), np.Grad), tensortest.Download(t, m.Backend(), np.Value)
				idx := []int{argmaxAbs(g)}
				x := detweights.FNV1a64(np.Name)
				for range 2 {
					x = detweights.SplitMix64(x)
					idx = append(idx, int(x%uint64(len(w))))
				}
				for _, i := range idx {
					orig := w[i]
					set := func(v float32) {
						w[i] = v
						must(t, m.Backend().Upload(np.Value, w))
						m.WeightsUpdated()
					}
					set(orig + eps)
					lp := loss()
					set(orig - eps)
					lm := loss()
					set(orig)
					fd, an := (lp-lm)/(2*float64(eps)), float64(g[i])
					if diff := math.Abs(fd - an); diff > 2e-2*math.Abs(an)+3e-4 {
						t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", np.Name, i, an, fd)
					} else {
						worst = math.Max(worst, diff)
					}
					checked++
				}
			}
			t.Logf("%d elements checked, worst absolute difference %.3g", checked, worst)
		})
	}
}

// TestFrozenBaseUntouched trains two AdamW steps with weight decay: the frozen parameters (every base weight,
// embeddings, LayerNorms) have no gradient and keep their values bit for bit; every adapter and the classifier
// change.
func TestFrozenBaseUntouched(t *testing.T) {
	cfg := tinyConfig()
	m, err := Apply(newBase(t, cpuBackend(), cfg, 4), seqCls(), 4)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string][]float32{}
	for _, np := range m.NamedParameters() {
		before[np.Name] = tensortest.Download(t, m.Backend(), np.Value)
	}
	opt, err := trainer.NewAdamW(m, 0.9, 0.999, 1e-8, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	batch := testBatch(2, 8, cfg.VocabSize, []int{8, 5})
	for i := range 2 {
		step(t, m, batch, uint64(i))
		must(t, opt.Step(1e-2))
		m.WeightsUpdated()
	}
	for _, np := range m.NamedParameters() {
		changed := relErr(tensortest.Download(t, m.Backend(), np.Value), before[np.Name]) != 0
		switch {
		case np.Trainable != trained(np.Name):
			t.Errorf("%s: trainable %v", np.Name, np.Trainable)
		case !np.Trainable && (np.Grad != nil || changed):
			t.Errorf("frozen %s: gradient %v, value changed %v", np.Name, np.Grad != nil, changed)
		case np.Trainable && !changed:
			t.Errorf("trainable %s did not change in two AdamW steps", np.Name)
		}
	}
}

// TestAutocastCloseToFP32 runs the adapted model in FP32 and under BF16 and FP16 autocast with lora_dropout on:
// logits, loss and the gradients of every adapter and of the classifier agree within the dtype's precision
// (per-tensor max|a−b| / max|b|), and the gradients are FP32.
func TestAutocastCloseToFP32(t *testing.T) {
	cfg := tinyConfig()
	lc := seqCls()
	lc.LoraDropout = 0.1
	batch := testBatch(3, 8, cfg.VocabSize, []int{8, 5, 2})
	build := func() *Model {
		m, err := Apply(newBase(t, cpuBackend(), cfg, 5), lc, 5)
		if err != nil {
			t.Fatal(err)
		}
		setParams(t, m, 6, func(n string) bool { return strings.Contains(n, "lora_B") })
		return m
	}
	ref := build()
	refLoss := step(t, ref, batch, 13)
	refLogits := forward(t, ref, batch)
	for _, c := range []struct {
		policy              amp.Policy
		tolLogits, tolGrads float64
	}{
		{amp.BF16, 3e-2, 6e-2},
		{amp.FP16, 4e-3, 1e-2},
	} {
		t.Run(c.policy.String(), func(t *testing.T) {
			m := build()
			m.SetPolicy(c.policy)
			loss := step(t, m, batch, 13)
			if e := relErr(forward(t, m, batch), refLogits); e > c.tolLogits {
				t.Errorf("logits relative error %.3g > %.3g", e, c.tolLogits)
			}
			if e := relErr([]float32{loss}, []float32{refLoss}); e > c.tolLogits {
				t.Errorf("loss %v, FP32 %v", loss, refLoss)
			}
			worst, worstName := 0.0, ""
			for _, np := range m.NamedParameters() {
				if !np.Trainable {
					continue
				}
				if np.Grad.DType != tensor.F32 {
					t.Errorf("%s: gradient is %v, want F32", np.Name, np.Grad.DType)
				}
				got := tensortest.Download(t, m.Backend(), np.Grad)
				want := tensortest.Download(t, ref.Backend(), param(t, ref, np.Name).Grad)
				e := relErr(got, want)
				if e > worst {
					worst, worstName = e, np.Name
				}
			}
			t.Logf("worst gradient error %.3g (%s)", worst, worstName)
			if worst > c.tolGrads {
				t.Errorf("gradient of %s: error %.3g > %.3g", worstName, worst, c.tolGrads)
			}
		})
	}
}

// TestMergedModelRefusesTraining: a merged adapter can run inference but a training pass is an error wrapping
// ErrMerged until Unmerge.
func TestMergedModelRefusesTraining(t *testing.T) {
	cfg := tinyConfig()
	m, err := Apply(newBase(t, cpuBackend(), cfg, 4), seqCls(), 4)
	if err != nil {
		t.Fatal(err)
	}
	batch := testBatch(2, 4, cfg.VocabSize, []int{4, 2})
	must(t, m.Merge())
	forward(t, m, batch)
	if _, err := m.Forward(batch, trainer.ForwardOptions{HostLogits: true, Train: true}); !errors.Is(err, ErrMerged) {
		t.Errorf("training forward on a merged model: %v", err)
	}
	if err := m.Merge(); !errors.Is(err, ErrMerged) {
		t.Errorf("merging twice: %v", err)
	}
	must(t, m.Unmerge())
	step(t, m, batch, 1)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// matmul returns a (m, k) · b (k, n).
func matmul(a, b []float64, m, k, n int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				s += a[i*k+p] * b[p*n+j]
			}
			out[i*n+j] = s
		}
	}
	return out
}

// matmulT returns a (m, k) · bᵀ for b (n, k).
func matmulT(a, b []float64, m, k, n int) []float64 { return matmul(a, transpose(b, n, k), m, k, n) }

// transpose returns the (c, r) transpose of a (r, c).
func transpose(a []float64, r, c int) []float64 {
	out := make([]float64, len(a))
	for i := range r {
		for j := range c {
			out[j*r+i] = a[i*c+j]
		}
	}
	return out
}

// relErr64 is max|a−b| / max|b| against a float64 reference.
func relErr64(a []float32, b []float64) float64 {
	var d, r float64
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i])-b[i]))
		r = math.Max(r, math.Abs(b[i]))
	}
	if r == 0 {
		return d
	}
	return d / r
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

// TestNewLinearInit checks each init_lora_weights against PEFT's reset_lora_parameters on a 256→96 Linear with
// r 8: "true" draws A from U(±1/√in) and zeroes B; "gaussian" draws A from N(0, (1/r)²) and zeroes B; "false"
// draws both (B from U(±1/√r)), so the adapter is live from the start. Checked by range and spread.
func TestNewLinearInit(t *testing.T) {
	const in, out, r = 256, 96, 8
	stats := func(v []float32) (maxAbs, std float64) {
		var sum, sq float64
		for _, x := range v {
			maxAbs = math.Max(maxAbs, math.Abs(float64(x)))
			sum += float64(x)
			sq += float64(x) * float64(x)
		}
		n := float64(len(v))
		return maxAbs, math.Sqrt(sq/n - (sum/n)*(sum/n))
	}
	uniformStd := func(bound float64) float64 { return bound / math.Sqrt(3) }
	for _, c := range []struct {
		init         InitLoraWeights
		aBound, aStd float64 // aBound 0: unbounded (normal)
		bBound, bStd float64 // 0, 0: B all zero
	}{
		{InitDefault, 1 / 16.0, uniformStd(1 / 16.0), 0, 0},
		{InitGaussian, 0, 1.0 / r, 0, 0},
		{InitRandom, 1 / 16.0, uniformStd(1 / 16.0), 1 / math.Sqrt(r), uniformStd(1 / math.Sqrt(r))},
	} {
		t.Run(string(c.init), func(t *testing.T) {
			bk := cpuBackend()
			base, err := transformer.NewLinear(bk, in, out, true)
			must(t, err)
			cfg := DefaultConfig()
			cfg.R, cfg.InitLoraWeights = r, c.init
			l, err := NewLinear(bk, base, cfg, false, 1)
			must(t, err)
			for _, w := range []struct {
				name         string
				v            []float32
				bound, wantS float64
			}{
				{"A", tensortest.Download(t, bk, l.A.Value), c.aBound, c.aStd},
				{"B", tensortest.Download(t, bk, l.B.Value), c.bBound, c.bStd},
			} {
				maxAbs, std := stats(w.v)
				switch {
				case w.wantS == 0 && maxAbs != 0:
					t.Errorf("%s: max |value| %g, want all zero", w.name, maxAbs)
				case w.bound > 0 && maxAbs > w.bound:
					t.Errorf("%s: max |value| %g beyond the bound %g", w.name, maxAbs, w.bound)
				case w.wantS > 0 && math.Abs(std/w.wantS-1) > 0.1:
					t.Errorf("%s: std %g, want %g", w.name, std, w.wantS)
				}
			}
		})
	}
	if _, err := NewLinear(cpuBackend(), nil, DefaultConfig(), false, 1); err == nil {
		t.Errorf("a nil base gave no error")
	}
}
