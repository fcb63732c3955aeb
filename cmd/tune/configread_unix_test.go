//go:build linux || darwin

package main

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestPromptLimitBoundedRead: promptLimit read config.json with no size cap (a 1 GiB config.json cost 1 GiB of
// memory); it reads at most smallfile.MaxBytes and falls back to the default limit.
func TestPromptLimitBoundedRead(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Skip(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, ctx := promptLimit(dir)
	runtime.ReadMemStats(&after)
	if ctx != 0 {
		t.Errorf("context %d from an unreadable config.json", ctx)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("promptLimit allocated %d MiB for a 1 GiB config.json", n>>20)
	}
}
