package trainer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const killChildEnv = "TUNE_TRAINER_KILL_CHILD_DIR"

// killArgs is the run of the kill test: a checkpoint every 2 steps.
func killArgs(t *testing.T, dir string) TrainingArguments {
	a := testArgs(t)
	a.OutputDir, a.MaxSteps, a.SaveStrategy, a.SaveSteps = dir, 6, IntervalSteps, 2
	return a
}

// TestKillDuringSave kills (SIGKILL) a child process in the middle of writing its second checkpoint and checks
// that the first checkpoint is intact, that no half-written checkpoint-4 exists, and that a resume from
// "latest" continues from checkpoint-2 and cleans up the leftover temporary directory.
func TestKillDuringSave(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("running as the child of TestKillDuringSave")
	}
	dir := t.TempDir()
	// The child's own temporary directories go inside ours: it is killed, so its t.TempDir cleanup never runs
	// and each run left a /tmp/TestKillDuringSaveChild… behind (tester 12).
	childTmp := filepath.Join(t.TempDir(), "child-tmp")
	if err := os.Mkdir(childTmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringSaveChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir, "TMPDIR="+childTmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "saving")
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(marker) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the child never reached the middle of its second save")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	cps, _ := Checkpoints(dir)
	if len(cps) != 1 || filepath.Base(cps[0]) != "checkpoint-2" {
		t.Fatalf("checkpoints after the kill: %v, want only checkpoint-2", cps)
	}
	if fileExists(filepath.Join(dir, "checkpoint-4")) {
		t.Fatal("a checkpoint-4 directory exists although its save was killed")
	}
	leftovers := func() (n int) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix+CheckpointPrefix) {
				n++
			}
		}
		return n
	}
	if leftovers() != 1 {
		t.Fatalf("want the killed save's temporary directory in %s", dir)
	}
	a := killArgs(t, dir)
	a.ResumeFromCheckpoint = "latest"
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(30, 16, 23), nil)
	if out := mustTrain(t, tr); out.GlobalStep != 6 {
		t.Errorf("resumed run ended at step %d, want 6", out.GlobalStep)
	}
	if leftovers() != 0 {
		t.Error("the resumed run left the temporary directory in place")
	}
}

// TestKillDuringSaveChild is the child process of TestKillDuringSave: it trains and, in the middle of its second
// checkpoint (model and optimizer written, the rest not), creates a marker file and waits to be killed.
func TestKillDuringSaveChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("helper process for TestKillDuringSave")
	}
	saves := 0
	checkpointHook = func(stage string) error {
		if stage == "model" {
			saves++
		}
		if saves == 2 && stage == "optimizer" {
			os.WriteFile(filepath.Join(dir, "saving"), nil, 0o644)
			time.Sleep(time.Hour)
		}
		return nil
	}
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), killArgs(t, dir), toyTask(30, 16, 23), nil)
	mustTrain(t, tr)
	t.Fatal("the child finished training instead of being killed")
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
