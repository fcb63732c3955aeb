package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/trainer"
)

// TestCheckFilesResume: a training.resume_from_checkpoint that names no checkpoint is reported by CheckFiles
// (so tune validate and tune finetune refuse it before the model and data load, not when training starts), and
// one that names a checkpoint as the Trainer resolves it passes.
func TestCheckFilesResume(t *testing.T) {
	out := t.TempDir()
	ckpt := filepath.Join(out, "checkpoint-10")
	half := filepath.Join(out, "checkpoint-20") // a folder without trainer_state.json, as a crash mid-save would leave
	for _, d := range []string{ckpt, half} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ckpt, "trainer_state.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := trainer.WriteCheckpointManifest(ckpt); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	halfOnly := t.TempDir()
	if err := os.Mkdir(filepath.Join(halfOnly, "checkpoint-20"), 0o755); err != nil {
		t.Fatal(err)
	}
	const key = "training.resume_from_checkpoint: "
	for _, c := range []struct {
		name, outputDir, resume, want string
	}{
		{"not resuming", empty, "", ""},
		{"true with a checkpoint in output_dir", out, "true", ""},
		{"latest with a checkpoint in output_dir", out, "latest", ""},
		{"a checkpoint folder", empty, ckpt, ""},
		{"true without a checkpoint in output_dir", empty, "true",
			key + "true, but training.output_dir " + empty + " holds no complete checkpoint (a checkpoint-<step> folder with its checkpoint_manifest.json)"},
		{"a path that does not exist", out, filepath.Join(out, "checkpoint-99"),
			key + filepath.Join(out, "checkpoint-99") + " does not exist"},
		{"a folder that is not a checkpoint", out, half, key + half + " is not a complete checkpoint: no checkpoint_manifest.json"},
		{"a file", out, file, key + file + " is a file"},
		{"true with only an incomplete checkpoint", halfOnly, "true", "holds no complete checkpoint (a checkpoint-<step> folder with its " +
			"checkpoint_manifest.json) to resume from; checkpoint-20 is incomplete: no checkpoint_manifest.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Default()
			r.Source = "r.yaml"
			r.Training.OutputDir, r.Training.ResumeFromCheckpoint = c.outputDir, c.resume
			err := r.CheckFiles()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}
