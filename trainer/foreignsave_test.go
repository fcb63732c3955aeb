package trainer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestResumeRefusesAUsersCheckpointFolder: a resumed run replaced a user's own checkpoint-N folder (files no tune
// checkpoint writes) with its checkpoint of step N, and the files were lost, with only an "incomplete
// checkpoint, ignored" warning (tester10 T10-14). The run is refused before training (bad input), naming the
// folder and the file, and nothing in it is touched; a folder of a step before the resumed one is left alone.
func TestResumeRefusesAUsersCheckpointFolder(t *testing.T) {
	dir := trainWithCheckpoints(t)
	ck4, ck6 := filepath.Join(dir, "checkpoint-4"), filepath.Join(dir, "checkpoint-6")
	os.RemoveAll(ck4)
	os.RemoveAll(ck6)
	os.MkdirAll(ck4, 0o755)
	os.WriteFile(filepath.Join(ck4, "mine.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(ck4, TrainerStateName), []byte("{}"), 0o644) // a name tune writes: not named
	a := killArgs(t, dir)
	a.ResumeFromCheckpoint = "true"
	tr, _, logs := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(30, 16, 23), nil)
	_, err := tr.Train(t.Context())
	if strings.Contains(logs.String(), "replaces it") {
		t.Errorf("the warning says the user's folder is replaced:\n%s", logs.String())
	}
	want := ck4 + " holds mine.txt, which no tune checkpoint writes"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "move it (or the folder) out of "+dir) {
		t.Fatalf("Train: %v; want an error with %q", err, want)
	}
	if !badinput.Is(err) {
		t.Errorf("%v is not bad input (exit 2)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ck4, "mine.txt")); string(b) != "mine" {
		t.Errorf("mine.txt is %q", b)
	}
	if _, err := os.Stat(ck6); !os.IsNotExist(err) {
		t.Errorf("the run trained on (checkpoint-6: %v)", err)
	}

	// The user's folder below the resumed step is never saved into: the run goes on.
	os.Rename(ck4, filepath.Join(dir, "checkpoint-1"))
	tr, _, _ = newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(30, 16, 23), nil)
	mustTrain(t, tr)
	if b, _ := os.ReadFile(filepath.Join(dir, "checkpoint-1", "mine.txt")); string(b) != "mine" {
		t.Errorf("checkpoint-1/mine.txt is %q", b)
	}
}

// mkUserCheckpoint makes, at the save of step, a user's folder checkpoint-<at> holding their files.
type mkUserCheckpoint struct {
	CallbackBase
	step, at int
}

func (m *mkUserCheckpoint) OnSave(e *Event, dir string) error {
	if e.State.GlobalStep == m.step {
		d := filepath.Join(filepath.Dir(dir), CheckpointPrefix+strconv.Itoa(m.at))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "a.txt"), []byte("a"), 0o644)
		os.WriteFile(filepath.Join(d, "b.txt"), []byte("b"), 0o644)
	}
	return nil
}

// TestSaveRefusesAUsersCheckpointFolder: a folder checkpoint-N with a user's files that appears during the run
// is not replaced by the save of step N: the save fails (bad input), naming the folder and its files.
func TestSaveRefusesAUsersCheckpointFolder(t *testing.T) {
	dir := t.TempDir()
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), killArgs(t, dir), toyTask(30, 16, 23), nil,
		WithCallbacks(&mkUserCheckpoint{step: 2, at: 4}))
	_, err := tr.Train(t.Context())
	ck4 := filepath.Join(dir, "checkpoint-4")
	if err == nil || !strings.Contains(err.Error(), ck4+" holds a.txt, b.txt, which no tune checkpoint writes") || !badinput.Is(err) {
		t.Fatalf("Train: %v", err)
	}
	for _, n := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(ck4, n)); err != nil {
			t.Error(err)
		}
	}
}

func TestIsShardName(t *testing.T) {
	for n, want := range map[string]bool{"model-00001-of-00002.safetensors": true, "model-00001-of-00002.bin": false,
		"model-1-of-2.safetensors": false, "model-0000a-of-00002.safetensors": false, "mine.txt": false} {
		if isShardName(n) != want {
			t.Errorf("isShardName(%q) = %v", n, !want)
		}
	}
}
