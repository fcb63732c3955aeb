//go:build unix

package dirlock

import (
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
