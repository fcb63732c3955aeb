//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDirFollowsTheUmask: Dir and ReplaceDir give the directory perm less the umask, as os.Mkdir would (tester4:
// every checkpoint-N folder was 0700 under umask 0022 while the rest of the output_dir was 0755/0644).
func TestDirFollowsTheUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	parent := t.TempDir()
	for i, f := range []func(string, os.FileMode, func(string) error) error{Dir, ReplaceDir} {
		path := filepath.Join(parent, []string{"a", "b"}[i])
		if err := f(path, 0o777, func(string) error { return nil }); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o750 {
			t.Errorf("%s: permissions %v under umask 027, want 0750", path, st.Mode().Perm())
		}
		if entries, _ := os.ReadDir(path); len(entries) != 0 {
			t.Errorf("%s holds %v, want nothing (the probe removed)", path, entries)
		}
	}
}
