package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPredictOutputPaths checks that predict refuses, before loading anything (exit 2, naming --output), every
// --output it must not write: a directory, a device (through a symbolic link, as /dev/stdout is one), a dangling
// link, the input file itself (by name, by a hard link, by a symbolic link), a file in a directory that does not
// exist; and that it writes what it should: - to standard output, and with --force the file a symbolic link
// points to, the link kept. Each refusal leaves the path as it was.
func TestPredictOutputPaths(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links and /dev/null are Unix's")
	}
	model, _ := tinyModelDir(t)
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	dir := t.TempDir()
	input := filepath.Join(dir, "dev.tsv")
	devData, err := os.ReadFile(filepath.Join(tiny, "dev.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	mustWriteFile(t, input, string(devData))
	p := func(name string) string { return filepath.Join(dir, name) }
	if err := os.Mkdir(p("runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWriteFile(t, p("old.jsonl"), "the user's\n")
	for link, target := range map[string]string{"null": os.DevNull, "dangling": p("absent"), "inlink": input, "plink": p("old.jsonl")} {
		if err := os.Symlink(target, p(link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(input, p("hard.tsv")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		output string
		force  bool
		code   int
		want   string // a fragment of stderr, or of stdout for exit 0
	}{
		{"a directory", p("runs"), true, exitUsage, "--output " + p("runs") + " is a directory"},
		{"a link to a device", p("null"), true, exitUsage, "is a character device, not a regular file"},
		{"a link to a device, without --force", p("null"), false, exitUsage, "is a character device"},
		{"a dangling link", p("dangling"), true, exitUsage, "is a symbolic link to " + p("absent")},
		{"the input file", input, true, exitUsage, "is the input file"},
		{"a hard link to the input", p("hard.tsv"), true, exitUsage, "is the input file"},
		{"a symbolic link to the input", p("inlink"), true, exitUsage, "is the input file"},
		{"a missing directory", p("nodir/p.jsonl"), false, exitUsage, "the directory " + p("nodir") + " does not exist"},
		{"- is standard output", "-", false, exitOK, `{"line":2,`},
		{"--force writes through a link to a file", p("plink"), true, exitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"predict", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--input", input, "--output", tt.output}
			if tt.force {
				args = append(args, "--force")
			}
			before, _ := os.Lstat(tt.output)
			code, stdout, stderr := runCLI(args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			got := stderr
			if code == exitOK {
				got = stdout
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("exit %d, and the output lacks %q:\n%.300s", code, tt.want, got)
			}
			if data, _ := os.ReadFile(input); string(data) != string(devData) {
				t.Errorf("the input file was changed")
			}
			if after, _ := os.Lstat(tt.output); before != nil && (after == nil || after.Mode() != before.Mode()) {
				t.Errorf("%s changed from %v to %v", tt.output, before.Mode(), after)
			}
		})
	}
	if st, err := os.Lstat(p("plink")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("plink is no longer a symbolic link (%v, %v)", st, err)
	}
	if data, _ := os.ReadFile(p("old.jsonl")); !strings.HasPrefix(string(data), `{"line":2,`) {
		t.Errorf("the file plink points to holds %.40q, want the predictions", data)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 8 {
		t.Errorf("the directory holds %d entries, want the 8 made here (no temporary or new file)", len(ents))
	}
}

// mustWriteFile writes content to path or fails the test.
func mustWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
