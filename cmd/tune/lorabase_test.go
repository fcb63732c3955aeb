package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
)

// tinyLoRARecipe writes recipes/tiny.yaml with its model.config replaced by model.path, an untrained checkpoint
// of the same model (2 layers, hidden 64), into a new directory and returns the recipe's path: LoRA trains on a
// checkpoint (tune refuses it on model.config), so the LoRA tests train this. Its data and tokenizer paths are
// the repository's, made absolute.
func tinyLoRARecipe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 64, 2, 4, 128
	cfg.MaxPositionEmbeddings = 64
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 42)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base")
	if err := m.Save(base); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(tinyRecipe)
	if err != nil {
		t.Fatal(err)
	}
	data, err := filepath.Abs(filepath.Join(filepath.Dir(tinyRecipe), "data", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?s)\nmodel:\n.*?\ntokenizer:`).ReplaceAllString(string(text), "\nmodel:\n  path: "+base+"\n\ntokenizer:")
	s = regexp.MustCompile(` data/tiny`).ReplaceAllString(s, " "+data)
	p := filepath.Join(dir, "tiny-lora.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvalAdapterWithoutABase: an adapter whose base_model_name_or_path is null (what a LoRA run on model.config
// wrote before tune refused one) given as --model is told that it names no base and cannot be evaluated,
// rather than to pass a base model there is none of.
func TestEvalAdapterWithoutABase(t *testing.T) {
	model, _ := tinyModelDir(t)
	m, _, err := bert.LoadPretrained(model, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lc := lora.DefaultConfig()
	lc.R, lc.TaskType, lc.TargetModules = 2, lora.TaskSeqCls, lora.TargetModules{Names: []string{"query"}}
	lm, err := lora.Apply(m, lc, 1)
	if err != nil {
		t.Fatal(err)
	}
	adapter := filepath.Join(t.TempDir(), "adapter")
	if err := lm.Save(adapter); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runTune(t, "eval", "--model", adapter, "--data", filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv"))
	if code != exitUsage || !strings.Contains(errOut, "base_model_name_or_path null: an adapter trained on a new model (model.config)") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
