//go:build linux || darwin

package loaders

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestModelClassBoundedRead: modelClass read config.json whole before checking its size, so a 1 GiB
// config.json cost 1 GiB of memory for a class name. It reads at most smallfile.MaxBytes.
func TestModelClassBoundedRead(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Skip(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := modelClass(dir)
	runtime.ReadMemStats(&after)
	if got != "AutoModelForSequenceClassification" {
		t.Errorf("modelClass = %q", got)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("modelClass allocated %d MiB for a 1 GiB config.json", n>>20)
	}
}
