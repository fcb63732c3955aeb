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
