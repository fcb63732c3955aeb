package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// names lists the entries of dir, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// checkFile fails unless path holds want with permissions perm (permissions are not checked on Windows).
func checkFile(t *testing.T, path, want string, perm os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != perm {
		t.Errorf("%s has permissions %v, want %v", path, st.Mode().Perm(), perm)
	}
}

// checkNamesPath fails unless err is non-nil and its message names path.
func checkNamesPath(t *testing.T, err error, path string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want an error naming %s", err, path)
	}
}

// TestWriteFile checks that WriteFile creates or replaces the file with exactly the given content and
// permissions, and leaves nothing else in the directory.
func TestWriteFile(t *testing.T) {
	tests := []struct {
		name     string
		previous string // content already at the path; "" means no file
		data     string
		perm     os.FileMode
	}{
		{"a new file readable by all", "", "hello\n", 0o644},
		{"a new private file", "", "secret", 0o600},
		{"perm is applied exactly, whatever the umask", "", "x", 0o640},
		{"an existing file is replaced, content and permissions", "old content that is longer", "new", 0o644},
		{"an empty file", "old", "", 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.json")
			if tt.previous != "" {
				if err := os.WriteFile(path, []byte(tt.previous), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte(tt.data), tt.perm); err != nil {
				t.Fatal(err)
			}
			checkFile(t, path, tt.data, tt.perm)
			if got := names(t, dir); len(got) != 1 {
				t.Errorf("directory holds %v, want only out.json", got)
			}
		})
	}
}

// TestWriteStreams checks that Write's buffered writer delivers content larger than its buffer, in pieces of
// every size, intact.
func TestWriteStreams(t *testing.T) {
	var want bytes.Buffer
	for i := 0; want.Len() < 3*bufferSize; i++ {
		want.Write(bytes.Repeat([]byte{byte(i)}, i%1000))
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	err := Write(path, 0o644, func(w io.Writer) error {
		for i, b := 0, want.Bytes(); len(b) > 0; i++ {
			n := min(len(b), i%1000+bufferSize*(i%3)/2)
			if _, err := w.Write(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, want.String(), 0o644)
}

// TestWriteFailure checks that a failure at each point of a write leaves the previous file as it was, removes
// the temporary file, and returns an error that names the path and wraps the cause.
func TestWriteFailure(t *testing.T) {
	boom := errors.New("disk on fire")
	tests := []struct {
		name  string
		setup func(t *testing.T, path string) // makes the write fail
		write func(w io.Writer) error
		is    error // the error the returned one must wrap; nil: any
	}{
		{"the write function fails half way", nil, func(w io.Writer) error {
			w.Write(bytes.Repeat([]byte("n"), 2*bufferSize)) // more than the buffer: some reached the file
			return boom
		}, boom},
		{"the write function fails before writing", nil, func(io.Writer) error { return boom }, boom},
		{"the rename fails: a non-empty directory is at the path", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "trainer_state.json")
			if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(t, path)
			}
			before := names(t, dir)
			err := Write(path, 0o644, tt.write)
			checkNamesPath(t, err, path)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.is)
			}
			if tt.setup == nil {
				checkFile(t, path, "previous", 0o644)
			}
			if got := names(t, dir); strings.Join(got, ",") != strings.Join(before, ",") {
				t.Errorf("directory holds %v after the failed write, want %v (no temporary file)", got, before)
			}
		})
	}
}

// TestWritePanic checks that a write function that panics leaves no temporary file and the old file intact; the
// panic itself reaches the caller.
func TestWritePanic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "adapter_config.json")
	if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Errorf("recovered %v, want the write function's panic", r)
			}
		}()
		Write(path, 0o644, func(w io.Writer) error {
			io.WriteString(w, "partial")
			panic("kaboom")
		})
	}()
	checkFile(t, path, "previous", 0o644)
	if got := names(t, dir); len(got) != 1 {
		t.Errorf("directory holds %v after the panic, want only adapter_config.json", got)
	}
}

// TestWriteFileMissingDir checks that WriteFile into a directory that does not exist fails with an error naming
// the path (not the temporary file's name) and creates nothing.
func TestWriteFileMissingDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "absent", "config.json")
	err := WriteFile(path, []byte("{}"), 0o644)
	checkNamesPath(t, err, path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want it to wrap fs.ErrNotExist", err)
	}
	if strings.Contains(err.Error(), TempPrefix) {
		t.Errorf("err = %v names the temporary file", err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v, want nothing", got)
	}
}

