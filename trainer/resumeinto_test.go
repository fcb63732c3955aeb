package trainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeIntoAFinishedRunIsRefused: resume_from_checkpoint naming another folder's checkpoint skipped the
// output_dir checks, so a resume into a finished run's output_dir replaced its model, trainer_state.json and
// log without overwrite_output_dir (tester7 F8). Such a resume now meets output_dir as a fresh run does:
// refused with the checkpoint named, nothing changed; with overwrite_output_dir the old run is replaced;
// into a new folder it trains. A checkpoint inside output_dir (by path, through a symbolic link, or true)
// still continues in place.
func TestResumeIntoAFinishedRunIsRefused(t *testing.T) {
	data := toyTask(20, 16, 11)
	trainer := func(a TrainingArguments) *Trainer {
		tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, data, nil)
		return tr
	}
	other := t.TempDir() // a run with a checkpoint at step 4
	mustTrain(t, trainer(resumeArgs(t, other)))
	ck := filepath.Join(other, "checkpoint-4")
	finished := t.TempDir()
	a := resumeArgs(t, finished)
	a.MaxSteps = 3
	mustTrain(t, trainer(a))
	state := filepath.Join(finished, TrainerStateName)
	before, _ := os.ReadFile(state)
	if _, err := os.Stat(filepath.Join(finished, "checkpoint-3")); err != nil {
		t.Fatal(err) // the final step's checkpoint
	}

	b := resumeArgs(t, finished)
	b.ResumeFromCheckpoint = ck
	_, err := trainer(b).Train(context.Background())
	var inUse *OutputDirInUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), "output_dir "+finished+" already holds a training run or model files (") ||
		!strings.Contains(err.Error(), "and resume_from_checkpoint "+ck+" is not one of its checkpoints: the resumed run would write its model, logs and results over them") {
		t.Fatalf("resume into a finished run: %v", err)
	}
	if after, _ := os.ReadFile(state); string(after) != string(before) {
		t.Fatal("the refused resume changed the finished run's trainer_state.json")
	}
	b.OverwriteOutputDir = true // replaces it, as a fresh run with overwrite_output_dir does
	if _, err := trainer(b).Train(context.Background()); err != nil {
		t.Fatalf("with overwrite_output_dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(finished, "checkpoint-3")); err == nil {
		t.Error("overwrite_output_dir kept the old run's checkpoint-3")
	}
	c := resumeArgs(t, filepath.Join(t.TempDir(), "new"))
	c.ResumeFromCheckpoint = ck
	if _, err := trainer(c).Train(context.Background()); err != nil {
		t.Fatalf("into a new folder: %v", err)
	}

	// In place: the run's own checkpoints, named in any of these ways, are no other folder's.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"true", "latest", ck, filepath.Join(link, "checkpoint-4")} {
		d := resumeArgs(t, other)
		d.ResumeFromCheckpoint = spec
		if !d.resumesInPlace() || d.CheckOutputDir() != nil {
			t.Errorf("resume_from_checkpoint %s into %s: in place %v, CheckOutputDir %v", spec, other, d.resumesInPlace(), d.CheckOutputDir())
		}
	}
	d := resumeArgs(t, other+"-sibling")
	d.ResumeFromCheckpoint = ck
	if d.resumesInPlace() {
		t.Errorf("%s is taken for a checkpoint of %s", ck, d.OutputDir)
	}
}
