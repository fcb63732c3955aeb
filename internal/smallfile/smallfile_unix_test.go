//go:build linux || darwin

package smallfile

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestReadCappedNamedPipe checks that a named pipe is refused without being opened: opening it would wait for a
// writer that never comes.
func TestReadCappedNamedPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	_, err := ReadCapped(p, MaxTokenizerBytes, "a tokenizer.json")
	if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), p+" is a named pipe, not a regular file") {
		t.Errorf("named pipe: %v", err)
	}
}

// TestReadAndOpenRefuseANamedPipe: Read (config.json, tokenizer_config.json) and Open (data files) opened a
// named pipe and waited for a writer for ever (tester10 T10-13); they refuse it, and a directory, before
// opening, as bad input naming the file and its kind.
func TestReadAndOpenRefuseANamedPipe(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "train.tsv")
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		name string
		call func(string) error
	}{
		{"Read", func(p string) error { _, err := Read(p); return err }},
		{"Open", func(p string) error {
			f, err := Open(p, "a data file")
			if f != nil {
				f.Close()
			}
			return err
		}},
	} {
		for path, kind := range map[string]string{p: "a named pipe", dir: "a directory"} {
			err := c.call(path)
			if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), path+" is "+kind+", not a regular file") {
				t.Errorf("%s(%s): %v", c.name, kind, err)
			}
		}
	}
}
