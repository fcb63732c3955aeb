package tokenizers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
)

// TestLoadBounded checks that Load and ModelType refuse a tokenizer.json that is a symbolic link to /dev/zero,
// or larger than smallfile.MaxTokenizerBytes, as bad input naming the file, before reading it (an unbounded
// read ran the process out of memory).
func TestLoadBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big", "tokenizer.json")
	os.Mkdir(filepath.Dir(big), 0o755)
	if err := os.WriteFile(big, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, smallfile.MaxTokenizerBytes+1); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{big: big + " is larger than 268435456 bytes (268435457 bytes), more than tune reads for a tokenizer.json"}
	if _, err := os.Stat("/dev/zero"); err == nil {
		zero := filepath.Join(dir, "zero", "tokenizer.json")
		os.Mkdir(filepath.Dir(zero), 0o755)
		if err := os.Symlink("/dev/zero", zero); err != nil {
			t.Fatal(err)
		}
		cases[zero] = zero + " is a character device, not a regular file: tune reads a tokenizer.json only from a regular file"
	}
	for p, want := range cases {
		for _, path := range []string{p, filepath.Dir(p)} {
			if _, err := Load(path); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("Load(%s): %v, want bad input with %q", path, err, want)
			}
			if _, err := ModelType(path); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("ModelType(%s): %v, want bad input with %q", path, err, want)
			}
		}
	}
}
