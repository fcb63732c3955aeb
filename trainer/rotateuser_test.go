package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notesInCheckpoint puts a user's file (and folder) into the checkpoint saved at step.
type notesInCheckpoint struct {
	CallbackBase
	step int
}

func (n *notesInCheckpoint) OnSave(e *Event, dir string) error {
	if e.State.GlobalStep == n.step {
		os.WriteFile(filepath.Join(dir, "my-notes.txt"), []byte("precious"), 0o644)
		os.MkdirAll(filepath.Join(dir, "plots"), 0o755)
		os.WriteFile(filepath.Join(dir, "plots", "a.png"), []byte("png"), 0o644)
	}
	return nil
}

// TestRotationKeepsAUsersFiles: save_total_limit removed an old checkpoint folder whole, with the notes a user
// had put in it (tester7 F11). The checkpoint's own files (those its manifest lists, and the manifest) are
// deleted, the folder is kept with the user's files and a warning says so; a checkpoint holding only its own
// files is removed whole as before.
func TestRotationKeepsAUsersFiles(t *testing.T) {
	a := testArgs(t)
	a.MaxSteps, a.SaveStrategy, a.SaveSteps, a.SaveTotalLimit = 6, IntervalSteps, 2, 1
	tr, _, logs := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(16, 16, 25), nil, WithCallbacks(&notesInCheckpoint{step: 2}))
	mustTrain(t, tr)
	ck2 := filepath.Join(a.OutputDir, "checkpoint-2")
	ents, _ := os.ReadDir(ck2)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "my-notes.txt plots" {
		t.Errorf("checkpoint-2 holds %v, want the user's my-notes.txt and plots alone", names)
	}
	if b, _ := os.ReadFile(filepath.Join(ck2, "my-notes.txt")); string(b) != "precious" {
		t.Errorf("my-notes.txt is %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ck2, "plots", "a.png")); string(b) != "png" {
		t.Errorf("plots/a.png is %q", b)
	}
	if _, err := os.Stat(filepath.Join(a.OutputDir, "checkpoint-4")); !os.IsNotExist(err) {
		t.Errorf("checkpoint-4 was not rotated away: %v", err)
	}
	if cps, _ := Checkpoints(a.OutputDir); len(cps) != 1 || filepath.Base(cps[0]) != "checkpoint-6" {
		t.Errorf("complete checkpoints %v, want checkpoint-6 alone", cps)
	}
	if want := "save_total_limit: " + ck2 + " holds my-notes.txt, which no tune checkpoint writes"; !strings.Contains(logs.String(), want) {
		t.Errorf("no warning %q:\n%s", want, logs.String())
	}
}
