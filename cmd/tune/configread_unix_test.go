//go:build linux || darwin

package main

import (
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestPromptLimitBoundedRead: promptLimit read config.json with no size cap (a 1 GiB config.json cost 1 GiB of
// memory); it reads at most smallfile.MaxBytes and falls back to the default limit.
func TestPromptLimitBoundedRead(t *testing.T) {
	dir := t.TempDir()
	testutil.SparseFile(t, filepath.Join(dir, "config.json"), 1<<30)
	var ctx int
	n := testutil.Allocated(func() { _, ctx = promptLimit(dir) })
	if ctx != 0 {
		t.Errorf("context %d from an unreadable config.json", ctx)
	}
	if n > 64<<20 {
		t.Errorf("promptLimit allocated %d MiB for a 1 GiB config.json", n>>20)
	}
}
