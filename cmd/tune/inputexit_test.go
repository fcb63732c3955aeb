package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestBadInputFilesExit2: the contents of a file tune reads being wrong is the input's fault, exit 2 from
// every command, as a wrong flag or recipe key is (findings4: data-file and safetensors errors exited 1 while
// config.json errors exited 2). The loaders mark these errors (internal/badinput), cmd/tune reads the mark; a
// run that fails while running (a diverging loss: TestFinetuneStopsOnDivergence) stays exit 1.
func TestBadInputFilesExit2(t *testing.T) {
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
	// variant copies ckpt with one file replaced by edit's result.
	variant := func(name, file string, edit func([]byte) []byte) string {
		dir := filepath.Join(tmp, name)
		if err := os.CopyFS(dir, os.DirFS(ckpt)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, file)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, edit(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	badRow := write("rows.tsv", "sentence\tlabel\nfine movie\t1\nbad\n")
	badJSON := write("rows.jsonl", "{\"sentence\": \"fine\", \"label\": 1}\n{\"sentence\": \"bad\", \"label\n")
	badUTF8 := write("latin1.txt", "ok\n\xff\xfe bad\n")
	badChat := write("chat.jsonl", "{\"messages\": [{\"role\": \"bogus\", \"content\": \"x\"}]}\n")
	truncated := variant("truncated", "model.safetensors", func(b []byte) []byte { return b[:len(b)/2] })
	layers := variant("layers", "config.json", func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"num_hidden_layers": 2`, `"num_hidden_layers": 3`, 1))
	})
	labels := variant("labels", "config.json", func(b []byte) []byte {
		var cfg map[string]any
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		delete(cfg, "id2label")
		delete(cfg, "label2id")
		cfg["num_labels"] = 5
		b, _ = json.Marshal(cfg)
		return b
	})
	badTokenizer := variant("tokenizer", "tokenizer.json", func([]byte) []byte { return []byte(`{"model": 5`) })
	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"finetune: a data row", []string{"finetune", tinyRecipe, "data.train=" + badRow, "training.output_dir=" + filepath.Join(tmp, "o1")}, "rows.tsv:3: 1 columns, expected 2"},
		{"eval: a data row", []string{"eval", "--model", ckpt, "--data", badRow}, "rows.tsv:3: 1 columns"},
		{"predict: a JSONL row", []string{"predict", "--model", ckpt, "--input", badJSON}, "rows.jsonl:2:"},
		{"finetune: a chat row", []string{"finetune", "tiny-chat", "data.train=" + badChat, "training.output_dir=" + filepath.Join(tmp, "o2")}, `chat.jsonl:1: messages[0]: unknown role "bogus"`},
		{"inspect: a truncated safetensors", []string{"inspect", truncated}, "model.safetensors: incomplete metadata"},
		{"eval: a truncated safetensors", []string{"eval", "--model", truncated, "--data", dev}, "model.safetensors: incomplete metadata"},
		{"finetune: a truncated safetensors", []string{"finetune", filepath.Join("..", "..", "recipes", "bert.yaml"), "model.path=" + truncated,
			"data.train=" + dev, "data.eval=" + dev, "data.max_length=32", "training.output_dir=" + filepath.Join(tmp, "o3")}, "model.safetensors: incomplete metadata"},
		{"inspect: config.json does not describe the weights", []string{"inspect", layers}, "config.json does not describe these weights"},
		{"eval: config.json does not describe the weights", []string{"eval", "--model", layers, "--data", dev}, "config.json does not describe these weights"},
		{"eval: a classifier head of another size", []string{"eval", "--model", labels, "--data", dev}, "the trained classifier does not fit the config"},
		{"tokenize: a line that is not UTF-8", []string{"tokenize", "--tokenizer", filepath.Join("..", "..", "recipes", "data", "tiny"), badUTF8}, "latin1.txt:2: invalid UTF-8 (byte 0xff at column 1)"},
		{"eval: a broken tokenizer.json", []string{"eval", "--model", badTokenizer, "--data", dev}, "not a valid tokenizer.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args[0] != "inspect" && args[0] != "tokenize" {
				args = append(args[:1:1], append([]string{"--device", "cpu"}, args[1:]...)...)
			}
			code, _, stderr := runCLI(args...)
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, exitUsage, c.want)
			}
		})
	}
}
