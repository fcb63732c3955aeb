package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tune-ml/tune/internal/dirlock"
	"github.com/tune-ml/tune/internal/testutil"
)

// lockChildEnv names the folder TestLockHolderChild locks.
const lockChildEnv = "TUNE_LOCK_CHILD_DIR"

// TestLockHolderChild takes the run lock of $TUNE_LOCK_CHILD_DIR, says "locked" and holds it until killed (at
// most a minute): another process holding an output_dir, as a run in progress does.
func TestLockHolderChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("helper process")
	}
	if _, err := dirlock.Acquire(dir); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
}

// TestValidateChecksTheOutputDir: tune validate passed recipes that tune finetune refuses before it loads
// anything: an output_dir holding a finished run without overwrite_output_dir, one with files a run did not
// write under overwrite_output_dir=true, and one another run holds. validate refuses them with finetune's
// messages (exit 2), and creates and changes nothing there.
func TestValidateChecksTheOutputDir(t *testing.T) {
	testutil.IsolateCache(t)
	finished := tinyCheckpoint(t)
	foreign := t.TempDir()
	mustWriteFile(t, filepath.Join(foreign, "adapter_config.json"), "{}")
	mustWriteFile(t, filepath.Join(foreign, "adapter_model.safetensors"), "x")
	for _, c := range []struct{ name, dir, extra, want string }{
		{"a finished run without overwrite_output_dir", finished, "training.overwrite_output_dir=false",
			"training.output_dir " + finished + " already holds a training run or model files"},
		{"files a run did not write, with overwrite_output_dir", foreign, "training.overwrite_output_dir=true",
			foreign + " has adapter_config.json, adapter_model.safetensors but no trainer_state.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := dirNames(t, c.dir)
			code, stdout, stderr := runCLI("validate", tinyRecipe, "training.output_dir="+c.dir, c.extra)
			if code != exitUsage || !strings.Contains(stderr, c.want) || stdout != "" {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", code, stdout, stderr, exitUsage, c.want)
			}
			if after := dirNames(t, c.dir); strings.Join(after, " ") != strings.Join(before, " ") {
				t.Errorf("validate changed %s: %v, then %v", c.dir, before, after)
			}
		})
	}
	t.Run("a folder another run holds", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no flock")
		}
		out := filepath.Join(t.TempDir(), "out")
		child := exec.Command(os.Args[0], "-test.run=^TestLockHolderChild$", "-test.count=1")
		child.Env = append(os.Environ(), lockChildEnv+"="+out)
		pipe, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { child.Process.Kill(); child.Wait() })
		if line, err := bufio.NewReader(pipe).ReadString('\n'); err != nil || !strings.Contains(line, "locked") {
			t.Fatalf("the lock holder: %q %v", line, err)
		}
		code, stdout, stderr := runCLI("validate", tinyRecipe, "training.output_dir="+out)
		if want := out + " is in use by another tune run"; code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", code, stdout, stderr, exitUsage, want)
		}
	})
	t.Run("a new folder is not created", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "new")
		if code, _, stderr := runCLI("validate", tinyRecipe, "training.output_dir="+out); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("validate created %s", out)
		}
	})
}