// TestTempName checks that the temporary file lives beside the destination under TempPrefix + its base name, so
// that callers can recognise leftovers.
func TestTempName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	var during []string
	err := Write(path, 0o644, func(io.Writer) error {
		during = names(t, dir)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || !strings.HasPrefix(during[0], TempPrefix+"model.safetensors-") {
		t.Errorf("during the write the directory held %v, want one %smodel.safetensors-* file", during, TempPrefix)
	}
}

// writeTree is a build function that writes a config.json and a sub/weights.bin.
func writeTree(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sub", "weights.bin"), []byte("w"), 0o644)
}

// TestDir checks Dir's handling of what is at the destination: nothing or an empty directory is replaced by the
// built one; a non-empty directory or a file is refused with fs.ErrExist and left untouched; a failed build
// leaves no temporary directory.
func TestDir(t *testing.T) {
	boom := errors.New("save failed")
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string)
		build   func(dir string) error
		wantErr error // nil: success
	}{
		{"a new directory", nil, writeTree, nil},
		{"an empty directory is replaced", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, writeTree, nil},
		{"a non-empty directory is refused", func(t *testing.T, path string) {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(path, "mine.txt"), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, writeTree, fs.ErrExist},
		{"a file is refused", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, writeTree, fs.ErrExist},
		{"a failing build", nil, func(dir string) error {
			writeTree(dir)
			return boom
		}, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			path := filepath.Join(parent, "merged")
			if tt.setup != nil {
				tt.setup(t, path)
			}
			before := names(t, parent)
			err := Dir(path, 0o755, tt.build)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				checkFile(t, filepath.Join(path, "sub", "weights.bin"), "w", 0o644)
				if st, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o755) {
					t.Errorf("stat %s: %v, %v; want a directory with permissions 0755", path, st, err)
				}
				if got := names(t, parent); len(got) != 1 {
					t.Errorf("parent holds %v, want only merged", got)
				}
				return
			}
			checkNamesPath(t, err, path)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
			if got := names(t, parent); strings.Join(got, ",") != strings.Join(before, ",") {
				t.Errorf("parent holds %v after the failure, want %v", got, before)
			}
			if p := filepath.Join(path, "mine.txt"); tt.setup != nil && isFile(p) {
				checkFile(t, p, "mine", 0o644)
			}
		})
	}
}

// TestReplaceDir checks that ReplaceDir replaces an existing directory with the built one, leaving no old copy,
// and that a failed build leaves the existing directory untouched.
func TestReplaceDir(t *testing.T) {
	boom := errors.New("optimizer save failed")
	tests := []struct {
		name    string
		build   func(dir string) error
		wantErr error
	}{
		{"the existing directory is replaced", writeTree, nil},
		{"a failed build keeps the existing directory", func(string) error { return boom }, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			path := filepath.Join(parent, "checkpoint-4")
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(path, "old.json"), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := ReplaceDir(path, 0o700, tt.build)
			if got := names(t, parent); len(got) != 1 || got[0] != "checkpoint-4" {
				t.Errorf("parent holds %v, want only checkpoint-4", got)
			}
			if tt.wantErr != nil {
				checkNamesPath(t, err, path)
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
				}
				checkFile(t, filepath.Join(path, "old.json"), "old", 0o644)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(t, path); strings.Join(got, ",") != "config.json,sub" {
				t.Errorf("checkpoint-4 holds %v, want config.json,sub (the old content gone)", got)
			}
		})
	}
}

// TestSyncDir checks that SyncDir succeeds on a directory and reports a missing one.
func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Errorf("SyncDir on a directory: %v", err)
	}
	if runtime.GOOS != "windows" {
		if err := SyncDir(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("SyncDir on a missing directory: %v, want fs.ErrNotExist", err)
		}
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// TestWriteNew checks that WriteNew creates a new file with exactly the content and permissions given, and never
// replaces what is at the path: a file, a directory, a symbolic link (dangling or not), or a file created while
// the write function ran (the race a check-then-rename loses). Whatever was there is left as it was, the error
// wraps fs.ErrExist and names the path, and no temporary file remains.
func TestWriteNew(t *testing.T) {
	tests := []struct {
		name   string
		before func(t *testing.T, path string) // what is at path before WriteNew; nil: nothing
		during func(path string)               // run inside the write function; nil: nothing
		exists bool                            // WriteNew must refuse with fs.ErrExist
	}{
		{"a new file is created", nil, nil, false},
		{"an existing file is refused", func(t *testing.T, p string) { mustWrite(t, p, "the user's") }, nil, true},
		{"an existing directory is refused", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, nil, true},
		{"a dangling symbolic link is refused, not followed", func(t *testing.T, p string) {
			if err := os.Symlink(p+".target", p); err != nil {
				t.Skip("no symbolic links here:", err)
			}
		}, nil, true},
		{"a file created while writing is not replaced", nil, func(p string) { os.WriteFile(p, []byte("the user's"), 0o644) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "preds.jsonl")
			if tt.before != nil {
				tt.before(t, path)
			}
			err := WriteNew(path, 0o640, func(w io.Writer) error {
				if tt.during != nil {
					tt.during(path)
				}
				_, err := io.WriteString(w, "new content\n")
				return err
			})
			if !tt.exists {
				if err != nil {
					t.Fatal(err)
				}
				checkFile(t, path, "new content\n", 0o640)
			} else {
				checkNamesPath(t, err, path)
				if !errors.Is(err, fs.ErrExist) {
					t.Errorf("err = %v, want it to wrap fs.ErrExist", err)
				}
				if strings.Contains(err.Error(), TempPrefix) {
					t.Errorf("err = %v names the temporary file", err)
				}
				if st, lerr := os.Lstat(path); lerr != nil {
					t.Errorf("the path is gone: %v", lerr)
				} else if st.Mode().IsRegular() {
					if data, _ := os.ReadFile(path); string(data) != "the user's" {
						t.Errorf("the existing file now holds %q", data)
					}
				}
			}
			for _, n := range names(t, dir) {
				if strings.HasPrefix(n, TempPrefix) {
					t.Errorf("temporary %s left behind", n)
				}
			}
		})
	}
}

// TestWriteNewFailure checks that a failing write function leaves nothing at the path and no temporary file,
// and that its error is wrapped with the path.
func TestWriteNewFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	boom := errors.New("disk on fire")
	err := WriteNew(path, 0o644, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	checkNamesPath(t, err, path)
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap the write function's error", err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v, want nothing", got)
	}
}

// mustWrite writes content to path or fails the test.
func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
