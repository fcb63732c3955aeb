package recipes

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEmbeddedIntactBounded: an unpacked data file replaced by a larger one, or by a symbolic link to /dev/zero,
// is not intact (and is not read whole); the unchanged copy is.
func TestEmbeddedIntactBounded(t *testing.T) {
	const p = "data/tiny/tokenizer.json"
	want, err := embedded.ReadFile(p)
	if err != nil {
		t.Skipf("no embedded %s: %v", p, err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, filepath.FromSlash(p))
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if !embeddedIntact(dir, []string{p}) {
		t.Fatal("the unchanged copy is not intact")
	}
	if err := os.WriteFile(dst, append(want, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if embeddedIntact(dir, []string{p}) {
		t.Error("a larger file is intact")
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		os.Remove(dst)
		if err := os.Symlink("/dev/zero", dst); err != nil {
			t.Fatal(err)
		}
		if embeddedIntact(dir, []string{p}) {
			t.Error("a link to /dev/zero is intact")
		}
	}
}
