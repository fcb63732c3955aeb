package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tune-ml/tune/hub/hubtest"
)

// TestResolveHostilePaths checks two lookups that must not reach the cache as asked: a path that exists but
// cannot be read (a symbolic-link loop) is reported as itself, not as a Hub id missing from the cache, and a
// revision with ".." or a leading "/" is refused instead of leading the lookup out of the repository's refs/ and
// snapshots/ folders (--revision ../../../m found /tmp/h/m as the snapshot of org/m).
func TestResolveHostilePaths(t *testing.T) {
	cache := t.TempDir()
	writeHFCache(t, cache)
	t.Setenv("HF_HUB_CACHE", cache)
	t.Chdir(t.TempDir())
	if err := os.Symlink("loop2", "loop1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1", "loop2"); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve("loop1", ""); !errors.Is(err, syscall.ELOOP) || IsNotCached(err) {
		t.Errorf("Resolve(loop1) = %v; want the symbolic-link loop itself", err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{"../../outside", "../../../etc", "/etc", `..\x`, "refs/../../outside"} {
		_, err := Resolve("google-bert/bert-base-uncased", rev)
		if err == nil || IsNotCached(err) || !strings.Contains(err.Error(), "is not a branch, tag or commit name") {
			t.Errorf("revision %q: %v; want it refused", rev, err)
		}
	}
	for _, rev := range []string{"main", "refs/pr/1", "v1.0", "1dbc166cf8765166998eff31ade2eb64c8a40076"} {
		if !ValidRevision(rev) {
			t.Errorf("ValidRevision(%q) = false", rev)
		}
	}
}

// TestDownloadRefusesEscapingRevision checks that tune download --revision with ".." is refused before anything
// is fetched: the ref file refs/<revision> it writes would otherwise land outside the cache.
func TestDownloadRefusesEscapingRevision(t *testing.T) {
	h := hubtest.NewServer(t)
	h.Add("bert-base-uncased", bertRepo())
	root := t.TempDir()
	cache := filepath.Join(root, "cache")
	_, err := testClient(h, cache).Download(context.Background(), "bert-base-uncased", Options{Revision: "../../../victim"})
	if err == nil || !strings.Contains(err.Error(), "is not a branch, tag or commit name") {
		t.Fatalf("Download: %v; want the revision refused", err)
	}
	if _, err := os.Stat(filepath.Join(root, "victim")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written outside the cache: %v", err)
	}
}
