package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestMessagesSpeakRecipes: what a user sees names keys, files and values, not Go (issue 20, item 9): no
// "tune: recipes:" package prefix, no "stat FILE:" from an *fs.PathError, no yaml.v3 "cannot unmarshal
// !!str `abc` into float64".
func TestMessagesSpeakRecipes(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tsv")
	os.WriteFile(bad, []byte("sentence\tlabel\na film\t1\nno label here\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "tiny", "training.learning_rate=abc"}, "training.learning_rate: abc is not a number (such as 2e-5 or 3)"},
		{[]string{"validate", "tiny", "lora.r=[1]"}, "lora.r: a list is not a whole number (such as 16)"},
		{[]string{"validate", "tiny", "training.fp16=maybe"}, "training.fp16: maybe is not true or false"},
		{[]string{"validate", "tiny", "data.train=" + filepath.Join(dir, "nope.tsv")}, "data.train: " + filepath.Join(dir, "nope.tsv") + ": no such file or directory"},
		{[]string{"validate", "bert", "model.path=" + filepath.Join(dir, "ckpt")}, "model.path: " + filepath.Join(dir, "ckpt") + ": no such file or directory"},
		{[]string{"finetune", "tiny", "data.train=" + bad, "training.output_dir=" + filepath.Join(dir, "o")}, "tune: data.train: "},
	} {
		code, _, stderr := runCLI(c.args...)
		if code == exitOK || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q lacks %q", c.args, code, stderr, c.want)
		}
		for _, leak := range []string{"tune: recipes:", "stat ", "cannot unmarshal", "!!str", "float64"} {
			if strings.Contains(stderr, leak) {
				t.Errorf("%s: %q shows Go's %q", c.args, stderr, leak)
			}
		}
	}
}
