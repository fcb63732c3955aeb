package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCopyTokenizer checks what copyTokenizer copies into a model directory, and that it fails, naming the
// source, rather than leave the directory without a tokenizer: a source without tokenizer.json or vocab.txt, a
// tokenizer file that cannot be read, a destination that cannot be written. Its errors carry no "cp:" prefix
// (writeAtomic's messages are neutral; each caller adds its own context).
func TestCopyTokenizer(t *testing.T) {
	src := t.TempDir()
	for name, data := range map[string]string{"tokenizer.json": `{"model":{}}`, "vocab.txt": "[PAD]\n[UNK]\n",
		"tokenizer_config.json": `{"do_lower_case":true}`, "train.tsv": "sentence\tlabel\n"} {
		mustWriteFile(t, filepath.Join(src, name), data)
	}
	empty := t.TempDir()
	mustWriteFile(t, filepath.Join(empty, "tokenizer_config.json"), "{}") // settings alone are no tokenizer
	unreadable := t.TempDir()
	if err := os.Mkdir(filepath.Join(unreadable, "vocab.txt"), 0o755); err != nil { // ReadFile fails on it
		t.Fatal(err)
	}
	blocked := filepath.Join(t.TempDir(), "file")
	mustWriteFile(t, blocked, "not a directory")
	tests := []struct {
		name    string
		src     string
		dst     string // "" for a new directory
		want    []string
		wantErr []string // fragments of the error
	}{
		{"a directory: every tokenizer file, nothing else", src, "", []string{"tokenizer.json", "tokenizer_config.json", "vocab.txt"}, nil},
		{"a vocab.txt: that file and the settings, not the tokenizer.json beside it", filepath.Join(src, "vocab.txt"), "",
			[]string{"tokenizer_config.json", "vocab.txt"}, nil},
		{"a tokenizer.json under another name is saved as tokenizer.json", mustCopy(t, filepath.Join(src, "tokenizer.json"), "bert.json"), "",
			[]string{"tokenizer.json", "tokenizer_config.json"}, nil},
		{"a directory without a tokenizer", empty, "", nil, []string{"the tokenizer " + empty + " holds neither tokenizer.json nor vocab.txt"}},
		{"a missing source", filepath.Join(empty, "absent"), "", nil, []string{"the tokenizer " + filepath.Join(empty, "absent")}},
		{"a tokenizer file that cannot be read", unreadable, "", nil, []string{"reading the tokenizer file " + filepath.Join(unreadable, "vocab.txt")}},
		{"a destination that cannot be written", src, filepath.Join(blocked, "out"), nil,
			[]string{"copying the tokenizer file " + filepath.Join(src, "tokenizer.json") + ": writing " + filepath.Join(blocked, "out", "tokenizer.json")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := tt.dst
			if dst == "" {
				dst = t.TempDir()
			}
			err := copyTokenizer(tt.src, dst)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := dirNames(t, dst); !slices.Equal(got, tt.want) {
					t.Errorf("copied %v, want %v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one holding %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to hold %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "cp:") {
				t.Errorf("err = %v carries cp's prefix", err)
			}
		})
	}
}

// mustCopy copies file into a new directory under the name name and returns the copy's path.
func mustCopy(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mustWriteFile(t, filepath.Join(dir, "tokenizer_config.json"), "{}")
	p := filepath.Join(dir, name)
	mustWriteFile(t, p, string(data))
	return p
}

// dirNames lists the entries of dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
