//go:build linux || darwin

package recipes

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestCheckCausalVocabBoundedRead: CheckCausalVocab read config.json with no size cap (a 1 GiB config.json
// cost 1 GiB of memory); it reads at most smallfile.MaxBytes and leaves a larger file to the loaders.
func TestCheckCausalVocabBoundedRead(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, loaders.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Skip(err)
	}
	f.Close()
	tok := filepath.Join("data", "tiny-chat", "tokenizer.json")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = CheckCausalVocab(tok, dir)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Errorf("CheckCausalVocab = %v, want nil (the loaders report the file)", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("CheckCausalVocab allocated %d MiB for a 1 GiB config.json", n>>20)
	}
}
