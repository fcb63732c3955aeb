package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// TestResumeKeepsOneHistory: resuming a run at checkpoint-4 after it had logged step 5 leaves each step once in
// metrics.jsonl (step 5 appeared twice), the summary names the steps trained and the loss over the whole run
// (it said "trained 6 steps" with the mean of the resumed steps only), and resuming a finished run is a usage
// error saying so (it printed "trained 4 steps in 0.0s, train_loss 0").
func TestResumeKeepsOneHistory(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"finetune", "--device", "cpu", tinyRecipe, "training.output_dir=" + out, "training.eval_strategy=no",
		"training.save_strategy=steps", "training.save_steps=2", "training.logging_steps=1", "training.save_total_limit=null"}
	if code, stdout, stderr := runCLI(append(args, "training.max_steps=5")...); code != exitOK {
		t.Fatalf("first run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr := runCLI(append(args, "training.max_steps=6", "training.resume_from_checkpoint="+filepath.Join(out, "checkpoint-4"))...)
	if code != exitOK {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "trained steps 5-6 (resumed at step 4)") || !strings.Contains(stdout, "over the run's 6 steps") {
		t.Errorf("summary:\n%s", stdout)
	}
	data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[float64]int{}
	var losses []float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e map[string]float64
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if l, ok := e["loss"]; ok {
			seen[e["step"]]++
			losses = append(losses, l)
		}
	}
	for step, n := range seen {
		if n != 1 {
			t.Errorf("step %v logged %d times in metrics.jsonl", step, n)
		}
	}
	if len(seen) != 6 {
		t.Errorf("metrics.jsonl logs steps %v, want 1..6", seen)
	}
	var st struct {
		LogHistory []map[string]float64 `json:"log_history"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "trainer_state.json"))
	json.Unmarshal(b, &st)
	mean := 0.0
	for _, l := range losses {
		mean += l / float64(len(losses))
	}
	last := st.LogHistory[len(st.LogHistory)-1]
	if math.Abs(last["train_loss"]-mean) > 1e-6 {
		t.Errorf("train_loss %v, the mean of the 6 logged step losses is %v", last["train_loss"], mean)
	}
	code, _, stderr = runCLI(append(args, "training.max_steps=6", "training.resume_from_checkpoint=true")...)
	if code != exitUsage || !strings.Contains(stderr, "is at step 6, the end of training (max_steps 6): the run finished") {
		t.Errorf("resuming a finished run: exit %d %s", code, stderr)
	}
}

// TestFinetuneResumeAtTheEnd: a run whose last checkpoint is at max_steps but whose final model and results
// were never written (Ctrl-C in the final evaluation, tester4) is finished by a resume: the model, trainer
// state and results are written; a resume of the finished run is refused naming the model that exists; and
// another run's final checkpoint resumed into a new output_dir finishes there (it used to say "use the model
// saved in" that empty directory).
func TestFinetuneResumeAtTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"finetune", "--device", "cpu", tinyRecipe, "training.output_dir=" + out, "training.max_steps=4",
		"training.eval_strategy=no", "training.save_strategy=steps", "training.save_steps=4"}
	if code, stdout, stderr := runCLI(args...); code != exitOK {
		t.Fatalf("finetune exit %d\n%s\n%s", code, stdout, stderr)
	}
	// What a Ctrl-C after the last checkpoint leaves: checkpoint-4 and nothing of the end of training.
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if e.Name() != "checkpoint-4" {
			os.RemoveAll(filepath.Join(out, e.Name()))
		}
	}
	resume := append(slices.Clone(args), "training.resume_from_checkpoint=true")
	if code, stdout, stderr := runCLI(resume...); code != exitOK {
		t.Fatalf("resume at the end: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"model.safetensors", "trainer_state.json", "all_results.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the resumed run did not write %s", f)
		}
	}
	code, stdout, stderr := runCLI(resume...)
	if want := "use the model saved in " + filepath.Join(out, "model.safetensors"); code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("resume of a finished run: exit %d, %q; want exit %d with %q", code, stderr, exitUsage, want)
	}
	other := filepath.Join(t.TempDir(), "other")
	code, stdout, stderr = runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+other, "training.max_steps=4",
		"training.eval_strategy=no", "training.resume_from_checkpoint="+filepath.Join(out, "checkpoint-4"))
	if _, err := os.Stat(filepath.Join(other, "model.safetensors")); code != exitOK || err != nil {
		t.Errorf("another run's final checkpoint into a new output_dir: exit %d, model %v\n%s\n%s", code, err, stdout, stderr)
	}
}

// TestFinetuneResumeIntoAFinishedRun: resuming another run's checkpoint into a finished run's output_dir
// replaced that run's model, results and log, with exit 0 and no overwrite_output_dir (tester7 F8). It is
// refused with exit 2 naming the checkpoint and the ways on, and the finished run is left as it was.
func TestFinetuneResumeIntoAFinishedRun(t *testing.T) {
	testutil.IsolateCache(t)
	finished := tinyCheckpoint(t)
	other := filepath.Join(t.TempDir(), "other")
	if code, _, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+other, "training.max_steps=2",
		"training.eval_strategy=no", "training.save_strategy=steps", "training.save_steps=1"); code != exitOK {
		t.Fatalf("the other run: exit %d %s", code, stderr)
	}
	model, _ := os.ReadFile(filepath.Join(finished, "model.safetensors"))
	ck := filepath.Join(other, "checkpoint-2")
	code, _, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+finished, "training.max_steps=3",
		"training.eval_strategy=no", "training.resume_from_checkpoint="+ck)
	if code != exitUsage || !strings.Contains(stderr, "training.output_dir "+finished+" already holds a training run or model files (") ||
		!strings.Contains(stderr, "training.resume_from_checkpoint "+ck+" is not one of its checkpoints") ||
		!strings.Contains(stderr, "or choose another training.output_dir") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(finished, "model.safetensors")); string(after) != string(model) {
		t.Error("the refused resume changed the finished run's model")
	}
}

// TestResumePastTheEnd (tester10 T10-8): a checkpoint whose global_step is beyond the run's max_steps (another
// run's checkpoint with a smaller max_steps, or an edited trainer_state.json: 1e15 steps) was "finished" with
// exit 0 and "trained steps 5-4 (resumed at step 4)". It is refused with exit 2 naming trainer_state.json,
// global_step and max_steps, and the new output_dir is not left behind. A checkpoint at the end of the run
// still finishes it, and says that no step was left instead of a range that runs backwards.
func TestResumePastTheEnd(t *testing.T) {
	testutil.IsolateCache(t)
	ck := tinyResumeCheckpoint(t)
	for _, c := range []struct {
		name, ck, maxSteps, want string
	}{
		{"another run's checkpoint past this run's max_steps", ck, "2", "global_step 4 is beyond the end of this run (max_steps 2)"},
		{"an edited global_step of 1e15", editTrainerState(t, ck, "1000000000000000"), "20",
			"global_step 1000000000000000 is beyond the end of this run (max_steps 20)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out,
				"training.eval_strategy=no", "training.max_steps="+c.maxSteps, "training.resume_from_checkpoint="+c.ck)
			if code != exitUsage || !strings.Contains(stderr, filepath.Join(c.ck, "trainer_state.json")+": "+c.want) ||
				!strings.Contains(stderr, "set training.max_steps above") || strings.Contains(stdout, "trained steps") {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", code, stdout, stderr, exitUsage, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the refused resume left %s", out)
			}
		})
	}
	t.Run("a checkpoint at the end", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out,
			"training.eval_strategy=no", "training.max_steps=4", "training.resume_from_checkpoint="+ck)
		want := "no step left to train: the checkpoint is at step 4, the end of the run; saved the final model and results"
		if code != exitOK || !strings.Contains(stdout, want) || strings.Contains(stdout, "trained steps") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 with %q", code, stdout, stderr, want)
		}
	})
}
