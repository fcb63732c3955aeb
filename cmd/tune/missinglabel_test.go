package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestRowWithoutLabelExit2 (tester10 F2): a row of a training or evaluation file without a label (an empty
// TSV/CSV field, a JSONL label key that is missing, null or "") is bad input: tune finetune and tune eval exit 2
// (eval exited 1), naming the file, the row's line, the label column or key, and what to do.
func TestRowWithoutLabelExit2(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	ckpt := tinyCheckpoint(t)
	tmp := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := []struct {
		path, want string
	}{
		{write("rows.tsv", "sentence\tlabel\nfine movie\t1\nbad movie\t\nok\t0\n"), `rows.tsv:3: no label: the label column "label" is empty (1 of the file's 3 rows have no label)`},
		{write("rows.csv", "sentence,label\nfine,1\nbad,\n"), `rows.csv:3: no label: the label column "label" is empty`},
		{write("null.jsonl", "{\"sentence\": \"fine\", \"label\": 1}\n{\"sentence\": \"bad\", \"label\": null}\n"), `null.jsonl:2: no label: the label key "label" is null`},
		{write("empty.jsonl", "{\"sentence\": \"fine\", \"label\": 1}\n{\"sentence\": \"bad\", \"label\": \"\"}\n"), `empty.jsonl:2: no label: the label key "label" is empty`},
		{write("nokey.jsonl", "{\"sentence\": \"fine\", \"label\": 1}\n{\"sentence\": \"bad\"}\n"), `nokey.jsonl:2: no label: the row has no key "label"`},
	}
	for i, f := range files {
		for _, args := range [][]string{
			{"finetune", "--device", "cpu", tinyRecipe, "data.train=" + f.path, "training.output_dir=" + filepath.Join(tmp, "o", fmt.Sprint(i))},
			{"finetune", "--device", "cpu", tinyRecipe, "data.eval=" + f.path, "training.output_dir=" + filepath.Join(tmp, "e", fmt.Sprint(i))},
			{"eval", "--device", "cpu", "--model", ckpt, "--data", f.path},
		} {
			code, _, stderr := runCLI(args...)
			if code != exitUsage || !strings.Contains(stderr, f.want) || !strings.Contains(stderr, "fill them in or remove those rows") &&
				!strings.Contains(stderr, "needs its label there") {
				t.Errorf("%s: exit %d, stderr %q; want exit %d with %q and what to do", strings.Join(args, " "), code, stderr, exitUsage, f.want)
			}
		}
	}
}
