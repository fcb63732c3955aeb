package recipes

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// namedCheckpoint saves, under dir, an untrained 2-class model whose config.json names its classes id2label
// {0: pos, 1: neg}, and returns its directory.
func namedCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	writeTSV(t, dir, "train.tsv", "0", "1")
	run, err := Build(labelRecipe(t, dir, ""), cpu.New(), trainer.WithOutput(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Trainer.Close()
	run.Base.Config.ID2Label = []string{"pos", "neg"}
	ckpt := filepath.Join(dir, "named")
	if err := run.Base.Save(ckpt); err != nil {
		t.Fatal(err)
	}
	return ckpt
}

// TestCheckpointLabelsFollowTheData fine-tunes a checkpoint whose labels are named (pos, neg) on training files
// with other label sets, as transformers' run_glue does: a label set the model does not name replaces the
// model's (sorted, with a notice; the classifier re-initialised when num_labels changes), while the same set,
// a subset or class ids keep the model's mapping, and a difference of case only keeps the model's order.
func TestCheckpointLabelsFollowTheData(t *testing.T) {
	dir := t.TempDir()
	ckpt := namedCheckpoint(t, dir)
	tests := []struct {
		name    string
		labels  []string // the training file's labels, row by row
		want    []string // the model's id2label after Build
		ids     []int64  // the label ids of the training rows
		notices []string // substrings each of some notice; nil: no notice about labels
	}{
		{"a new label set of the same size replaces the model's", []string{"positive", "negative", "positive"},
			[]string{"negative", "positive"}, []int64{1, 0, 1},
			[]string{`the model's labels ["pos" "neg"] (model.path `,
				`) differ from the data's ["negative" "positive"] (data.train `,
				"); training uses the data's labels", "the classifier keeps its weights"}},
		{"three labels: num_labels 3 and a new classifier", []string{"positive", "neutral", "negative"},
			[]string{"negative", "neutral", "positive"}, []int64{2, 1, 0},
			[]string{`differ from the data's ["negative" "neutral" "positive"]`, "num_labels becomes 3",
				"newly initialized: classifier.weight, classifier.bias"}},
		{"the same set keeps the model's mapping", []string{"pos", "neg", "neg"},
			[]string{"pos", "neg"}, []int64{0, 1, 1}, nil},
		{"a subset keeps the model's mapping", []string{"neg", "neg"}, []string{"pos", "neg"}, []int64{1, 1}, nil},
		{"class ids keep the model's mapping", []string{"1", "0"}, []string{"pos", "neg"}, []int64{1, 0}, nil},
		{"a difference of case keeps the model's order", []string{"NEG", "POS"}, []string{"POS", "NEG"}, []int64{1, 0},
			[]string{`the model's labels ["pos" "neg"] (model.path `, `) match the data's ["NEG" "POS"] (data.train `,
				") but for case"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			writeTSV(t, d, "train.tsv", tt.labels...)
			r := labelRecipe(t, d, "")
			r.Model.Config, r.Model.Path = nil, ckpt
			run, err := Build(r, cpu.New(), trainer.WithOutput(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer run.Trainer.Close()
			if got := run.Base.Config.ID2Label; !slices.Equal(got, tt.want) {
				t.Errorf("id2label %q, want %q", got, tt.want)
			}
			var ids []int64
			for _, e := range run.Train.Examples {
				ids = append(ids, e.Label)
			}
			if !slices.Equal(ids, tt.ids) {
				t.Errorf("training label ids %v, want %v", ids, tt.ids)
			}
			t.Logf("notices: %q", run.Notices)
			all := strings.Join(run.Notices, "\n")
			for _, w := range tt.notices {
				if !strings.Contains(all, w) {
					t.Errorf("notices %q\nlack %q", run.Notices, w)
				}
			}
			if tt.notices == nil && strings.Contains(all, "labels") {
				t.Errorf("unexpected notice about labels: %q", run.Notices)
			}
		})
	}
}

// TestRelabelledModelIsStrictInEval trains the named checkpoint on positive/negative, then opens the saved
// model as eval and predict do: its labels are the data's, and a label outside them (the checkpoint's old
// "pos") is an error naming file:line and the known labels, not a new mapping.
func TestRelabelledModelIsStrictInEval(t *testing.T) {
	dir := t.TempDir()
	ckpt := namedCheckpoint(t, dir)
	d := t.TempDir()
	writeTSV(t, d, "train.tsv", "positive", "negative", "positive", "negative")
	r := labelRecipe(t, d, "")
	r.Model.Config, r.Model.Path = nil, ckpt
	out := trainLabelRecipe(t, r)
	if got := savedLabels(t, out); !slices.Equal(got, []string{"negative", "positive"}) {
		t.Errorf("saved id2label %q, want [negative positive]", got)
	}
	run, err := OpenModel(out, "", r.Tokenizer.Path, cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	bad := writeTSV(t, d, "dev.tsv", "positive", "pos")
	_, err = run.LoadDataset("--data", bad, r.Data, nil)
	if err == nil || !strings.Contains(err.Error(), bad+":3") || !strings.Contains(err.Error(), `unknown label "pos"`) ||
		!strings.Contains(err.Error(), `"negative", "positive"`) {
		t.Errorf("error %v; want it to name %s:3, the label pos and the known labels negative, positive", err, bad)
	}
}
