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
