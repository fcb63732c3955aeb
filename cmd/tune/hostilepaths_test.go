package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnreadablePathsAreNamed checks paths that exist but do not work: a symbolic-link loop given as a model,
// tokenizer, inspect path or recipe, a directory given as a recipe, and a damaged Hugging Face cache entry. Each
// is bad usage (exit 2) naming the real problem; the loop used to be looked up as a Hub id ("not in the Hugging
// Face cache ... fetch it with tune download loop1"), the recipe cases exited 1, and the damaged cache entry was
// reported as "no such file or directory".
func TestUnreadablePathsAreNamed(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop1")
	if err := os.Symlink(filepath.Join(dir, "loop2"), loop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loop, filepath.Join(dir, "loop2")); err != nil {
		t.Fatal(err)
	}
	refs := filepath.Join(cache, "models--org--m", "refs")
	if err := os.MkdirAll(refs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(refs, "main"), []byte("abc123"), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--model", loop, "--data", dev}, "too many levels of symbolic links"},
		{[]string{"tokenize", "--tokenizer", loop}, "too many levels of symbolic links"},
		{[]string{"inspect", loop}, "too many levels of symbolic links"},
		{[]string{"validate", loop}, "cannot read the recipe: too many levels of symbolic links"},
		{[]string{"validate", dir}, "is a directory, not a recipe"},
		{[]string{"inspect", "org/m"}, `refs/main holds "abc123", not a commit hash: the cache is damaged`},
		{[]string{"inspect", "org/m", "--revision", "../../x"}, "is not a branch, tag or commit name"},
	} {
		code, _, stderr := runCLIStdin("", tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "tune download") {
			t.Errorf("%s: exit %d, %s; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}
