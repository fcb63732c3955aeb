package recipes

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer/bert"
)

// labelRecipe is a recipe that trains a 1-layer BERT (hidden 16) for one step on train.tsv in dir, with the
// repository's tiny tokenizer, saving a checkpoint at that step; extra is appended (a lora: section).
func labelRecipe(t *testing.T, dir, extra string) *Recipe {
	t.Helper()
	r, err := Decode([]byte(labelRecipeText(t, dir, extra)), filepath.Join(dir, "r.yaml"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// labelRecipeText is labelRecipe's YAML.
func labelRecipeText(t *testing.T, dir, extra string) string {
	t.Helper()
	tok, err := filepath.Abs(filepath.Join("data", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	model := `model:
  config:
    vocab_size: 256
    hidden_size: 16
    num_hidden_layers: 1
    num_attention_heads: 2
    intermediate_size: 32
    max_position_embeddings: 32
    num_labels: 2
`
	if strings.Contains(extra, "lora:") { // LoRA trains on a checkpoint: the same model, saved
		model = "model:\n  path: " + loraBase(t, dir) + "\n"
	}
	text := model + `tokenizer:
  path: ` + tok + `
data:
  train: train.tsv
  max_length: 32
training:
  output_dir: ` + filepath.Join(dir, "out") + `
  max_steps: 1
  per_device_train_batch_size: 4
  save_strategy: steps
  save_steps: 1
device: cpu
` + extra
	return text
}

// loraBase saves the untrained model of labelRecipe's model.config (1 layer, hidden 16, 2 labels) into
// dir/lora-base, once, and returns that directory: the base of its LoRA recipes (LoRA needs a checkpoint).
func loraBase(t *testing.T, dir string) string {
	t.Helper()
	base := filepath.Join(dir, "lora-base")
	if _, err := os.Stat(base); err == nil {
		return base
	}
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 16, 1, 2, 32
	cfg.MaxPositionEmbeddings = 32
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(base); err != nil {
		t.Fatal(err)
	}
	return base
}

// writeTSV writes sentence<TAB>label rows (a header first) into dir/name and returns its path.
func writeTSV(t *testing.T, dir, name string, labels ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("sentence\tlabel\n")
	for i, l := range labels {
		b.WriteString([]string{"the film was good", "a dull film", "really funny", "not good"}[i%4] + "\t" + l + "\n")
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// trainLabelRecipe builds and trains r, saves the model into its output_dir and returns that directory.
func trainLabelRecipe(t *testing.T, r *Recipe) string {
	t.Helper()
	run, err := Build(r, cpu.New(), trainer.WithOutput(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Trainer.Close()
	if _, err := run.Trainer.Train(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := run.Trainer.SaveModel(r.Training.OutputDir); err != nil {
		t.Fatal(err)
	}
	return r.Training.OutputDir
}

// savedLabels reads id2label (in id order) from dir/config.json.
func savedLabels(t *testing.T, dir string) []string {
	t.Helper()
	c, err := loaders.ReadBertConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, c.NumLabels())
	for i := range names {
		names[i] = c.ID2Label[i]
	}
	return names
}

// TestTextLabelsAreSaved trains on a file labelled pos/neg and checks that config.json (of the model, of the
// LoRA adapter's directory, and of the checkpoint) names them as run_glue does, and that a trained model's
// mapping, not the evaluated file's, decides the label ids.
func TestTextLabelsAreSaved(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string
		files []string // what the output directory must hold
	}{
		{"full fine-tuning", "", []string{"model.safetensors"}},
		{"LoRA", "lora:\n  r: 2\n  target_modules: [query, value]\n  task_type: SEQ_CLS\n", []string{"adapter_config.json", "adapter_model.safetensors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTSV(t, dir, "train.tsv", "pos", "neg", "pos", "neg")
			r := labelRecipe(t, dir, tc.extra)
			out := trainLabelRecipe(t, r)
			for _, d := range []string{out, filepath.Join(out, "checkpoint-1")} {
				if got := savedLabels(t, d); !slices.Equal(got, []string{"neg", "pos"}) {
					t.Errorf("%s/config.json id2label %q, want [neg pos]", d, got)
				}
				for _, f := range tc.files {
					if _, err := os.Stat(filepath.Join(d, f)); err != nil {
						t.Errorf("%s lacks %s", d, f)
					}
				}
			}
			model, adapter := out, ""
			if r.LoRA != nil { // a base model saved from the same recipe, untrained, with placeholder labels
				base := filepath.Join(dir, "base")
				run, err := Build(labelRecipe(t, dir, ""), cpu.New(), trainer.WithOutput(nil))
				if err != nil {
					t.Fatal(err)
				}
				run.Base.Config.ID2Label = []string{"LABEL_0", "LABEL_1"}
				if err := run.Base.Save(base); err != nil {
					t.Fatal(err)
				}
				run.Trainer.Close()
				model, adapter = base, out
			}
			run, err := OpenModel(model, adapter, r.Tokenizer.Path, cpu.New())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(run.Base.Config.ID2Label, []string{"neg", "pos"}) {
				t.Errorf("the opened model's labels are %q, want [neg pos]", run.Base.Config.ID2Label)
			}
			// A file with only "pos" rows: every label is id 1, as in training, not id 0 of its own sorting.
			ds, err := run.LoadDataset("--data", writeTSV(t, dir, "dev.tsv", "pos", "pos"), r.Data, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ds.Examples {
				if e.Label != 1 {
					t.Errorf("line %d: label id %d, want 1 (pos)", e.Line, e.Label)
				}
			}
			bad := writeTSV(t, dir, "bad.tsv", "pos", "maybe")
			_, err = run.LoadDataset("--data", bad, r.Data, nil)
			if err == nil || !strings.Contains(err.Error(), bad+":3") || !strings.Contains(err.Error(), `"neg", "pos"`) {
				t.Errorf("a label the model does not know: error %v; want it to name %s:3 and the labels neg, pos", err, bad)
			}
		})
	}
}

// TestIntegerLabels checks that integer labels keep transformers' placeholder names, and that a trained model
// with placeholder names refuses string labels instead of numbering them afresh.
func TestIntegerLabels(t *testing.T) {
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0", "1", "0")
	r := labelRecipe(t, dir, "")
	out := trainLabelRecipe(t, r)
	if got := savedLabels(t, out); !slices.Equal(got, []string{"LABEL_0", "LABEL_1"}) {
		t.Errorf("config.json id2label %q, want the placeholders", got)
	}
	run, err := OpenModel(out, "", r.Tokenizer.Path, cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		labels  []string
		want    []int64 // nil: an error
		wantErr string
	}{
		{"integer labels are class ids", []string{"0", "1", "1"}, []int64{0, 1, 1}, ""},
		{"placeholder names map through label2id", []string{"LABEL_1", "LABEL_0"}, []int64{1, 0}, ""},
		{"string labels are refused", []string{"1", "pos"}, nil, `:3: unknown label "pos": the known labels are "LABEL_0", "LABEL_1"`},
		{"an id beyond num_labels is refused", []string{"2"}, nil, `:2: label 2 is outside the class ids 0..1 (num_labels 2): an integer label is a class id; the classes are named "LABEL_0", "LABEL_1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := run.LoadDataset("--data", writeTSV(t, t.TempDir(), "dev.tsv", tt.labels...), Data{MaxLength: 32}, nil)
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, e := range ds.Examples {
				got = append(got, e.Label)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("label ids %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTokenizerMustFitTheModel checks that OpenModel (eval, predict) and Build refuse a tokenizer with more
// tokens than the model's vocab_size, naming both, instead of failing in the embedding lookup.
func TestTokenizerMustFitTheModel(t *testing.T) {
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0")
	r := labelRecipe(t, dir, "")
	model := trainLabelRecipe(t, r)
	big := filepath.Join(dir, "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	vocab := "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
	for i := range 300 {
		vocab += "w" + strconv.Itoa(i) + "\n"
	}
	if err := os.WriteFile(filepath.Join(big, "vocab.txt"), []byte(vocab), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		open func() error
		want []string
	}{
		{"OpenModel", func() error { _, err := OpenModel(model, "", big, cpu.New()); return err },
			[]string{big, "305 tokens", "the model in " + model, "vocab_size 256", "--tokenizer"}},
		{"Build", func() error {
			r := labelRecipe(t, dir, "")
			r.Tokenizer.Path = big
			_, err := Build(r, cpu.New(), trainer.WithOutput(nil))
			return err
		}, []string{"tokenizer.path", "305 tokens", "model.config has vocab_size 256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.open()
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v; want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestAdapterNamesItsBaseAbsolutely trains LoRA on a model.path given relative to the working directory: the
// adapter's base_model_name_or_path is that directory's absolute path, valid from any directory.
func TestAdapterNamesItsBaseAbsolutely(t *testing.T) {
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0")
	run, err := Build(labelRecipe(t, dir, ""), cpu.New(), trainer.WithOutput(nil))
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base")
	if err := run.Base.Save(base); err != nil {
		t.Fatal(err)
	}
	run.Trainer.Close()
	r := labelRecipe(t, dir, "lora:\n  r: 2\n  task_type: SEQ_CLS\n")
	t.Chdir(dir)
	r.Model.Config, r.Model.Path = nil, "base" // relative to the working directory, as an override gives it
	out := trainLabelRecipe(t, r)
	_, got, err := lora.ReadAdapterConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if got != base {
		t.Errorf("base_model_name_or_path %q, want the absolute %q", got, base)
	}
}
