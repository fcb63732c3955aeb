package recipes

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// TestLabelCountErrors checks what Build says when the training file's labels do not fit num_labels (2):
// integer labels are class ids, so {1, 2} is reported as the label 2 outside 0..1 with its file:line and the
// labels the file holds, not as three labels 0, 1, 2; string labels are counted and listed.
func TestLabelCountErrors(t *testing.T) {
	tests := []struct {
		name     string
		labels   []string
		want     []string // substrings of the error; FILE stands for the training file
		unwanted []string
	}{
		{"integer labels 1 and 2", []string{"1", "2", "1", "2"},
			[]string{"data.train: label 2 at FILE:3 is outside 0..1 for a model with num_labels 2",
				"integer labels are class ids 0..num_labels-1", "the file's labels are 1, 2", "model.config.num_labels"},
			[]string{"3 labels", "[0 1 2]"}},
		{"an integer label far beyond num_labels", []string{"0", "1", "0", "7"},
			[]string{"label 7 at FILE:5 is outside 0..1", "the file's labels are 0, 1, 7"}, []string{"8 labels"}},
		{"three string labels", []string{"a", "b", "c", "a"},
			[]string{`data.train: FILE:4: label "c" does not fit: FILE has 3 labels "a", "b", "c" but the model has num_labels 2`},
			[]string{"[a b c]"}},
		{"class ids and a name", []string{"0", "1", "1", "banana", "0", "banana"},
			[]string{`data.train: FILE:5: label "banana" does not fit: FILE has 3 labels "0", "1", "banana"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			train := writeTSV(t, dir, "train.tsv", tt.labels...)
			_, err := Build(labelRecipe(t, dir, ""), cpu.New(), trainer.WithOutput(nil))
			if err == nil {
				t.Fatal("Build accepted labels that do not fit num_labels 2")
			}
			if !badinput.Is(err) {
				t.Errorf("error %q is not marked bad input (exit 2)", err)
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "FILE", train); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			for _, u := range tt.unwanted {
				if strings.Contains(err.Error(), u) {
					t.Errorf("error %q\ncontains %q", err, u)
				}
			}
		})
	}
}

// TestEvalTakesEveryClassID checks that an eval file may hold a class id the training file lacks: with
// num_labels 3 and training labels {0, 1}, the eval label 2 is class 2 (integer labels are class ids
// 0..num_labels-1), while a string label is still refused with its file:line.
func TestEvalTakesEveryClassID(t *testing.T) {
	tests := []struct {
		name    string
		labels  []string
		want    []int64 // nil: an error containing wantErr
		wantErr string
	}{
		{"class 2, absent from training", []string{"2", "0"}, []int64{2, 0}, ""},
		{"a class beyond num_labels", []string{"3"}, nil, "eval.tsv:2: label 3 is outside the class ids 0..2 (num_labels 3)"},
		{"a string label", []string{"1", "pos"}, nil, `eval.tsv:3: unknown label "pos"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTSV(t, dir, "train.tsv", "0", "1", "1", "0")
			writeTSV(t, dir, "eval.tsv", tt.labels...)
			r := labelRecipe(t, dir, "")
			r.Model.Config.NumLabels = 3
			r.Data.Eval = filepath.Join(dir, "eval.tsv")
			run, err := Build(r, cpu.New(), trainer.WithOutput(nil))
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer run.Trainer.Close()
			var got []int64
			for _, e := range run.Eval.Examples {
				got = append(got, e.Label)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("eval label ids %v, want %v", got, tt.want)
			}
		})
	}
}
