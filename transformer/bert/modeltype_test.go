package bert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// TestLoadPretrainedRefusesAnotherModelType: a config.json of model_type roberta (or any other) over BERT tensor
// names is refused naming the key, the value and the model_types tune builds; before, it was read as BERT
// without a word. model_type bert still loads.
func TestLoadPretrainedRefusesAnotherModelType(t *testing.T) {
	b := cpuBackend()
	dir := t.TempDir()
	if err := newTestModel(t, b, tinyConfig(), 3).Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ modelType, want string }{
		{"roberta", `config.json: model_type: "roberta" is not BERT's ("bert"), and tune reads no other encoder; the model_types tune builds are bert`},
		{"distilbert", `"distilbert" is not BERT's`},
		{"bert", ""},
	} {
		edited := t.TempDir()
		weights, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(edited, "model.safetensors"), weights, 0o644)
		hf, err := loaders.ReadBertConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		hf.ModelType = c.modelType
		if err := hf.WriteFile(filepath.Join(edited, "config.json")); err != nil {
			t.Fatal(err)
		}
		_, _, err = LoadPretrained(edited, b, transformer.LoadOptions{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.modelType, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Join(edited, "config.json"))):
			t.Errorf("%s: %v\nwant %s", c.modelType, err, c.want)
		}
	}
}
