package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the repository root (the directory holding go.mod), found by walking up from the working
// directory of the test.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testutil: go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// SharedData returns the path of rel inside the project's shared data folder (../shared/data beside the
// repository, or $TUNE_SHARED_DATA), and skips the test with a clear message when it is absent.
func SharedData(t testing.TB, rel ...string) string {
	t.Helper()
	base := os.Getenv("TUNE_SHARED_DATA")
	if base == "" {
		base = filepath.Join(RepoRoot(t), "..", "shared", "data")
	}
	p := filepath.Join(append([]string{base}, rel...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data %s not present (set TUNE_SHARED_DATA or put ../shared/data beside the repo): %v", p, err)
	}
	return p
}

// Testdata returns the path of rel under the repository's testdata/ folder.
func Testdata(t testing.TB, rel ...string) string {
	t.Helper()
	return filepath.Join(append([]string{RepoRoot(t), "testdata"}, rel...)...)
}

// IsolateCache points the user cache directory (os.UserCacheDir: $XDG_CACHE_HOME, else under $HOME) at a
// temporary directory for the rest of the test, so what the code under test caches there (the unpacked
// embedded recipe data, compiled kernels) stays inside the test. It uses t.Setenv, so the test must not be
// parallel.
func IsolateCache(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
}
