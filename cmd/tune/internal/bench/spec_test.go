package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

func TestModelConfig(t *testing.T) {
	for _, tc := range []struct {
		name          string
		l, c, h, i, v int
	}{
		{"tiny", 2, 64, 4, 128, 30522},
		{"mini", 4, 256, 4, 1024, 30522},
		{"bert-base", 12, 768, 12, 3072, 30522},
		{"bert-large", 24, 1024, 16, 4096, 30522},
	} {
		t.Run(tc.name+" has its preset shape and BERT's dropout", func(t *testing.T) {
			c, err := ModelConfig(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if c.NumHiddenLayers != tc.l || c.HiddenSize != tc.c || c.NumAttentionHeads != tc.h || c.IntermediateSize != tc.i ||
				c.VocabSize != tc.v || c.HiddenDropoutProb != 0.1 || c.NumLabels() != 2 {
				t.Errorf("%+v", c)
			}
		})
	}
	t.Run("an unknown name lists the presets", func(t *testing.T) {
		_, err := ModelConfig("bert-huge")
		if err == nil || !strings.Contains(err.Error(), "tiny, mini, small, bert-base, bert-large") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("a config.json path is read as transformers writes it", func(t *testing.T) {
		c, err := ModelConfig(testutil.SharedData(t, "tiny-bert-random", "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if c.HiddenSize != 64 || c.NumHiddenLayers != 2 || c.HiddenDropoutProb != 0 {
			t.Errorf("%+v", c)
		}
	})
	t.Run("a missing config.json names the file", func(t *testing.T) {
		if _, err := ModelConfig("/nonexistent/config.json"); err == nil || !strings.Contains(err.Error(), "/nonexistent/config.json") {
			t.Errorf("err %v", err)
		}
	})
}

func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"median of an even count interpolates", []float64{4, 1, 3, 2}, 50, 2.5},
		{"p10 of four values (numpy: 1.3)", []float64{4, 1, 3, 2}, 10, 1.3},
		{"p90 of four values (numpy: 3.7)", []float64{4, 1, 3, 2}, 90, 3.7},
		{"p0 and p100 are the extremes", []float64{5, 9, 7}, 100, 9},
		{"one value is every percentile", []float64{3}, 10, 3},
		{"empty input is NaN", nil, 50, math.NaN()},
		{"q above 100 is NaN", []float64{1}, 101, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.xs...)
			got := Percentile(tc.xs, tc.q)
			if !(math.Abs(got-tc.want) < 1e-12 || math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.xs[i] {
					t.Fatalf("input reordered: %v", tc.xs)
				}
			}
		})
	}
}

// TestValidateLoRATargets: a --lora-targets name that no module of the model has is refused by Validate, before
// anything is built, for BERT and for a decoder; the family's own names and all-linear pass.
func TestValidateLoRATargets(t *testing.T) {
	for _, c := range []struct {
		model   string
		targets []string
		bad     string
	}{
		{"bert-base", []string{"query", "value"}, ""},
		{"bert-base", []string{"query", "vlaue"}, `"value"`},
		{"smollm2-135m", []string{"all-linear"}, ""},
		{"smollm2-135m", []string{"q_proj", "v_proj"}, ""},
		{"smollm2-135m", []string{"q_prj"}, `"q_proj"`},
	} {
		s := DefaultSpec()
		if err := s.SetModel(c.model); err != nil {
			t.Fatal(err)
		}
		lc := s.LoRAFor(8, 16, c.targets)
		s.LoRA = &lc
		err := s.Validate()
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s %v: %v", c.model, c.targets, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s %v: got %v, want a refusal suggesting %s", c.model, c.targets, err, c.bad)
		}
	}
}
