package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer/gpt2"
)

// TestCausalMaxLengthBeyondPositions: `tune finetune tiny-chat data.max_length=100000` (max_position_embeddings
// 256) and a GPT-2 recipe whose data.max_length exceeds n_positions are refused before anything loads, naming
// data.max_length, the value and the config key; before, they were accepted (the tiny-chat run packed rows of
// ~100k tokens and ran for minutes a step).
func TestCausalMaxLengthBeyondPositions(t *testing.T) {
	gpt := t.TempDir()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NPositions, cfg.NEmbd, cfg.NLayer, cfg.NHead = 756, 64, 32, 1, 2 // tiny-chat's tokenizer fits
	m, err := gpt2.NewGPT2LMHeadModel(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(gpt); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join("data", "tiny-chat")
	for _, c := range []struct {
		recipe, model, maxLength, want string
	}{
		{"tiny-chat", tiny, "100000", "data.max_length: 100000 exceeds the model's max_position_embeddings 256 (" +
			filepath.Join(tiny, "config.json") + ", model.path): the model was trained on positions below it only"},
		{"tiny-chat", tiny, "257", "set data.max_length=256 or less"},
		{"tiny-chat", tiny, "256", ""},
		{"gpt2-full", gpt, "65", "data.max_length: 65 exceeds the model's n_positions 64 (" + filepath.Join(gpt, "config.json") +
			", model.path): GPT-2's learned position embedding has that many rows"},
		{"gpt2-full", gpt, "64", ""},
	} {
		r, err := Load(c.recipe, []string{"model.path=" + c.model, "tokenizer.path=" + tiny, "data.max_length=" + c.maxLength,
			"training.output_dir=" + filepath.Join(t.TempDir(), "out")})
		if err != nil {
			t.Fatal(err)
		}
		err = r.CheckFiles()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s max_length %s: %v", c.recipe, c.maxLength, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s max_length %s: %v\nwant %s", c.recipe, c.maxLength, err, c.want)
		}
	}
}

// TestCausalDataKeysThatDoNotApply: on a causal-LM recipe, data.text_column and data.label_column (even set to
// their defaults) and a .tsv/.csv data file are refused naming the key and what to use; before, they were
// silently ignored and a .tsv file was read as JSONL.
func TestCausalDataKeysThatDoNotApply(t *testing.T) {
	for _, c := range []struct{ override, want string }{
		{"data.text_column=sentence", "data.text_column: does not apply to causal-LM (SFT) data, whose rows are JSONL objects: use data.dataset_text_field"},
		{"data.label_column=label", "data.label_column: does not apply to causal-LM (SFT) data"},
		{"data.train=x.tsv", "data.train: x.tsv is a TSV file by its extension, but causal-LM (SFT) data are JSONL"},
		{"data.eval=dev.csv", "data.eval: dev.csv is a CSV file by its extension"},
		{"data.format=tsv", "data.format: tsv does not apply to causal-LM (SFT) data, which are JSONL"},
		{"data.dataset_text_field=body", ""},
		{"data.format=jsonl", ""},
		// findings5 #18: the classifier keys SFT never reads, accepted and ignored before.
		{"data.text_pair_column=foo", "data.text_pair_column: does not apply to causal-LM (SFT) data"},
		{"model.num_labels=3", "model.num_labels: does not apply to causal-LM (SFT) data"},
		{"data.pad_to_multiple_of=8", "data.pad_to_multiple_of: does not apply to causal-LM (SFT) data"},
		{"data.group_by_length=true", "data.group_by_length: does not apply to causal-LM (SFT) data"},
		{"data.test=data/tiny-chat/dev.jsonl", "data.test: does not apply to causal-LM (SFT) data"},
		{"data.pad_to_multiple_of=0", ""},
	} {
		_, err := Load("tiny-chat", []string{c.override})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.override, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s: %v\nwant %s", c.override, err, c.want)
		}
	}
}

// TestClassifierDataKeysThatDoNotApply: on a BERT recipe the SFT keys were accepted and ignored (tune validate
// tiny data.packing=true passed; findings5 #18); they are refused naming the key.
func TestClassifierDataKeysThatDoNotApply(t *testing.T) {
	for _, c := range []struct{ override, want string }{
		{"data.packing=true", "data.packing: does not apply to sequence-classification data"},
		{"data.assistant_only_loss=true", "data.assistant_only_loss: does not apply to sequence-classification data"},
		{"data.completion_only_loss=false", "data.completion_only_loss: does not apply"},
		{"data.dataset_text_field=x", "data.dataset_text_field: does not apply"},
		{"data.packing=false", ""},
	} {
		_, err := Load("tiny", []string{c.override})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.override, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s: %v\nwant %s", c.override, err, c.want)
		}
	}
}

// TestCausalConfigChecked: tune validate (CheckFiles) reads a decoder's config.json as the model is built
// from it, so a config that tune finetune refuses (hidden_size 1000000000 here) is reported by validate too,
// naming model.path, the file and the key; before, validate printed the recipe and exited 0.
func TestCausalConfigChecked(t *testing.T) {
	src := filepath.Join("data", "tiny-chat")
	for _, c := range []struct{ from, to, want string }{
		{`"hidden_size": 64`, `"hidden_size": 1000000000`, ": hidden_size: 1000000000 is larger than tune builds"},
		// The projections are listed only after the weights are matched with the config: 10000000 layers
		// beside two ran tune validate out of memory (4.4 GB in 9 s under an 8 GB limit, then a crash).
		{`"num_hidden_layers": 2`, `"num_hidden_layers": 10000000`, " has num_hidden_layers 10000000 but the checkpoint"},
	} {
		dir := t.TempDir()
		for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == "config.json" {
				if !strings.Contains(string(b), c.from) {
					t.Fatalf("config.json lacks %s", c.from)
				}
				b = []byte(strings.Replace(string(b), c.from, c.to, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Load("tiny-chat", []string{"model.path=" + dir, "tokenizer.path=" + dir, "training.output_dir=" + filepath.Join(t.TempDir(), "out")})
		if err != nil {
			t.Fatal(err)
		}
		err = r.CheckFiles()
		want := filepath.Join(dir, "config.json") + c.want
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "model.path: ") {
			t.Errorf("CheckFiles = %v\nwant an ErrInvalid naming model.path and %s", err, want)
		}
	}
}

// TestCausalMaxLengthTooShort: data.max_length below 2 on a causal-LM recipe gives the decoder's reason (one
// next-token target needs two tokens), not BERT's "[CLS], one token, [SEP]" (tester3), and 2 is accepted; a
// BERT recipe keeps its bound of 3.
func TestCausalMaxLengthTooShort(t *testing.T) {
	for _, c := range []struct {
		recipe, maxLength, want string
	}{
		{"tiny-chat", "1", "data.max_length: must be ≥ 2 for a causal LM: each token is predicted from the ones before it"},
		{"tiny-chat", "2", ""},
		{"tiny", "2", "data.max_length: must be ≥ 3 ([CLS], one token, [SEP])"},
	} {
		_, err := Load(c.recipe, []string{"data.max_length=" + c.maxLength, "training.output_dir=" + filepath.Join(t.TempDir(), "out")})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s max_length %s: %v", c.recipe, c.maxLength, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "[CLS]") != (c.recipe == "tiny")):
			t.Errorf("%s max_length %s: %v\nwant %s", c.recipe, c.maxLength, err, c.want)
		}
	}
}
