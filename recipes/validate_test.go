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
