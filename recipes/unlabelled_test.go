package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// TestRowsWithoutLabelsAreRefused: a TSV row with an empty label field, or a JSONL "label": null, was read as
// unlabelled (IgnoreLabel) and silently left out of the loss and the metrics while it still counted as an
// example (tester4: "4000 training examples" trained on 2000; eval reported 500 examples and scored 250). A
// training or evaluation file (data.train, data.eval, data.test, tune eval's --data) must label every row, as
// transformers' Trainer needs; the error names the first unlabelled row, the label column or key and how many
// rows have none, and is bad input (exit 2: tester10 F2, tune eval exited 1). Prediction still reads files
// without labels.
func TestRowsWithoutLabelsAreRefused(t *testing.T) {
	for _, key := range []string{"data.train", "data.eval"} {
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			writeTSV(t, dir, "train.tsv", "pos", "neg", "pos", "neg")
			writeTSV(t, dir, "half.tsv", "pos", "", "neg", "")
			r := labelRecipe(t, dir, "")
			if key == "data.train" {
				r.Data.Train = filepath.Join(dir, "half.tsv")
			} else {
				r.Data.Eval = filepath.Join(dir, "half.tsv")
			}
			_, err := Build(r, cpu.New(), trainer.WithOutput(nil))
			if err == nil || !strings.Contains(err.Error(), key+": "+filepath.Join(dir, "half.tsv")+`:3: no label: the label column "label" is empty`) ||
				!strings.Contains(err.Error(), "2 of the file's 4 rows have no label") || !badinput.Is(err) {
				t.Errorf("empty labels in %s: %v", key, err)
			}
		})
	}
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "pos", "neg", "pos", "neg")
	out := trainLabelRecipe(t, labelRecipe(t, dir, ""))
	run, err := OpenModel(out, "", filepath.Join("data", "tiny"), cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	nulls := filepath.Join(dir, "n.jsonl")
	if err := os.WriteFile(nulls, []byte("{\"sentence\": \"a\", \"label\": \"pos\"}\n{\"sentence\": \"b\", \"label\": null}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run.LoadDataset("--data", nulls, Data{MaxLength: 32}, nil); err == nil || !strings.Contains(err.Error(), nulls+`:2: no label: the label key "label" is null`) || !badinput.Is(err) {
		t.Errorf(`"label": null in tune eval's --data: %v`, err)
	}
	if ds, err := run.LoadUnlabelled("--input", nulls, Data{MaxLength: 32}); err != nil || ds.Len() != 2 {
		t.Errorf("prediction reads the same file: %v", err)
	}
}

// TestNumberLabelsTakenAsNamesAreNoted (tester4): labels {1, positive}, {-1, 1} or {0, 1.5} are not all class ids,
// so every label becomes a name, sorted as strings ("1" trains as class 0) without a word, while an integer label
// is a class id wherever every label is one. Build notes it with the mapping; names alone and ids alone are
// not noted.
func TestNumberLabelsTakenAsNamesAreNoted(t *testing.T) {
	for _, c := range []struct {
		labels []string
		want   string // "" for no note
	}{
		{[]string{"1", "positive"}, `has number labels ("1") but not only class ids 0..1, so every label is taken as a name and the names are sorted as strings: "1" → class 0, "positive" → class 1`},
		{[]string{"-1", "1"}, `"-1" → class 0, "1" → class 1`},
		{[]string{"0", "1.5"}, `"0" → class 0, "1.5" → class 1`},
		{[]string{"neg", "pos"}, ""},
		{[]string{"0", "1"}, ""},
	} {
		dir := t.TempDir()
		writeTSV(t, dir, "train.tsv", c.labels...)
		run, err := Build(labelRecipe(t, dir, ""), cpu.New(), trainer.WithOutput(nil))
		if err != nil {
			t.Fatal(err)
		}
		run.Trainer.Close()
		notes := strings.Join(run.Notices, "\n")
		if c.want == "" && strings.Contains(notes, "number labels") || c.want != "" && !strings.Contains(notes, c.want) {
			t.Errorf("labels %q: notices %q, want %q", c.labels, run.Notices, c.want)
		}
	}
}
