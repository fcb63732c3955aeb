package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIncompleteCacheSnapshot: a cache snapshot whose model.safetensors links to a deleted blob is bad input
// (exit 2) by id and by path, and the message names the file, says the cache is incomplete and gives the tune
// download that repairs it, not "no such file or directory".
func TestIncompleteCacheSnapshot(t *testing.T) {
	cache := t.TempDir()
	const commit = "86b5e0934494bd15c9632b12f734a8a67f723594"
	repo := filepath.Join(cache, "models--me--tiny")
	snap := filepath.Join(repo, "snapshots", commit)
	os.MkdirAll(filepath.Join(repo, "blobs"), 0o755)
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644)
	cfg, err := os.ReadFile(filepath.Join("..", "..", "testdata", "bert", "saved_by_tune", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "blobs", "aaa"), cfg, 0o644)
	os.Symlink("../../blobs/aaa", filepath.Join(snap, "config.json"))
	os.Symlink("../../blobs/bbb", filepath.Join(snap, "model.safetensors"))
	t.Setenv("HF_HUB_CACHE", cache)
	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	for _, args := range [][]string{
		{"eval", "--device", "cpu", "--model", "me/tiny", "--data", dev},
		{"inspect", snap},
	} {
		code, _, stderr := runTune(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "holds me/tiny at revision") || !strings.Contains(stderr, "incomplete") ||
			!strings.Contains(stderr, "model.safetensors links to "+filepath.Join(repo, "blobs", "bbb")+", which is missing") ||
			strings.Contains(stderr, "no such file") {
			t.Errorf("tune %s: exit %d %s", args[0], code, stderr)
		}
	}
}
