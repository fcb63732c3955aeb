package smallfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "config.json"), filepath.Join(dir, "big.json")
	os.WriteFile(small, []byte(`{"a": 1}`), 0o644)
	os.WriteFile(big, make([]byte, MaxBytes+1), 0o644)
	if b, err := Read(small); err != nil || string(b) != `{"a": 1}` {
		t.Errorf("small: %q %v", b, err)
	}
	if _, err := Read(big); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), big+" is larger than 16777216 bytes") {
		t.Errorf("big: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) || badinput.Is(err) {
		t.Errorf("missing: %v", err)
	}
}

// TestReadCapped checks the cap and the refusal of files that are not regular: a symbolic link to /dev/zero and
// a file larger than the cap (sparse: no disk is used) are refused as bad input naming the file, before they
// are read; a missing file keeps the operating system's error.
func TestReadCapped(t *testing.T) {
	dir := t.TempDir()
	ok, big, zero := filepath.Join(dir, "tokenizer.json"), filepath.Join(dir, "big.json"), filepath.Join(dir, "zero.json")
	os.WriteFile(ok, []byte(`{"model": {}}`), 0o644)
	if b, err := ReadCapped(ok, 100, "a tokenizer.json"); err != nil || string(b) != `{"model": {}}` {
		t.Errorf("small: %q %v", b, err)
	}
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxTokenizerBytes+1); err != nil {
		t.Fatal(err)
	}
	_, err := ReadCapped(big, MaxTokenizerBytes, "a tokenizer.json")
	if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), big+" is larger than 268435456 bytes (268435457 bytes), more than tune reads for a tokenizer.json") {
		t.Errorf("big: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if err := os.Symlink("/dev/zero", zero); err != nil {
			t.Fatal(err)
		}
		_, err := ReadCapped(zero, MaxTokenizerBytes, "a tokenizer.json")
		if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), zero+" is a character device, not a regular file") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
	_, err = ReadCapped(dir, MaxTokenizerBytes, "a tokenizer.json")
	if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), dir+" is a directory, not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, err := ReadCapped(filepath.Join(dir, "nope"), 100, "a tokenizer.json"); !errors.Is(err, fs.ErrNotExist) || badinput.Is(err) {
		t.Errorf("missing: %v", err)
	}
}
