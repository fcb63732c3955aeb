package recipes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestEmbeddedNeeds: List says which input keys of each embedded recipe point outside what tune embeds, so
// tune ls can tell the recipes that run anywhere (tiny) from those that need a checkpoint and data (bert).
func TestEmbeddedNeeds(t *testing.T) {
	want := map[string][]string{
		"tiny":       nil,
		"bert":       {"model.path", "data.train", "data.eval"},
		"bert-full":  {"model.path", "data.train", "data.eval"},
		"tiny-chat":  nil,
		"llama-lora": {"model.path"},
		"qwen-lora":  {"model.path"},
		"gpt2-full":  {"model.path"},
	}
	for _, info := range List() {
		t.Run(info.Name, func(t *testing.T) {
			if !slices.Equal(info.Needs, want[info.Name]) {
				t.Errorf("Needs = %v, want %v", info.Needs, want[info.Name])
			}
		})
	}
}

// TestEmbeddedMissingInputs: an embedded recipe whose checkpoint and data are not embedded fails CheckFiles
// with the paths as the recipe writes them (not as resolved inside the cache directory) and the overrides that
// supply them; an input given by an override is checked as usual.
func TestEmbeddedMissingInputs(t *testing.T) {
	testutil.IsolateCache(t)
	for _, c := range []struct {
		name      string
		overrides func(dir string) []string
		want      []string // fragments of the error
		notWant   []string
	}{
		{"nothing given", func(string) []string { return nil },
			[]string{
				"model.path: the embedded recipe bert names ../checkpoints/bert-base-uncased",
				"data.train: the embedded recipe bert names ../../shared/data/sst2/train.tsv",
				"data.eval: the embedded recipe bert names ../../shared/data/sst2/dev.tsv",
				"model.path=DIR data.train=FILE data.eval=FILE",
				"tokenizer.path=",
			},
			[]string{"tokenizer.path: ", "no such file"}},
		{"the data given, the checkpoint not", func(dir string) []string {
			return []string{"data.train=" + filepath.Join(dir, "train.tsv"), "data.eval=" + filepath.Join(dir, "dev.tsv")}
		},
			[]string{"model.path: the embedded recipe bert names ../checkpoints/bert-base-uncased", "model.path=DIR"},
			[]string{"data.train", "data.eval"}},
		{"a missing override file is reported as such", func(dir string) []string {
			return []string{"data.train=" + filepath.Join(dir, "nope.tsv")}
		},
			[]string{"data.train: " + "DIR/nope.tsv: no such file or directory"},
			[]string{"data.train: the embedded recipe"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"train.tsv", "dev.tsv"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("sentence\tlabel\nok\t1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Load("bert", c.overrides(dir))
			if err != nil {
				t.Fatal(err)
			}
			err = r.CheckFiles()
			if err == nil {
				t.Fatal("CheckFiles passed")
			}
			msg := err.Error()
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "DIR/", dir+string(filepath.Separator)); !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("error has %q:\n%s", w, msg)
				}
			}
		})
	}
}
