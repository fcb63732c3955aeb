package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricForBestModel: a metric_for_best_model the evaluation does not report is caught when the recipe is
// loaded (not after the first evaluation), with the closest name; the names it reports pass, with or without
// the eval_ prefix.
func TestMetricForBestModel(t *testing.T) {
	scratch := func(extra string) string {
		return "model:\n  config:\n    num_labels: 1\ntokenizer:\n  path: v.txt\ndata:\n  train: a.tsv\n" + extra
	}
	for _, c := range []struct {
		name      string
		text      string
		overrides []string
		want      string // error fragment; "" means valid
	}{
		{"a typo in the file", minimal("training:\n  metric_for_best_model: acuracy\n"), nil,
			`r.yaml:6: training.metric_for_best_model: "acuracy" is not a metric the evaluation reports (loss, accuracy, f1, matthews_correlation, with or without the eval_ prefix); did you mean "accuracy"?`},
		{"a typo with the eval_ prefix keeps the prefix in the suggestion", minimal(""), []string{"training.metric_for_best_model=eval_f2"},
			`override training.metric_for_best_model=eval_f2: training.metric_for_best_model: "eval_f2" is not a metric`},
		{"the suggestion for eval_f2", minimal(""), []string{"training.metric_for_best_model=eval_f2"}, `did you mean "eval_f1"?`},
		{"a name far from every metric lists them", minimal(""), []string{"training.metric_for_best_model=bleu"},
			`"bleu" is not a metric the evaluation reports (loss, accuracy, f1, matthews_correlation, with or without the eval_ prefix)`},
		{"a regression model reports only the loss", scratch(""), []string{"training.metric_for_best_model=accuracy"},
			`"accuracy" is not a metric the evaluation of a regression model (num_labels 1) reports (loss, with or without the eval_ prefix)`},
		{"accuracy", minimal("training:\n  metric_for_best_model: accuracy\n"), nil, ""},
		{"eval_matthews_correlation", minimal(""), []string{"training.metric_for_best_model=eval_matthews_correlation"}, ""},
		{"eval_loss", minimal(""), []string{"training.metric_for_best_model=eval_loss"}, ""},
		{"empty means the loss", minimal(""), []string{"training.metric_for_best_model="}, ""},
		{"the loss of a regression model", scratch(""), []string{"training.metric_for_best_model=loss"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(c.text, c.overrides...)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

// TestCheckFilesOutputDir: an output_dir that is an existing file, or lies below one, is reported by CheckFiles
// (so tune validate and tune finetune refuse it before loading anything) and the file is left alone.
func TestCheckFilesOutputDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "precious.txt")
	if err := os.WriteFile(file, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, outputDir, want string
	}{
		{"a file", file, "training.output_dir: " + file + " is a file, not a directory"},
		{"a directory below a file", filepath.Join(file, "run"), "training.output_dir: " + file + " is a file, not a directory"},
		{"a new directory", filepath.Join(dir, "new", "run"), ""},
		{"an existing directory", dir, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Default()
			r.Source = "r.yaml"
			r.Training.OutputDir = c.outputDir
			err := r.CheckFiles()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me\n" {
		t.Errorf("the file was changed: %q", b)
	}
}

// TestModelSizes: sizes that would make the Go runtime abort with "out of memory" when the model is built are
// refused while the recipe is validated, naming the key and its line or override: in model.config, and in a
// checkpoint's config.json (CheckFiles).
func TestModelSizes(t *testing.T) {
	scratch := func(extra string) string {
		return "model:\n  config:\n    hidden_size: 64\n    num_attention_heads: 4\n" + extra +
			"tokenizer:\n  path: v.txt\ndata:\n  train: a.tsv\n"
	}
	for _, c := range []struct {
		name      string
		text      string
		overrides []string
		want      string // error fragment; "" means valid
	}{
		{"vocab_size beyond 32 bits in an override", scratch(""), []string{"model.config.vocab_size=3000000000"},
			"override model.config.vocab_size=3000000000: model.config.vocab_size: 3000000000 is more than 2147483647"},
		{"100000 layers in the file", scratch("    num_hidden_layers: 100000\n"), nil,
			"r.yaml:5: model.config.num_hidden_layers: 100000 makes a model of 4.13e+10 parameters"},
		{"a vocabulary that fits 32 bits but makes 6.4e10 parameters", scratch(""), []string{"model.config.vocab_size=1000000000"},
			"model.config.vocab_size: 1000000000 makes a model of 6.4e+10 parameters"},
		{"a large but real model", scratch(""), []string{"model.config.hidden_size=1024", "model.config.num_hidden_layers=24", "model.config.num_attention_heads=16", "model.config.intermediate_size=4096"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(c.text, c.overrides...)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
	t.Run("a checkpoint's config.json", func(t *testing.T) {
		dir := t.TempDir()
		cfg := `{"model_type": "bert", "vocab_size": 3000000000}`
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		r := Default()
		r.Source, r.Model.Path = "r.yaml", dir
		err := r.CheckFiles()
		want := "model.path: " + filepath.Join(dir, "config.json") + ": vocab_size: 3000000000 is more than 2147483647"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error\n%v\nwant\n%s", err, want)
		}
	})
}

// TestPadToMultipleOfWithinPositions (tester4): data.pad_to_multiple_of was not checked against the positions
// the model has, so `tune validate tiny data.pad_to_multiple_of=1000` passed and finetune failed at step 1
// ("sequence length 1000 exceeds max_position_embeddings 64; truncate ..."). A multiple that pads a batch of
// data.max_length tokens past max_position_embeddings (model.config's, or config.json's for model.path) is
// refused naming the key; one that fits is not.
func TestPadToMultipleOfWithinPositions(t *testing.T) {
	_, err := Load("tiny", []string{"data.pad_to_multiple_of=1000"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(),
		"data.pad_to_multiple_of: 1000 pads a batch of data.max_length 64 tokens to 1000, beyond model.config.max_position_embeddings 64") {
		t.Errorf("tiny, 1000: %v", err)
	}
	for _, ok := range []string{"0", "1", "8", "64"} {
		if _, err := Load("tiny", []string{"data.pad_to_multiple_of=" + ok}); err != nil {
			t.Errorf("tiny, %s: %v", ok, err)
		}
	}
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0")
	r := labelRecipe(t, dir, "lora:\n  r: 2\n") // model.path: a checkpoint with 32 positions
	r.Data.MaxLength, r.Data.PadToMultipleOf = 20, 40
	if err := r.CheckFiles(); err == nil || !strings.Contains(err.Error(), "40 pads a batch of data.max_length 20 tokens to 40, beyond the model's max_position_embeddings") {
		t.Errorf("model.path, 40: %v", err)
	}
	r.Data.PadToMultipleOf = 16
	if err := r.CheckFiles(); err != nil {
		t.Errorf("model.path, 16: %v", err)
	}
}

// TestLoRATaskTypeFitsTheModel (tester4): lora.task_type CAUSAL_LM on a BERT sequence classifier was accepted and
// written to adapter_config.json (modules_to_save null), so PEFT's AutoPeftModel would build a causal-LM wrapper
// around a classifier. A task_type that does not fit the recipe's model is refused naming the one that does.
func TestLoRATaskTypeFitsTheModel(t *testing.T) {
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0")
	_, err := Decode([]byte(labelRecipeText(t, dir, "lora:\n  r: 2\n  task_type: CAUSAL_LM\n")), filepath.Join(dir, "r.yaml"), dir, nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lora.task_type: CAUSAL_LM does not fit a BERT sequence classifier, whose adapters PEFT loads with task_type SEQ_CLS") {
		t.Errorf("CAUSAL_LM on BERT: %v", err)
	}
	_, err = Load("tiny-chat", []string{"lora.r=8", "lora.task_type=SEQ_CLS", "training.output_dir=" + t.TempDir()})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lora.task_type: SEQ_CLS does not fit a causal language model") {
		t.Errorf("SEQ_CLS on a causal LM: %v", err)
	}
	for _, ok := range [][]string{{"lora.r=8", "lora.task_type=CAUSAL_LM"}, {"lora.r=8"}} {
		if _, err := Load("tiny-chat", append(ok, "training.output_dir="+t.TempDir())); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}
