package recipes

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer/bert"
)

// TestOpenModelRefusesAMisShapedClassifier checks that eval and predict (OpenModel without an adapter) refuse a
// checkpoint whose trained classifier has another number of rows than config.json's labels: it used to be drawn
// afresh with only transformers' "newly initialized" warning, and tune eval scored the random head (accuracy
// 0.02 on SST-2).
func TestOpenModelRefusesAMisShapedClassifier(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 16, 1, 2, 32
	cfg.MaxPositionEmbeddings = 64
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join("data", "tiny", "vocab.txt")
	if _, err := OpenModel(dir, "", tok, cpu.New()); err != nil {
		t.Fatalf("the saved model: %v", err)
	}
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["id2label"] = map[string]string{"0": "a", "1": "b", "2": "c"}
	c["label2id"] = map[string]int{"a": 0, "b": 1, "c": 2}
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenModel(dir, "", tok, cpu.New())
	if err == nil || !strings.Contains(err.Error(), "classifier.weight is [2 16] but config.json's labels (id2label / num_labels: 3) make it [3 16]") {
		t.Errorf("3 labels over a 2-row classifier: %v", err)
	}
}

// TestOpenModelChecksTheClassifierBeforeBuilding checks that a config.json whose num_labels disagrees with the
// checkpoint's classifier is refused from the safetensors header, before the model is built: num_labels
// 1048576 (tune's limit) beside a 2-row head made tune eval allocate the [1048576, hidden] classifier and draw
// it (6.6 GB and 22 s for hidden 768) only to report the mismatch. Here 100000 labels (tune's limit now) over
// hidden 128: building allocates 49 MiB for the classifier alone; the check reads the header and config.json,
// whose labels (the default LABEL_i names transformers gives num_labels) take a few MiB per reading.
func TestOpenModelChecksTheClassifierBeforeBuilding(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 128, 1, 2, 32
	cfg.MaxPositionEmbeddings = 64
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	delete(c, "id2label")
	delete(c, "label2id")
	c["num_labels"] = 100_000
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = OpenModel(dir, "", filepath.Join("data", "tiny", "vocab.txt"), cpu.New())
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "classifier.weight is [2 128] but config.json's labels (id2label / num_labels: 100000) make it [100000 128]") {
		t.Fatalf("num_labels 100000 over a 2-row classifier: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 40<<20 {
		t.Errorf("refusing the mis-shaped classifier allocated %d MiB; the header alone tells", n>>20)
	}
}
