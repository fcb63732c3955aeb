package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// tinyRecipe is the repository's tiny recipe, relative to this package's directory.
var tinyRecipe = filepath.Join("..", "..", "recipes", "tiny.yaml")

// tinyCheckpoint trains the tiny recipe for one step (no evaluation, no checkpoints) into a temporary
// directory and returns it: a small saved model (config.json, model.safetensors, vocab.txt) for the tests of
// commands that read one.
func tinyCheckpoint(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ckpt")
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out,
		"training.max_steps=1", "training.eval_strategy=no", "training.save_strategy=no")
	if code != exitOK {
		t.Fatalf("finetune exit %d\n%s\n%s", code, stdout, stderr)
	}
	return out
}

// runCLI runs the tune CLI in-process and returns its exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestFinetuneUsageErrors(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	text, err := os.ReadFile(tinyRecipe)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(filepath.Dir(tinyRecipe))
	bad := strings.Replace(string(text), "  learning_rate: 1e-3", "  learnig_rate: 1e-3", 1)
	bad = strings.ReplaceAll(bad, "data/tiny", filepath.Join(abs, "data", "tiny"))
	if err := os.WriteFile(typo, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	// A copy of the tiny tokenizer, so that a regression in the output_dir checks cannot touch the repository.
	tokCopy := filepath.Join(dir, "tok")
	if err := os.MkdirAll(tokCopy, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vocab.txt", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(abs, "data", "tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tokCopy, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prev := filepath.Join(dir, "prev") // a previous run's output_dir
	if err := os.MkdirAll(prev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prev, "trainer_state.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		stderr []string // fragments
	}{
		{"an output_dir holding a run says the recipe keys to set", []string{"finetune", tinyRecipe, "training.output_dir=" + prev},
			[]string{"training.output_dir " + prev + " already holds a training run or model files (trainer_state.json); " +
				"set training.overwrite_output_dir=true to replace what a tune run wrote there, " +
				"training.resume_from_checkpoint=true to continue that run, or choose another training.output_dir"}},
		{"a typo names the key, its line and the closest valid key", []string{"finetune", typo, "training.output_dir=" + out},
			[]string{"learnig_rate", "learning_rate", "typo.yaml:"}},
		{"--fp16 and --bf16 together", []string{"finetune", "--fp16", "--bf16", tinyRecipe, "training.output_dir=" + out},
			[]string{"--fp16 and --bf16"}},
		{"fp16 and bf16 both set in overrides", []string{"finetune", tinyRecipe, "training.fp16=true", "training.bf16=true", "training.output_dir=" + out},
			[]string{"fp16 and bf16"}},
		{"a non-finite learning rate", []string{"finetune", tinyRecipe, "training.learning_rate=.inf", "training.output_dir=" + out},
			[]string{"learning_rate"}},
		{"an override without '='", []string{"finetune", tinyRecipe, "training.learning_rate"},
			[]string{"key=value"}},
		{"no recipe", []string{"finetune"}, []string{"needs a RECIPE"}},
		{"an unknown device", []string{"finetune", "--device", "tpu", tinyRecipe, "training.output_dir=" + out},
			[]string{"device"}},
		{"a bad --device is reported as the flag, not as an override", []string{"finetune", "--device", "cuda:x", tinyRecipe, "training.output_dir=" + out},
			[]string{"tune: --device cuda:x: must be auto, cpu, cuda or cuda:N"}},
		{"output_dir is the tokenizer's folder", []string{"finetune", tinyRecipe, "tokenizer.path=" + tokCopy, "training.output_dir=" + tokCopy, "training.overwrite_output_dir=true"},
			[]string{"training.output_dir", "would overwrite what tokenizer.path reads"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(tt.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d (usage); stderr:\n%s", code, exitUsage, stderr)
			}
			for _, f := range tt.stderr {
				if !strings.Contains(stderr, f) {
					t.Errorf("stderr lacks %q:\n%s", f, stderr)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the failed run created %s", out)
			}
		})
	}
}

// TestFinetuneEvalPredictEndToEnd trains the tiny recipe for a few steps through the CLI, then evaluates and
// predicts with the saved model.
func TestFinetuneEvalPredictEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out,
		"training.max_steps=30", "training.logging_steps=10", "training.eval_strategy=steps", "training.eval_steps=30",
		"training.save_strategy=steps", "training.save_steps=30")
	if code != exitOK {
		t.Fatalf("finetune exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"device: cpu", "precision: fp32", "trainable params: 91,970 || all params: 91,970 || trainable%: 100.0000",
		"step 30/30", "eval:  accuracy", "outputs in " + out, "checkpoint-30"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("finetune output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"config.json", "model.safetensors", "vocab.txt", "metrics.jsonl", "trainer_state.json", "training_curve.png",
		"train_results.json", "eval_results.json", "all_results.json",
		filepath.Join("checkpoint-30", "optimizer.safetensors")} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output %s missing", f)
		}
	}

	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	code, stdout, stderr = runCLI("eval", "--json", "--device", "cpu", "--model", out, "--data", dev)
	if code != exitOK {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	var m map[string]float64
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("eval --json printed %q: %v", stdout, err)
	}
	if m["eval_accuracy"] < 0 || m["eval_accuracy"] > 1 || m["eval_loss"] <= 0 {
		t.Errorf("eval metrics %v", m)
	}

	preds := filepath.Join(t.TempDir(), "preds.jsonl")
	code, _, stderr = runCLI("predict", "--device", "cpu", "--model", out, "--input", dev, "--output", preds)
	if code != exitOK {
		t.Fatalf("predict exit %d: %s", code, stderr)
	}
	f, err := os.Open(preds)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, correct := 0, 0
	labels := devLabels(t, dev)
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var p struct {
			Line    int       `json:"line"`
			Label   string    `json:"label"`
			LabelID int       `json:"label_id"`
			Logits  []float64 `json:"logits"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("prediction %d: %v", n+1, err)
		}
		if len(p.Logits) != 2 || p.Line != n+2 || p.Label != []string{"LABEL_0", "LABEL_1"}[p.LabelID] {
			t.Fatalf("prediction %d: %+v", n+1, p)
		}
		if p.LabelID == labels[n] {
			correct++
		}
	}
	if n != len(labels) {
		t.Fatalf("%d predictions for %d inputs", n, len(labels))
	}
	// The predictions are the ones eval scored.
	if acc := float64(correct) / float64(n); acc != m["eval_accuracy"] {
		t.Errorf("accuracy of the predictions %v, eval_accuracy %v", acc, m["eval_accuracy"])
	}
}

// devLabels reads the label column of a sentence<TAB>label file.
func devLabels(t *testing.T, path string) []int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i == 0 {
			continue
		}
		out = append(out, int(line[len(line)-1]-'0'))
	}
	return out
}

func TestEvalPredictUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"eval without a recipe or a model", []string{"eval"}, "RECIPE or --model"},
		{"eval with both half precisions", []string{"eval", "--model", "x", "--fp16", "--bf16"}, "exclusive"},
		{"predict without a model", []string{"predict", "--input", "x.tsv"}, "--model"},
		{"predict without an input", []string{"predict", "--model", "x"}, "--input"},
		{"predict with positional arguments", []string{"predict", "x"}, "flags only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, exitUsage, tt.want)
			}
		})
	}
}

// TestLoRAFinetuneThenEvalWithAdapter trains LoRA adapters (recipes/bert.yaml) on tiny-bert-random for a few
// steps, then evaluates the base model with the saved adapter: the metrics equal the run's final evaluation.
func TestLoRAFinetuneThenEvalWithAdapter(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	base := testutil.SharedData(t, "tiny-bert-random")
	data := filepath.Join("..", "..", "recipes", "data", "tiny")
	out := filepath.Join(t.TempDir(), "lora")
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", filepath.Join("..", "..", "recipes", "bert.yaml"),
		"model.path="+base, "data.train="+filepath.Join(data, "train.tsv"), "data.eval="+filepath.Join(data, "dev.tsv"),
		"data.max_length=64", "training.output_dir="+out, "training.max_steps=6", "training.bf16=false",
		"training.eval_strategy=steps", "training.eval_steps=6", "training.save_strategy=no")
	if code != exitOK {
		t.Fatalf("finetune exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "trainable params: 4,226 || all params: 2,061,892 || trainable%: 0.2050") {
		t.Errorf("no PEFT parameter line for r=8 on query/value plus the classifier:\n%s", stdout)
	}
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s missing from the LoRA output", f)
		}
	}
	code, stdout, stderr = runCLI("eval", "--json", "--device", "cpu", "--model", base, "--adapter", out,
		"--data", filepath.Join(data, "dev.tsv"), "--batch-size", "128")
	if code != exitOK {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	var got map[string]float64
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		LogHistory []map[string]float64 `json:"log_history"`
	}
	if err := json.Unmarshal(state, &st); err != nil {
		t.Fatal(err)
	}
	var final map[string]float64
	for _, l := range st.LogHistory {
		if _, ok := l["eval_loss"]; ok {
			final = l
		}
	}
	if final == nil || final["eval_loss"] != got["eval_loss"] || final["eval_accuracy"] != got["eval_accuracy"] {
		t.Errorf("eval with the saved adapter gives %v; the run's final evaluation was %v", got, final)
	}
}

// TestFinetuneHelpNamesGraphsAndSIGTERM: finetune's help shows --cuda-graphs in its usage line, as README's
// command table does, and says SIGTERM stops a run as Ctrl-C does, with both exit statuses (findings6).
func TestFinetuneHelpNamesGraphsAndSIGTERM(t *testing.T) {
	code, out, _ := runCLI("finetune", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"tune finetune [--fp16|--bf16] [--cuda-graphs] ", "Ctrl-C (SIGINT) or SIGTERM", "130 or 143"} {
		if !strings.Contains(out, w) {
			t.Errorf("finetune --help lacks %q:\n%s", w, out)
		}
	}
}
