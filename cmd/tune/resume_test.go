package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestFinetuneResumeChecks: a training.resume_from_checkpoint that names no checkpoint is a usage error
// (exit 2) naming the key, reported before the device opens and the model and data load.
func TestFinetuneResumeChecks(t *testing.T) {
	testutil.IsolateCache(t)
	empty := t.TempDir()
	missing := filepath.Join(empty, "checkpoint-7")
	for _, tt := range []struct{ name, resume, want string }{
		{"true without a checkpoint", "true", "training.resume_from_checkpoint: true, but training.output_dir " + empty + " holds no complete checkpoint"},
		{"a path that does not exist", missing, "training.resume_from_checkpoint: " + missing + " does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+empty,
				"training.resume_from_checkpoint="+tt.resume)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || strings.Contains(stdout, "device:") {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d with %q, before the device opens", code, stdout, stderr, exitUsage, tt.want)
			}
		})
	}
}

// TestFinetuneSaysWhereItResumes trains the tiny recipe for 4 steps with a checkpoint every 2, then resumes it
// to step 6: the resumed run says on stderr which checkpoint it continues from, at which step, as a plain line
// (not a warning). Both runs take about a second on the CPU.
func TestFinetuneSaysWhereItResumes(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"finetune", "--device", "cpu", tinyRecipe, "training.output_dir=" + out, "training.eval_strategy=no",
		"training.save_strategy=steps", "training.save_steps=2"}
	if code, stdout, stderr := runCLI(append(args, "training.max_steps=4")...); code != exitOK {
		t.Fatalf("first run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr := runCLI(append(args, "training.max_steps=6", "training.resume_from_checkpoint=true")...)
	if code != exitOK {
		t.Fatalf("resumed run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if want := "tune: resuming from " + filepath.Join(out, "checkpoint-4") + " (global step 4)\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}
