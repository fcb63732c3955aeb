package main

import (
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// fullWriter fails every write as a write to /dev/full does.
type fullWriter struct{ writes int }

func (f *fullWriter) Write(p []byte) (int, error) {
	f.writes++
	return 0, &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}
}

// TestOutputThatCannotBeWritten: tune eval and tune inspect exited 0 when standard output could not be written
// (tune eval ... > /dev/full: the metrics lost silently), tune --version exited 2 and --help 0 (tester10
// T10-10). Every command now exits 1 and says why.
func TestOutputThatCannotBeWritten(t *testing.T) {
	model := testutil.SharedData(t, "tiny-bert-random")
	for _, args := range [][]string{
		{"eval", "--device", "cpu", "--model", model, "--data", debugInput},
		{"inspect", model},
		{"--version"},
		{"--help"},
		{"download", "--help"},
		{"env"},
	} {
		out := &fullWriter{}
		var stderr strings.Builder
		code := run(args, out, &stderr)
		if code != exitError || out.writes == 0 || !strings.Contains(stderr.String(), "no space left on device") {
			t.Errorf("tune %s: exit %d (want %d), %d writes, stderr %q", strings.Join(args, " "), code, exitError, out.writes, stderr.String())
		}
		if args[0] == "eval" || args[0] == "inspect" {
			if want := "tune " + args[0] + ": writing the results to standard output: no space left on device"; !strings.Contains(stderr.String(), want) {
				t.Errorf("tune %s: stderr %q, want %q", args[0], stderr.String(), want)
			}
		}
	}
	// The same commands with a working output still exit 0.
	var stdout, stderr strings.Builder
	if code := run([]string{"inspect", model}, &stdout, &stderr); code != exitOK || stdout.Len() == 0 {
		t.Errorf("inspect: exit %d, stderr %q", code, stderr.String())
	}
}
