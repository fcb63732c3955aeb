package lora

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestApplyTargetsB27 runs PEFT's target_modules matching (check_target_module_exists in peft/tuners/tuners_utils.py) at the Apply level on the 2-layer tiny BERT: a list and the equivalent
// regex adapt the same 4 modules, a scalar "query" is a regex that matches no whole path and is refused with
// "no modules were targeted", and "all-linear" adapts 13 modules (6 per layer and the pooler; the classifier
// goes to modules_to_save).
func TestApplyTargetsB27(t *testing.T) {
	qv := []string{
		"bert.encoder.layer.0.attention.self.query", "bert.encoder.layer.0.attention.self.value",
		"bert.encoder.layer.1.attention.self.query", "bert.encoder.layer.1.attention.self.value",
	}
	for _, c := range []struct {
		name    string
		targets TargetModules
		want    []string // nil: an error wrapping ErrNoTargets
		count   int
	}{
		{"the list [query, value] matches by name", TargetModules{Names: []string{"query", "value"}}, qv, 4},
		{"the scalar query is a regex that fully matches no path", TargetModules{Regex: "query"}, nil, 0},
		{"a regex over the whole path", TargetModules{Regex: `.*\.(query|value)`}, qv, 4},
		{"all-linear takes every Linear but the head", TargetModules{Regex: AllLinear}, nil, 13},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := seqCls()
			cfg.TargetModules = c.targets
			m, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
			if c.count == 0 {
				if !errors.Is(err, ErrNoTargets) || !strings.Contains(err.Error(), "no modules were targeted") {
					t.Fatalf("error %v, want one wrapping ErrNoTargets", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := m.Targets()
			if len(got) != c.count || (c.want != nil && !slices.Equal(got, c.want)) {
				t.Fatalf("adapted %d modules %v, want %d %v", len(got), got, c.count, c.want)
			}
			if slices.Contains(got, "classifier") || !slices.Equal(m.SavedModules(), []string{"classifier"}) {
				t.Errorf("classifier adapted or not saved whole: targets %v, saved %v", got, m.SavedModules())
			}
			if c.targets.IsAllLinear() && !slices.Contains(got, "bert.pooler.dense") {
				t.Errorf("all-linear missed bert.pooler.dense: %v", got)
			}
		})
	}
}

// TestApplyTrainableSet checks which parameters Apply leaves trainable for each bias setting: the adapters and
// the classifier always; every bias (LayerNorm's too) with "all"; the adapted modules' base biases with
// "lora_only"; nothing else. Frozen parameters have no gradient buffer, and the trainable buffer holds exactly
// the trainable values.
func TestApplyTrainableSet(t *testing.T) {
	for _, c := range []struct {
		bias string
		want func(name string) bool
	}{
		{BiasNone, func(n string) bool { return strings.Contains(n, ".lora_") || strings.HasPrefix(n, "classifier.") }},
		{BiasAll, func(n string) bool {
			return strings.Contains(n, ".lora_") || strings.HasPrefix(n, "classifier.") || strings.HasSuffix(n, "bias")
		}},
		{BiasLoRAOnly, func(n string) bool {
			return strings.Contains(n, ".lora_") || strings.HasPrefix(n, "classifier.") || strings.HasSuffix(n, ".base_layer.bias")
		}},
	} {
		t.Run(c.bias, func(t *testing.T) {
			cfg := seqCls()
			cfg.Bias = c.bias
			m, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, np := range m.NamedParameters() {
				if np.Trainable != c.want(np.Name) || np.Trainable != (np.Grad != nil) {
					t.Errorf("%s: trainable %v, gradient %v; want trainable %v", np.Name, np.Trainable, np.Grad != nil, c.want(np.Name))
				}
				if np.Trainable {
					total += np.Value.Numel()
				}
			}
			params, grads, _ := m.Trainable()
			if params.Numel() != total || grads.Numel() != total {
				t.Errorf("trainable buffers hold %d/%d values, trainable parameters %d", params.Numel(), grads.Numel(), total)
			}
		})
	}
}

// TestApplyNames checks PEFT's in-memory names for an adapted module and the initialisation: A within
// ±1/√in (Kaiming-uniform a=√5), B zero, so the adapted model starts with the base model's logits bit for bit.
func TestApplyNames(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	base := newBase(t, b, cfg, 3)
	batch := testBatch(2, 7, cfg.VocabSize, []int{7, 4})
	before := forward(t, base, batch)
	m, err := Apply(base, seqCls(), 9)
	if err != nil {
		t.Fatal(err)
	}
	const p = "bert.encoder.layer.1.attention.self.value."
	for _, name := range []string{"base_layer.weight", "base_layer.bias", "lora_A.default.weight", "lora_B.default.weight"} {
		param(t, m, p+name)
	}
	a := tensortest.Download(t, b, param(t, m, p+"lora_A.default.weight").Value)
	bound := float32(1 / 8.0) // 1/√64
	var maxA float32
	for _, v := range a {
		maxA = max(maxA, v, -v)
	}
	if maxA > bound || maxA < 0.9*bound {
		t.Errorf("lora_A max |value| %v, want just under 1/√in = %v", maxA, bound)
	}
	for _, v := range tensortest.Download(t, b, param(t, m, p+"lora_B.default.weight").Value) {
		if v != 0 {
			t.Fatalf("lora_B starts at %v, want 0", v)
		}
	}
	if e := relErr(forward(t, m, batch), before); e != 0 {
		t.Errorf("a fresh adapter changed the logits (error %g)", e)
	}
	if _, err := Apply(m.Base, seqCls(), 9); err == nil || !strings.Contains(err.Error(), "already has a LoRA adapter") {
		t.Errorf("applying twice: %v", err)
	}
}

// TestTrainableReport checks PEFT's print_trainable_parameters arithmetic: all params counts the saved
// classifier twice (PEFT keeps the original beside the trained copy).
func TestTrainableReport(t *testing.T) {
	cfg := tinyConfig()
	base := newBase(t, cpuBackend(), cfg, 1)
	baseTotal := 0
	for _, np := range base.NamedParameters() {
		baseTotal += np.Value.Numel()
	}
	m, err := Apply(base, seqCls(), 1)
	if err != nil {
		t.Fatal(err)
	}
	c, l := cfg.HiddenSize, cfg.NumLabels()
	lora := 4 * (4*c + c*4) // 2 layers × {query, value} × (A + B)
	head := l*c + l
	trainable, all := m.TrainableParameters()
	if trainable != lora+head || all != baseTotal+lora+head {
		t.Errorf("trainable %d, all %d; want %d, %d", trainable, all, lora+head, baseTotal+lora+head)
	}
	if got := TrainableReport(m); !strings.HasPrefix(got, "trainable params: 2,178 || all params: ") {
		t.Errorf("report %q", got)
	}
	for _, c := range []struct {
		trainable, all int
		want           string
	}{
		{296450, 109780228, "trainable params: 296,450 || all params: 109,780,228 || trainable%: 0.2700"},
		{1234, 5678, "trainable params: 1,234 || all params: 5,678 || trainable%: 21.7330"},
		{0, 0, "trainable params: 0 || all params: 0 || trainable%: 0.0000"},
		{999, 1000, "trainable params: 999 || all params: 1,000 || trainable%: 99.9000"},
	} {
		if got := FormatTrainable(c.trainable, c.all); got != c.want {
			t.Errorf("FormatTrainable(%d, %d) = %q, want %q", c.trainable, c.all, got, c.want)
		}
	}
}
