package testutil

import (
	"os"
	"runtime"
	"testing"
)

// SparseFile creates path as a file of size bytes that uses no disk (a hole: truncated, never written), for
// tests that a reader bounds what it reads; it skips the test where the file system cannot make one.
func SparseFile(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Skip(err)
	}
}

// Allocated returns the bytes the Go heap allocated while f ran (runtime.MemStats.TotalAlloc, so the whole
// process's allocations count: run it without parallel tests).
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
