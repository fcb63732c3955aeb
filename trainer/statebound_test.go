package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// editedCheckpoint runs resumeArgs until its checkpoint at step 4, then rewrites that checkpoint's
// trainer_state.json with edit (on the decoded JSON object, or the raw bytes when raw is set) and its manifest,
// so the checkpoint is complete and only the state differs. It returns the checkpoint's folder.
func editedCheckpoint(t *testing.T, edit func(map[string]any), raw func([]byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	first, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), resumeArgs(t, dir), toyTask(20, 16, 11), nil,
		WithCallbacks(&stopAfterSave{step: 4, cancel: cancel}))
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v", err)
	}
	ck := filepath.Join(dir, "checkpoint-4")
	p := filepath.Join(ck, TrainerStateName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var st map[string]any
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		edit(st)
		data, _ = json.Marshal(st)
	}
	if raw != nil {
		data = raw(data)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpointManifest(ck); err != nil {
		t.Fatal(err)
	}
	return ck
}

// resumeFrom trains resumeArgs in a new output_dir from the checkpoint ck.
func resumeFrom(t *testing.T, ck string) error {
	a := resumeArgs(t, t.TempDir())
	a.ResumeFromCheckpoint = ck
	tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, toyTask(20, 16, 11), nil)
	_, err := tr.Train(context.Background())
	return err
}

// TestResumeBoundsTheStateFile: a resume read trainer_state.json whole, whatever its size, and kept its
// log_history as it found it (#26): an edited or wrong file of gigabytes took as much memory again. The file
// is now refused before it is read when it is larger than a run of the recipe's steps writes (bad input naming
// it), with a log_history of valid entries too; an unedited checkpoint resumes as before.
func TestResumeBoundsTheStateFile(t *testing.T) {
	if err := resumeFrom(t, editedCheckpoint(t, nil, nil)); err != nil {
		t.Fatalf("an unedited checkpoint: %v", err)
	}
	limit := StateBaseBytes + 9*StateBytesPerStep // resumeArgs: max_steps 9
	ck := editedCheckpoint(t, func(st map[string]any) {
		entry := map[string]any{"loss": 0.5, "grad_norm": 1.0, "learning_rate": 1e-4, "epoch": 0.5, "step": 1}
		one, _ := json.Marshal(entry)
		n := limit/(len(one)+1) + 1
		h := make([]any, n)
		for i := range h {
			h[i] = entry
		}
		st["log_history"] = h
	}, nil)
	err := resumeFrom(t, ck)
	p := filepath.Join(ck, TrainerStateName)
	fi, _ := os.Stat(p)
	want := fmt.Sprintf("%s is %d bytes, more than the %d a trainer_state.json of a run of 9 steps takes", p, fi.Size(), limit)
	if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a %d-byte trainer_state.json: %v; want bad input saying %q", fi.Size(), err, want)
	}
	// The bound follows the run: the same file is read for a run long enough to have written it.
	if _, err := LoadTrainerState(p, int(fi.Size()/StateBytesPerStep)); err != nil {
		t.Errorf("the same file for a run of %d steps: %v", fi.Size()/StateBytesPerStep, err)
	}
}

// TestResumeChecksTheLogHistory: the entries of log_history were kept as the file had them, and a step beyond
// global_step, an entry without one or a negative global_step resumed without a word (#26). Each is now bad
// input naming the file and the entry.
func TestResumeChecksTheLogHistory(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		raw  func([]byte) []byte
		want string
	}{
		{"step beyond global_step", func(st map[string]any) {
			st["log_history"] = append(st["log_history"].([]any), map[string]any{"loss": 0.1, "step": 5e9})
		}, nil, "log_history[4] has step 5e+09, not a step of a run at global_step 4"},
		{"no step", func(st map[string]any) {
			st["log_history"].([]any)[1] = map[string]any{"loss": 0.1}
		}, nil, "log_history[1] has no step"},
		{"fractional step", func(st map[string]any) {
			st["log_history"].([]any)[0].(map[string]any)["step"] = 0.5
		}, nil, "log_history[0] has step 0.5"},
		{"null entry", func(st map[string]any) {
			st["log_history"].([]any)[2] = nil
		}, nil, "log_history[2] has no step"},
		{"negative global_step", func(st map[string]any) { st["global_step"] = -3 }, nil, "global_step -3 is not a step count"},
		{"too many values", func(st map[string]any) {
			e := map[string]any{"step": 1}
			for i := range maxLogKeys + 1 {
				e[fmt.Sprint("k", i)] = i
			}
			st["log_history"].([]any)[0] = e
		}, nil, fmt.Sprintf("log_history[0] has %d values, more than the %d", maxLogKeys+2, maxLogKeys)},
		{"not JSON", nil, func(b []byte) []byte { return b[:len(b)/2] }, "unexpected end of JSON input"},
	} {
		ck := editedCheckpoint(t, c.edit, c.raw)
		err := resumeFrom(t, ck)
		if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), filepath.Join(ck, TrainerStateName)+": ") ||
			!strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want bad input naming the file and %q", c.name, err, c.want)
		}
	}
}

// TestResumeInAnotherPrecisionWarns: an FP16 run's checkpoint resumed in FP32 went on without a word (tester7
// F8); the resume now warns naming both precisions (training_args.json's fp16 and bf16 against the run's), and
// says nothing when they agree.
func TestResumeInAnotherPrecisionWarns(t *testing.T) {
	ck := editedCheckpoint(t, nil, nil)
	resume := func() string {
		a := resumeArgs(t, t.TempDir())
		a.ResumeFromCheckpoint = ck
		tr, _, logs := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, toyTask(20, 16, 11), nil)
		mustTrain(t, tr)
		return logs.String()
	}
	if logs := resume(); strings.Contains(logs, "the checkpoint was trained in") {
		t.Errorf("the same precision: %s", logs)
	}
	p := filepath.Join(ck, TrainingArgsName)
	data, _ := os.ReadFile(p)
	var args map[string]any
	if err := json.Unmarshal(data, &args); err != nil || args["fp16"] != false {
		t.Fatalf("%s: %v %v", p, err, args["fp16"])
	}
	args["fp16"] = true
	data, _ = json.Marshal(args)
	os.WriteFile(p, data, 0o644)
	if err := WriteCheckpointManifest(ck); err != nil {
		t.Fatal(err)
	}
	if want := "the checkpoint was trained in fp16 and this run trains in fp32"; !strings.Contains(resume(), want) {
		t.Errorf("no warning %q", want)
	}
}
