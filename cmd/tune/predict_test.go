package main

import (
	"encoding/json"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
)

// TestPredictNonFiniteHint runs predict on models whose classifier bias is NaN, or finite but past FP16's
// range: NaN weights are a corrupt model in every precision (exit 2 naming the weight, tester 12: it was exit 1,
// "may work on a retry"); non-finite logits from finite weights are exit 1, naming the input line, and blame
// FP16's range only when --fp16 was used.
func TestPredictNonFiniteHint(t *testing.T) {
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	save := func(bias float32) string {
		model := filepath.Join(t.TempDir(), "m")
		cfg := bert.DefaultBertConfig()
		cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 16, 1, 2, 32
		cfg.MaxPositionEmbeddings = 64
		b := cpu.New()
		m, err := bert.NewBertForSequenceClassification(b, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, np := range m.NamedParameters() {
			if np.Name == "classifier.bias" {
				if err := b.Upload(np.Value, []float32{bias, 0}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := m.Save(model); err != nil {
			t.Fatal(err)
		}
		return model
	}
	nan, big := save(float32(math.NaN())), save(1e6)
	tests := []struct {
		name  string
		model string
		flag  string
		code  int
		want  string
		not   string
	}{
		{"NaN weights, FP32", nan, "", exitUsage, "the model's weights are non-finite (classifier.bias[0] = NaN, as loaded from " + nan + ")", "--fp16"},
		{"NaN weights, --fp16", nan, "--fp16", exitUsage, "the checkpoint is corrupt", "FP16 holds"},
		{"NaN weights, --bf16", nan, "--bf16", exitUsage, "`tune debug nan --model " + nan + "` lists every non-finite tensor", ""},
		{"finite weights past FP16's range, --fp16", big, "--fp16", exitError, "an FP16 overflow? FP16 holds at most 65504: try --bf16, or neither", "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"predict", "--device", "cpu", "--model", tt.model, "--tokenizer", tiny, "--input", filepath.Join(tiny, "dev.tsv")}
			if tt.flag != "" {
				args = append(args, tt.flag)
			}
			code, _, stderr := runCLI(args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, tt.code, tt.want)
			}
			if tt.code == exitError && !strings.Contains(stderr, "gave non-finite logits") {
				t.Errorf("stderr %q does not name the input line", stderr)
			}
			if tt.not != "" && strings.Contains(stderr, tt.not) {
				t.Errorf("stderr mentions %q: %s", tt.not, stderr)
			}
		})
	}
}

// TestPredictOutputNeverReplacesSilently checks --output: a new file is written; an existing one is refused
// untouched (exit 2) unless --force, which replaces it.
func TestPredictOutputNeverReplacesSilently(t *testing.T) {
	model, _ := tinyModelDir(t)
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	out := filepath.Join(t.TempDir(), "preds.jsonl")
	args := []string{"predict", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--input", filepath.Join(tiny, "dev.tsv"), "--output", out}
	steps := []struct {
		name     string
		extra    []string
		code     int
		stderr   string
		replaced bool // out holds predictions afterwards, not the user's text
	}{
		{"a new file is written", nil, exitOK, "", true},
		{"an existing file is refused", nil, exitUsage, "--output " + out + " already exists; pass --force", false},
		{"--force replaces it", []string{"--force"}, exitOK, "", true},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if i > 0 {
				if err := os.WriteFile(out, []byte("the user's file\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, _, stderr := runCLI(append(append([]string(nil), args...), st.extra...)...)
			if code != st.code || !strings.Contains(stderr, st.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, st.code, st.stderr)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(string(data), `{"line":2,`); got != st.replaced {
				t.Errorf("after the run the file starts %.40q; want predictions: %v", data, st.replaced)
			}
		})
	}
}

// TestPredictRegression runs predict on a regression model (num_labels 1): each line's label is the predicted
// value, the model's one logit (it failed with "problem_type regression needs float targets", tester4).
func TestPredictRegression(t *testing.T) {
	model := filepath.Join(t.TempDir(), "reg")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 16, 1, 2, 32
	cfg.MaxPositionEmbeddings = 64
	cfg.ID2Label = []string{"LABEL_0"}
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(model); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	code, stdout, stderr := runCLI("predict", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--input", filepath.Join(tiny, "dev.tsv"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var row struct {
		Label  float64   `json:"label"`
		Logits []float64 `json:"logits"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil || len(row.Logits) != 1 || row.Label != row.Logits[0] {
		t.Fatalf("first line %q (%v): want the predicted value as label, equal to the one logit", lines[0], err)
	}
}

// TestNonFiniteHintNamesDebugNaN: the hint for non-finite logits points at tune debug nan on the model (and its
// adapter), which scans the weights, never at tune inspect, which reads only the headers; a path a shell would
// split is quoted.
func TestNonFiniteHintNamesDebugNaN(t *testing.T) {
	for _, tc := range []struct {
		bf16           bool
		model, adapter string
		want           string
	}{
		{false, "runs/bert", "", "check them with `tune debug nan --model runs/bert`, which names the non-finite ones"},
		{true, "runs/bert", "runs/lora", "check them with `tune debug nan --model runs/bert --adapter runs/lora`, or try without --bf16"},
		{false, "/tmp/my model's", "", "`tune debug nan --model '/tmp/my model'\\''s'`"},
	} {
		got := nonFiniteHint(false, tc.bf16, tc.model, tc.adapter)
		if !strings.Contains(got, tc.want) || strings.Contains(got, "inspect") {
			t.Errorf("nonFiniteHint(%v, %q, %q) = %q; want %q", tc.bf16, tc.model, tc.adapter, got, tc.want)
		}
	}
}
