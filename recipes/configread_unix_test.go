//go:build linux || darwin

package recipes

import (
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
)

// TestCheckCausalVocabBoundedRead: CheckCausalVocab read config.json with no size cap (a 1 GiB config.json
// cost 1 GiB of memory); it reads at most smallfile.MaxBytes and leaves a larger file to the loaders.
func TestCheckCausalVocabBoundedRead(t *testing.T) {
	dir := t.TempDir()
	testutil.SparseFile(t, filepath.Join(dir, loaders.ConfigName), 1<<30)
	tok := filepath.Join("data", "tiny-chat", "tokenizer.json")
	var err error
	n := testutil.Allocated(func() { err = CheckCausalVocab(tok, dir) })
	if err != nil {
		t.Errorf("CheckCausalVocab = %v, want nil (the loaders report the file)", err)
	}
	if n > 64<<20 {
		t.Errorf("CheckCausalVocab allocated %d MiB for a 1 GiB config.json", n>>20)
	}
}
