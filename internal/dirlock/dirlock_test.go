//go:build unix

package dirlock

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const childEnv = "TUNE_DIRLOCK_CHILD_DIR"

// TestHelperHolder is the child process of TestAcquire: it locks the directory, says so, and waits to be killed.
func TestHelperHolder(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("helper process for TestAcquire")
	}
	if _, err := Acquire(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "locked"), nil, 0o644)
	time.Sleep(time.Hour)
}

// TestAcquire: a directory held by another process is refused with a HeldError naming its pid; once that
// process is killed (SIGKILL, so it releases nothing) the lock is taken over and reported as stale; within a
// process the lock is shared; the last Release removes the lock file.
func TestAcquire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(dir, 0o755)
	child := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$", "-test.count=1")
	child.Env = append(os.Environ(), childEnv+"="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "locked")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never took the lock")
		}
	}
	// Check tells the same without taking anything.
	if err := Check(dir); !errors.As(err, new(*HeldError)) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(child.Process.Pid)) ||
		!strings.Contains(err.Error(), dir+" is in use by another tune run") {
		t.Fatalf("Check while the child holds it: %v", err)
	}
	_, err := Acquire(dir)
	var he *HeldError
	if !errors.As(err, &he) || he.Holder.PID != child.Process.Pid ||
		!strings.Contains(err.Error(), "pid "+strconv.Itoa(child.Process.Pid)) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Acquire while the child holds it: %v", err)
	}
	child.Process.Kill()
	child.Wait()
	if err := Check(dir); err != nil { // the stale lock file is no holder
		t.Fatalf("Check after the child was killed: %v", err)
	}

	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(l.Stale, "stale lock") || !strings.Contains(l.Stale, "pid "+strconv.Itoa(child.Process.Pid)) {
		t.Fatalf("Stale = %q", l.Stale)
	}
	l2, err := Acquire(dir) // the same process: shared
	if err != nil || l2.Stale != "" {
		t.Fatalf("second Acquire in one process: %v, %q", err, l2.Stale)
	}
	if err := Check(dir); err != nil { // held by this process
		t.Fatalf("Check of this process's lock: %v", err)
	}
	l.Release()
	l.Release() // twice is harmless
	if _, err := os.Stat(filepath.Join(dir, Name)); err != nil {
		t.Fatal("the lock file went while a handle still holds it")
	}
	l2.Release()
	if _, err := os.Stat(filepath.Join(dir, Name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after the last Release: %v", err)
	}
	if err := Check(dir); err != nil {
		t.Fatalf("Check without a lock file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, Name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Check created the lock file: %v", err)
	}
	if err := Check(filepath.Join(dir, "absent")); err != nil {
		t.Fatalf("Check of a missing folder: %v", err)
	}
}

// TestAcquireCreatesAndRemovesDir: a directory Acquire made is removed by Release when nothing was written
// into it, and kept otherwise.
func TestAcquireCreatesAndRemovesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the empty directory stayed: %v", err)
	}
	l, _ = Acquire(dir)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), nil, 0o644)
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireRefusesSymlink: a symbolic link at the lock path (to a user's file, dangling, or to a folder) and
// a folder there are refused with a *NotLockFileError naming the path and what to do; the link's target is
// neither written nor created, and the link stays (tester10 T10-7: the lock JSON was written through it).
func TestAcquireRefusesSymlink(t *testing.T) {
	tmp := t.TempDir()
	user := filepath.Join(tmp, "important.txt")
	os.WriteFile(user, []byte("important data\n"), 0o644)
	for _, c := range []struct{ name, target, what string }{
		{"a link to a user's file", user, "a symbolic link to " + user},
		{"a dangling link", filepath.Join(tmp, "absent.txt"), "a symbolic link to " + filepath.Join(tmp, "absent.txt")},
		{"a link to a folder", tmp, "a symbolic link to " + tmp},
		{"a folder", "", "a folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			os.MkdirAll(dir, 0o755)
			path := filepath.Join(dir, Name)
			if c.target != "" {
				if err := os.Symlink(c.target, path); err != nil {
					t.Fatal(err)
				}
			} else {
				os.Mkdir(path, 0o755)
			}
			for _, f := range []func() error{
				func() error { l, err := Acquire(dir); l.Release(); return err },
				func() error { return Check(dir) },
			} {
				err := f()
				var nl *NotLockFileError
				if !errors.As(err, &nl) || nl.Path != path || !strings.Contains(err.Error(), path+" is "+c.what+", not a tune lock file") ||
					!strings.Contains(err.Error(), "remove it") {
					t.Fatalf("got %v", err)
				}
			}
			if b, _ := os.ReadFile(user); string(b) != "important data\n" {
				t.Fatalf("the user's file now holds %q", b)
			}
			if _, err := os.Lstat(filepath.Join(tmp, "absent.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the dangling link's target was created: %v", err)
			}
			if fi, err := os.Lstat(path); err != nil || (c.target != "" && fi.Mode()&os.ModeSymlink == 0) {
				t.Fatalf("the entry at the lock path changed: %v", err)
			}
		})
	}
}

// TestAcquireReplacesStale: a stale lock file, unreadable or another run's, is removed and replaced by a new
// file, not written into: a file hard-linked there keeps its content.
func TestAcquireReplacesStale(t *testing.T) {
	for _, c := range []struct{ name, content, stale string }{
		{"unreadable", "important data\n", "held an unreadable stale lock"},
		{"another run's", `{"pid":4242,"host":"gpu1"}`, "held a stale lock of a run that ended without releasing it (pid 4242 on host gpu1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "out")
			os.MkdirAll(dir, 0o755)
			user := filepath.Join(tmp, "user.txt")
			os.WriteFile(user, []byte(c.content), 0o644)
			path := filepath.Join(dir, Name)
			if err := os.Link(user, path); err != nil {
				t.Skip(err)
			}
			l, err := Acquire(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			if !strings.Contains(l.Stale, path+" "+c.stale) {
				t.Fatalf("Stale = %q", l.Stale)
			}
			if b, _ := os.ReadFile(user); string(b) != c.content {
				t.Fatalf("the hard-linked file now holds %q", b)
			}
			var h Holder
			b, _ := os.ReadFile(path)
			if json.Unmarshal(b, &h) != nil || h.PID != os.Getpid() {
				t.Fatalf("the new lock file holds %q", b)
			}
			ui, _ := os.Stat(user)
			pi, _ := os.Stat(path)
			if os.SameFile(ui, pi) {
				t.Fatal("the lock file is still the old one")
			}
		})
	}
}
