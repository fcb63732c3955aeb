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

// TestPredictNonFiniteHint runs predict on a model whose classifier bias is NaN: the error names the input line
// and blames the weights, and mentions --fp16 only when it was used.
func TestPredictNonFiniteHint(t *testing.T) {
	model := filepath.Join(t.TempDir(), "nan")
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
			if err := b.Upload(np.Value, []float32{float32(math.NaN()), 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Save(model); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	base := []string{"predict", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--input", filepath.Join(tiny, "dev.tsv")}
	tests := []struct {
		name string
		flag string
		want string
		not  string
	}{
		{"FP32: the weights, not --fp16", "", "the model's weights are likely non-finite", "--fp16"},
		{"--fp16: FP16's range", "--fp16", "an FP16 overflow? FP16 holds at most 65504: try --bf16, or neither", ""},
		{"--bf16: the weights", "--bf16", "BF16 has FP32's range", "--fp16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := base
			if tt.flag != "" {
				args = append(append([]string(nil), base...), tt.flag)
			}
			code, _, stderr := runCLI(args...)
			if code != exitError || !strings.Contains(stderr, "input at line 2 gave non-finite logits") || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, exitError, tt.want)
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
