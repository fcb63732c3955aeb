package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tune-ml/tune/internal/dirlock"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/trainer"
)

// cliChildEnv holds the arguments (JSON) of TestCLIChild.
const cliChildEnv = "TUNE_CLI_CHILD_ARGS"

// TestCLIChild runs the CLI with the arguments in $TUNE_CLI_CHILD_ARGS and exits with its status: a second
// process for tests that need one (two runs at once).
func TestCLIChild(t *testing.T) {
	raw := os.Getenv(cliChildEnv)
	if raw == "" {
		t.Skip("helper process")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// startCLI starts the CLI in a child process.
func startCLI(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	return startCLIStderr(t, nil, args...)
}

// startCLIStderr is startCLI with the child's stderr written to stderr (nil: discarded).
func startCLIStderr(t *testing.T, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIChild$", "-test.count=1")
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(), cliChildEnv+"="+string(raw))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestFinetuneConcurrentRuns: while one tune finetune trains into an output_dir, a second one on the same
// directory is refused with exit 2 before it loads anything, naming the first run's pid and host; the first run
// is untouched. Killed with SIGKILL, the first run leaves a stale lock, which the next run reports and takes
// over.
func TestFinetuneConcurrentRuns(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "out")
	first := startCLI(t, "finetune", tinyRecipe, "training.output_dir="+out, "training.max_steps=100000",
		"training.eval_strategy=no", "training.save_strategy=no")
	lockFile := filepath.Join(out, dirlock.Name)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(lockFile); err == nil && len(b) > 0 {
			if _, err := os.Stat(filepath.Join(out, "metrics.jsonl")); err == nil {
				break // training has begun
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never started training")
		}
	}
	code, stdout, stderr := runCLI("finetune", tinyRecipe, "training.output_dir="+out, "training.max_steps=2",
		"training.overwrite_output_dir=true")
	host, _ := os.Hostname()
	if code != exitUsage || !strings.Contains(stderr, out+" is in use by another tune run (pid "+strconv.Itoa(first.Process.Pid)+" on host "+host) {
		t.Fatalf("second run: exit %d, stdout %s\nstderr %s", code, stdout, stderr)
	}
	if first.ProcessState != nil {
		t.Fatal("the first run ended")
	}
	first.Process.Kill()
	first.Wait()

	// The killed run's lock file stays behind; the next run (resuming nothing, replacing the killed run's
	// output) says it was stale and goes on.
	os.Remove(filepath.Join(out, "metrics.jsonl"))
	code, _, stderr = runCLI("finetune", tinyRecipe, "training.output_dir="+out, "training.max_steps=1",
		"training.eval_strategy=no", "training.save_strategy=no")
	if code != 0 || !strings.Contains(stderr, "stale lock") || !strings.Contains(stderr, "pid "+strconv.Itoa(first.Process.Pid)) {
		t.Fatalf("run after the kill: exit %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Fatalf("the lock file outlived its run: %v", err)
	}
}

// TestFinetuneSIGTERM: SIGTERM (what timeout(1) and job schedulers send) stops a run as Ctrl-C does, with the
// same message naming the checkpoint to resume from and the run lock released; before, the process died by the
// signal mid-step and left a stale .tune.lock. The exit status is 128 + the signal, as a shell reports a process
// the signal killed: 130 for SIGINT, 143 for SIGTERM (it was 130 for both, and a scheduler could not tell its
// own stop from a Ctrl-C).
func TestFinetuneSIGTERM(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM")
	}
	testutil.IsolateCache(t)
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			var stderr strings.Builder
			child := startCLIStderr(t, &stderr, "finetune", tinyRecipe, "training.output_dir="+out, "training.max_steps=100000",
				"training.eval_strategy=no", "training.save_strategy=steps", "training.save_steps=20")
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(out, "checkpoint-20", trainer.ManifestName)); err == nil {
					break // training has begun and saved a checkpoint
				}
				if time.Now().After(deadline) {
					t.Fatal("the run never saved checkpoint-20")
				}
			}
			if err := child.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			child.Wait()
			if code := child.ProcessState.ExitCode(); code != c.code || code != 128+int(c.sig) {
				t.Errorf("after %v: %v (exit %d), want exit %d", c.sig, child.ProcessState, code, c.code)
			}
			if !strings.Contains(stderr.String(), "resume_from_checkpoint") || !strings.Contains(stderr.String(), "checkpoint-") {
				t.Errorf("after %v: the message does not name the checkpoint to resume from:\n%s", c.sig, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(out, dirlock.Name)); !os.IsNotExist(err) {
				t.Errorf("the lock file outlived its run: %v", err)
			}
		})
	}
}

// TestResumeIntoABusyFolder: resume_from_checkpoint=true into an output_dir that a running tune finetune holds,
// before its first save, said "holds no complete checkpoint", and the user would start afresh in a folder
// being written (tester7 F3). finetune and validate now name the running run, as a plain run into it does.
func TestResumeIntoABusyFolder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "out")
	first := startCLI(t, "finetune", tinyRecipe, "training.output_dir="+out, "training.max_steps=100000",
		"training.eval_strategy=no", "training.save_strategy=no")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(out, "metrics.jsonl")); err == nil {
			break // training has begun
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never started training")
		}
	}
	for _, cmd := range []string{"finetune", "validate"} {
		code, _, stderr := runCLI(cmd, tinyRecipe, "training.output_dir="+out, "training.resume_from_checkpoint=true")
		if code != exitUsage || !strings.Contains(stderr, out+" is in use by another tune run (pid "+strconv.Itoa(first.Process.Pid)) ||
			strings.Contains(stderr, "no complete checkpoint") {
			t.Errorf("%s: exit %d, stderr %s", cmd, code, stderr)
		}
	}
}

// TestFinetuneSymlinkedLock: a symbolic link at output_dir/.tune.lock is refused with exit 2 before anything is
// built, naming the path and saying to remove it; the file it points to is untouched (tester10 T10-7: the
// run wrote its lock JSON through the link, over the user's file).
func TestFinetuneSymlinkedLock(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links")
	}
	testutil.IsolateCache(t)
	tmp := t.TempDir()
	user := filepath.Join(tmp, "important.txt")
	os.WriteFile(user, []byte("important data\n"), 0o644)
	out := filepath.Join(tmp, "out")
	os.MkdirAll(out, 0o755)
	lock := filepath.Join(out, dirlock.Name)
	if err := os.Symlink(user, lock); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("finetune", tinyRecipe, "training.output_dir="+out, "training.max_steps=1")
	if code != exitUsage || !strings.Contains(stderr, lock+" is a symbolic link to "+user+", not a tune lock file") ||
		!strings.Contains(stderr, "remove it") || strings.Contains(stdout, "device:") {
		t.Fatalf("exit %d, stdout %s\nstderr %s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(user); string(b) != "important data\n" {
		t.Fatalf("the user's file now holds %q", b)
	}
}
