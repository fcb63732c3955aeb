package recipes

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeRecipe decodes arbitrary recipe text, with and without overrides, and checks the files it names:
// nothing panics, and every error has a message. Seeds: the embedded recipes and the shapes of YAML that broke
// decoders before (numbers beyond an integer's range, anchors, merges, nulls, duplicated keys). `make fuzz`
// and .ci/run run it.
//
//	go test ./recipes -run '^$' -fuzz '^FuzzDecodeRecipe$' -fuzztime 60s
func FuzzDecodeRecipe(f *testing.F) {
	ents, err := os.ReadDir(".")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".yaml" {
			b, err := os.ReadFile(e.Name())
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, "training.learning_rate=2e-5")
		}
	}
	for _, s := range []string{
		"training:\n  max_steps: 1e30\n",
		"training:\n  max_steps: -1e20\n",
		"a: &x {b: 1}\nmodel: *x\n",
		"<<: {training: {seed: 1}}\n",
		"model: null\ntokenizer: ~\n",
		"training:\n  seed: 1\n  seed: 2\n",
		"data:\n  max_length: 2147483648\n",
		"model:\n  config:\n    num_labels: 2147483647\n",
		"training:\n  output_dir: /proc/self/fd/0/x\n",
		"\xff\xfe",
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "model.config.num_labels=99999999999")
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, override string) {
		var overrides []string
		if override != "" {
			overrides = []string{override}
		}
		r, err := Decode(data, "fuzz.yaml", dir, overrides)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := r.CheckFiles(); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
