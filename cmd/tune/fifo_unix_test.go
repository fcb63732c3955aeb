//go:build linux || darwin

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestDataTrainNamedPipe (tester10 T10-13): a data.train that is a named pipe hung finetune for ever, opened
// and waited on for a writer. It is refused before the device opens, as bad input naming the key, the file and
// its kind; validate says the same.
func TestDataTrainNamedPipe(t *testing.T) {
	testutil.IsolateCache(t)
	p := filepath.Join(t.TempDir(), "train.tsv")
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	want := "data.train: " + p + " is a named pipe, not a regular file"
	for _, args := range [][]string{
		{"finetune", "--device", "cpu", tinyRecipe, "data.train=" + p, "training.output_dir=" + filepath.Join(t.TempDir(), "out")},
		{"validate", tinyRecipe, "data.train=" + p},
	} {
		done := make(chan struct{})
		var code int
		var stdout, stderr string
		go func() { code, stdout, stderr = runCLI(args...); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s waits on the named pipe", args[0])
		}
		if code != exitUsage || !strings.Contains(stderr, want) || strings.Contains(stdout, "device:") {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", args[0], code, stdout, stderr, exitUsage, want)
		}
	}
}
