//go:build linux || darwin

package loaders

import (
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestModelClassBoundedRead: modelClass read config.json whole before checking its size, so a 1 GiB
// config.json cost 1 GiB of memory for a class name. It reads at most smallfile.MaxBytes.
func TestModelClassBoundedRead(t *testing.T) {
	dir := t.TempDir()
	testutil.SparseFile(t, filepath.Join(dir, ConfigName), 1<<30)
	var got string
	n := testutil.Allocated(func() { got = modelClass(dir) })
	if got != "AutoModelForSequenceClassification" {
		t.Errorf("modelClass = %q", got)
	}
	if n > 64<<20 {
		t.Errorf("modelClass allocated %d MiB for a 1 GiB config.json", n>>20)
	}
}
