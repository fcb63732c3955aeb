package trainer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordAll writes dir's record of a run's outputs (OutputsName) listing every file of a run's names there, as
// the run that wrote them would have.
func recordAll(t *testing.T, dir string) {
	t.Helper()
	if err := writeOutputs(dir, &outputsRecord{Files: topArtifacts(dir)}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckOutputDir(t *testing.T) {
	cases := []struct {
		name      string
		contents  []string // files; a trailing "/" makes a directory
		overwrite bool
		resume    string
		wantInUse bool
	}{
		{"missing output_dir is fine", nil, false, "", false},
		{"a folder of a user's files is refused", []string{"notes.txt", "data/"}, false, "", true},
		{"overwrite_output_dir writes beside a user's files", []string{"notes.txt", "data/"}, true, "", false},
		{"the run lock alone is an empty folder", []string{".tune.lock"}, false, "", false},
		{"a killed run's temporaries are no user files", []string{".tmp-checkpoint-20-123/", ".tmp-metrics.jsonl-9"}, false, "", false},
		{"a finished run is refused", []string{"trainer_state.json"}, false, "", true},
		{"a checkpoint is refused", []string{"checkpoint-500/"}, false, "", true},
		{"a user's model folder is refused", []string{"config.json", "model.safetensors"}, false, "", true},
		{"an adapter folder is refused", []string{"adapter_model.safetensors"}, false, "", true},
		{"overwrite_output_dir allows a previous run", []string{"trainer_state.json", "checkpoint-500/", OutputsName}, true, "", false},
		// Without the record of what the run wrote (a run of an older tune) its files cannot be told from a
		// user's: refused, nothing deleted (tester10 T10-3).
		{"overwrite_output_dir refuses a previous run without a record", []string{"trainer_state.json", "checkpoint-500/"}, true, "", true},
		{"the record alone is an empty folder", []string{OutputsName}, false, "", false},
		{"an interrupted run's log and its record", []string{"metrics.jsonl", OutputsName}, false, "", false},
		{"overwrite_output_dir never replaces a folder that is not a run's output", []string{"config.json", "vocab.txt"}, true, "", true},
		{"resuming allows it", []string{"checkpoint-500/"}, false, "true", false},
		// A run interrupted before its first checkpoint leaves only metrics.jsonl; a new run keeps it
		// (keepInterruptedLog). It was refused, with overwrite_output_dir too.
		{"an interrupted run's log alone", []string{"metrics.jsonl", ".tune.lock"}, false, "", false},
		{"an interrupted run's log, overwrite_output_dir", []string{"metrics.jsonl"}, true, "", false},
		{"an interrupted run's log and those kept before", []string{"metrics.jsonl", "metrics.jsonl.1", "metrics.jsonl.2"}, false, "", false},
		{"an interrupted run's log beside a user's file", []string{"metrics.jsonl", "notes.txt"}, false, "", true},
		{"an interrupted run's log beside a user's file, overwrite_output_dir", []string{"metrics.jsonl", "notes.txt"}, true, "", false},
		{"metrics.jsonl beside model files", []string{"metrics.jsonl", "config.json"}, false, "", true},
		{"metrics.jsonl beside model files, overwrite_output_dir", []string{"metrics.jsonl", "config.json"}, true, "", true},
		{"metrics.jsonl.01 is not a kept log", []string{"metrics.jsonl", "metrics.jsonl.01"}, false, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			for _, f := range c.contents {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if f[len(f)-1] == '/' {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if slices.Contains(c.contents, OutputsName) {
				recordAll(t, dir)
			}
			a := DefaultTrainingArguments()
			a.OutputDir, a.OverwriteOutputDir, a.ResumeFromCheckpoint = dir, c.overwrite, c.resume
			err := a.CheckOutputDir()
			if got := errors.Is(err, ErrOutputDirInUse); got != c.wantInUse {
				t.Fatalf("CheckOutputDir() = %v, want in-use %v", err, c.wantInUse)
			}
		})
	}
}

// TestCheckOutputDirUserFolder: a fresh run into a non-empty folder that holds no run is refused, as
// transformers' example scripts refuse it, naming the entries and the two ways on; the filesystem root is
// refused even with overwrite_output_dir.
func TestCheckOutputDirUserFolder(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt", "g.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("mine"), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	a := DefaultTrainingArguments()
	a.OutputDir = dir
	var inUse *OutputDirInUseError
	if err := a.CheckOutputDir(); !errors.As(err, &inUse) || !inUse.NotRun {
		t.Fatalf("CheckOutputDir = %v, want an *OutputDirInUseError with NotRun", err)
	}
	want := "training.output_dir " + dir + " is not empty (a.txt, b.txt, c.txt, d.txt, data/, 3 more) and holds no training run; " +
		"choose an empty or new training.output_dir, or set training.overwrite_output_dir=true to write the run beside those files (tune deletes none of them)"
	if got := inUse.Message("training."); got != want {
		t.Fatalf("Message:\n got %s\nwant %s", got, want)
	}
	for _, root := range []string{"/", "/.."} {
		a.OutputDir, a.OverwriteOutputDir = root, true
		if err := a.CheckOutputDir(); !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "root of the file system") {
			t.Errorf("CheckOutputDir(%q) = %v, want the root refused", root, err)
		}
	}
}

// TestCheckOutputDirHome: the home directory is refused as output_dir, also with overwrite_output_dir (which
// wrote config.json, model.safetensors, checkpoint-N/ and ten more files among the user's own), also named
// through a symbolic link or with a trailing slash; a folder inside it is fine.
func TestCheckOutputDirHome(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("# mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	link := filepath.Join(t.TempDir(), "h")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	a := DefaultTrainingArguments()
	for _, dir := range []string{home, home + "/", link} {
		a.OutputDir, a.OverwriteOutputDir = dir, true
		if err := a.CheckOutputDir(); !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "your home directory") {
			t.Errorf("CheckOutputDir(%q) = %v, want the home directory refused", dir, err)
		}
	}
	a.OutputDir = filepath.Join(home, "runs", "x")
	if err := a.CheckOutputDir(); err != nil {
		t.Errorf("a folder under the home directory: %v", err)
	}
}

// TestOverwriteKilledRun: a run killed before its end (SIGTERM from timeout(1): checkpoint-N with its
// trainer_state.json and metrics.jsonl, no top-level trainer_state.json) is a run's output, which
// overwrite_output_dir replaces, also the generation_config.json a decoder run wrote; the user's other files stay.
// Before, the killed run was "not the output of a training run" and could only be removed by hand, and a
// decoder run's generation_config.json survived an overwrite by a BERT run.
func TestOverwriteKilledRun(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint-125")
	for _, f := range []string{filepath.Join(ck, TrainerStateName), filepath.Join(dir, "metrics.jsonl"),
		filepath.Join(dir, "generation_config.json"), filepath.Join(dir, "notes.txt")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	recordAll(t, dir) // at the checkpoint's save
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("{}"), 0o644)
	a := DefaultTrainingArguments()
	a.OutputDir, a.OverwriteOutputDir = dir, true
	if err := a.CheckOutputDir(); err != nil {
		t.Fatalf("CheckOutputDir on a killed run's output: %v", err)
	}
	if err := a.ClearOutputDir(); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != "notes.txt" {
		t.Errorf("after ClearOutputDir: %v, want only notes.txt", left)
	}
	// A checkpoint-N folder without trainer_state.json is not a run's mark: still refused.
	if err := os.Mkdir(filepath.Join(dir, "checkpoint-7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckOutputDir(); !errors.Is(err, ErrOutputDirInUse) {
		t.Errorf("an empty checkpoint-7 folder: %v, want ErrOutputDirInUse", err)
	}
}

func TestCheckOutputDirFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "precious.txt")
	if err := os.WriteFile(p, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := DefaultTrainingArguments()
	a.OutputDir, a.OverwriteOutputDir = p, true
	if err := a.CheckOutputDir(); !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("CheckOutputDir on a file = %v, want an ErrInvalidArguments error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep me" {
		t.Fatalf("the file was changed: %q", b)
	}
}

// TestClearOutputDir: overwrite_output_dir removes exactly what a tune run writes, and nothing else.
func TestClearOutputDir(t *testing.T) {
	dir := t.TempDir()
	keep := []string{"notes.txt", "data.tsv"}
	gone := []string{"trainer_state.json", "metrics.jsonl", "adapter_model.safetensors", "config.json", "vocab.txt"}
	for _, f := range append(append([]string{}, keep...), gone...) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint-30"), 0o755); err != nil {
		t.Fatal(err)
	}
	recordAll(t, dir)
	keep = append(keep, "checkpoint-backup") // a user's folder that only looks like a checkpoint
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint-backup"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := DefaultTrainingArguments()
	a.OutputDir = dir
	if err := a.ClearOutputDir(); err != nil { // overwrite_output_dir false: a no-op
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint-30")); err != nil {
		t.Fatalf("ClearOutputDir without overwrite_output_dir removed files: %v", err)
	}
	a.OverwriteOutputDir = true
	if err := a.ClearOutputDir(); err != nil {
		t.Fatal(err)
	}
	for _, f := range keep {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
	for _, f := range append(gone, "checkpoint-30", OutputsName) {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s is still there", f)
		}
	}
}

// TestClearOutputDirNeedsARun: overwrite_output_dir deletes nothing in a folder that holds no trainer_state.json.
func TestClearOutputDirNeedsARun(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"vocab.txt", "config.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := DefaultTrainingArguments()
	a.OutputDir, a.OverwriteOutputDir = dir, true
	if err := a.ClearOutputDir(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vocab.txt", "config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was removed from a folder that is not a run's output: %v", f, err)
		}
	}
}

// TestOutputDirInUseNamesTheRun: a finished run's dozen files are summed up by those that say what it is.
func TestOutputDirInUseNamesTheRun(t *testing.T) {
	e := &OutputDirInUseError{Dir: "runs/tiny", Found: []string{"all_results.json", "checkpoint-500", "config.json",
		"eval_results.json", "metrics.jsonl", "model.safetensors", "tokenizer.json", "trainer_state.json", "vocab.txt"}}
	want := "training.output_dir runs/tiny already holds a training run or model files (trainer_state.json, checkpoint-500, " +
		"model.safetensors, all_results.json, config.json, 4 more); "
	if got := e.Message("training."); !strings.HasPrefix(got, want) {
		t.Errorf("Message:\n got %s\nwant %s...", got, want)
	}
}

// TestClearOutputDirKeepsForeignCheckpointFiles (tester4): overwrite_output_dir deleted every checkpoint-N folder,
// including ones no tune run wrote and the user's files inside them, without a word. A checkpoint-N folder with
// an entry its manifest does not list, or without a manifest one with a name no checkpoint writes, is an error
// naming it, and nothing is removed; the run's own checkpoints (complete, or without a manifest but with only
// checkpoint files) are removed as before.
func TestClearOutputDirKeepsForeignCheckpointFiles(t *testing.T) {
	write := func(t *testing.T, path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, foreign string // foreign: the path (in output_dir) that makes the overwrite an error; "" none
	}{
		{"a folder no run wrote", "checkpoint-999/important.txt"},
		{"a user's file in a complete checkpoint", "checkpoint-10/notes.txt"},
		{"a subdirectory in a checkpoint without a manifest", "checkpoint-20/sub/x"},
		{"only the run's checkpoints", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, TrainerStateName))
			for _, f := range []string{TrainerStateName, OptimizerName, "model.safetensors"} {
				write(t, filepath.Join(dir, "checkpoint-10", f))
				write(t, filepath.Join(dir, "checkpoint-20", f)) // no manifest: an older run's
			}
			if err := WriteCheckpointManifest(filepath.Join(dir, "checkpoint-10")); err != nil {
				t.Fatal(err)
			}
			recordAll(t, dir)
			if c.foreign != "" {
				write(t, filepath.Join(dir, c.foreign))
			}
			a := DefaultTrainingArguments()
			a.OutputDir, a.OverwriteOutputDir = dir, true
			checkErr := a.CheckOutputDir() // up front, before a run builds anything (tester10 T10-4)
			err := a.ClearOutputDir()
			if c.foreign == "" {
				if checkErr != nil {
					t.Fatalf("CheckOutputDir: %v", checkErr)
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range []string{TrainerStateName, "checkpoint-10", "checkpoint-20"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						t.Errorf("%s is still there", f)
					}
				}
				return
			}
			first, _, _ := strings.Cut(c.foreign, "/")
			rest := strings.TrimPrefix(c.foreign, first+"/")
			rest, _, _ = strings.Cut(rest, "/")
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, first)+" holds "+rest+", which no tune checkpoint writes") {
				t.Errorf("error %v, want one naming %s", err, c.foreign)
			}
			if checkErr == nil || checkErr.Error() != err.Error() {
				t.Errorf("CheckOutputDir: %v, want ClearOutputDir's error %v", checkErr, err)
			}
			for _, f := range []string{TrainerStateName, "checkpoint-10", "checkpoint-20", c.foreign} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("%s was removed: %v", f, err)
				}
			}
		})
	}
}

// TestOverwriteRefusesUnrecordedFiles (tester10 T10-3): overwrite_output_dir deleted every file of a run's names,
// also a user's PEFT adapter, generation_config.json and test_results.json beside a full fine-tune that wrote
// none of them. Files the run's record does not list are now refused by CheckOutputDir and ClearOutputDir,
// naming them, and nothing is removed; so is a run without a record (an older tune's), whose files cannot be
// told from a user's.
func TestOverwriteRefusesUnrecordedFiles(t *testing.T) {
	run := []string{TrainerStateName, MetricsName, "config.json", "model.safetensors", "vocab.txt", AllResultsName}
	user := []string{"adapter_model.safetensors", "adapter_config.json", "generation_config.json",
		"model.safetensors.index.json", "test_results.json"}
	write := func(dir string, names []string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("content of "+n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, recorded := range []bool{true, false} {
		dir := t.TempDir()
		write(dir, run)
		if recorded {
			recordAll(t, dir)
		}
		write(dir, append(user, "notes.txt"))
		a := DefaultTrainingArguments()
		a.OutputDir, a.OverwriteOutputDir = dir, true
		want := user
		if !recorded {
			want = append(slices.Clone(user), run...)
		}
		slices.Sort(want)
		for i, err := range []error{a.CheckOutputDir(), a.ClearOutputDir()} {
			var ue *UnrecordedOutputsError
			if !errors.As(err, &ue) || !slices.Equal(ue.Files, want) || ue.Recorded != recorded ||
				!errors.Is(err, ErrOutputDirInUse) || !strings.Contains(err.Error(), dir+" holds "+strings.Join(want, ", ")) ||
				!strings.Contains(err.Error(), "nothing was removed") {
				t.Fatalf("recorded %v, call %d: %v, want an UnrecordedOutputsError naming %v", recorded, i, err, want)
			}
		}
		for _, n := range append(append(user, run...), "notes.txt") {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != "content of "+n {
				t.Errorf("recorded %v: %s was changed or removed: %v", recorded, n, err)
			}
		}
	}

	// Without the user's files the recorded run is replaced: its files and the record go, other files stay.
	dir := t.TempDir()
	write(dir, run)
	recordAll(t, dir)
	write(dir, []string{"notes.txt"})
	a := DefaultTrainingArguments()
	a.OutputDir, a.OverwriteOutputDir = dir, true
	if err := a.CheckOutputDir(); err != nil {
		t.Fatal(err)
	}
	if err := a.ClearOutputDir(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 || left[0].Name() != "notes.txt" {
		t.Errorf("after ClearOutputDir: %v, want only notes.txt", left)
	}

	// A record that is not tune's is refused too, naming it.
	dir = t.TempDir()
	write(dir, run)
	os.WriteFile(filepath.Join(dir, OutputsName), []byte("not json"), 0o644)
	a.OutputDir = dir
	if err := a.CheckOutputDir(); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, OutputsName)+" is not tune's record") {
		t.Fatalf("a broken record: %v", err)
	}
}

// TestRecordOutputs: the record lists the files of a run's names written after the run started, not those
// already there (Kept); it is kept up to date, and nothing is recorded in a folder Train did not start.
func TestRecordOutputs(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "adapter_config.json"), nil, 0o644) // there before the run
	tr := &Trainer{args: DefaultTrainingArguments()}
	tr.args.OutputDir = dir
	tr.outputs = startOutputs(dir, false)
	if _, err := os.Stat(filepath.Join(dir, OutputsName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the record was written before the run's first save: %v", err)
	}
	os.WriteFile(filepath.Join(dir, MetricsName), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "checkpoint-5"), 0o755)
	if err := tr.recordOutputs(); err != nil { // a checkpoint's save
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, TrainerStateName), nil, 0o644)
	if err := RecordOutputs(dir); err != nil {
		t.Fatal(err)
	}
	r, err := readOutputs(dir)
	if err != nil || r == nil || !slices.Equal(r.Files, []string{MetricsName, TrainerStateName}) ||
		!slices.Equal(r.Kept, []string{"adapter_config.json"}) {
		t.Fatalf("record %+v, %v", r, err)
	}
	other := t.TempDir() // Trainer.SaveModel into another folder
	os.WriteFile(filepath.Join(other, "config.json"), nil, 0o644)
	if err := RecordOutputs(other); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, OutputsName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("RecordOutputs made a record in a folder Train did not start: %v", err)
	}
	if r := startOutputs(other, true); r != nil { // a resume in place keeps what is there
		t.Fatalf("a resume in place started a record: %+v", r)
	}
}

// TestOverwriteNamesEveryBlocker (tester13): with a user's files in two checkpoint-N folders and a run's file
// that its record does not list, overwrite_output_dir was refused three times, each naming one of them. It is
// refused once, naming all three, and nothing is removed.
func TestOverwriteNamesEveryBlocker(t *testing.T) {
	dir := t.TempDir()
	write := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{TrainerStateName, "checkpoint-20/" + TrainerStateName, "checkpoint-5/" + TrainerStateName} {
		write(f)
	}
	if err := WriteCheckpointManifest(filepath.Join(dir, "checkpoint-20")); err != nil {
		t.Fatal(err)
	}
	recordAll(t, dir)
	for _, f := range []string{"checkpoint-20/extra.bin", "checkpoint-5/f", "test_results.json"} {
		write(f)
	}
	a := DefaultTrainingArguments()
	a.OutputDir, a.OverwriteOutputDir = dir, true
	err := a.CheckOutputDir()
	for _, want := range []string{filepath.Join(dir, "checkpoint-20") + " holds extra.bin", filepath.Join(dir, "checkpoint-5") + " holds f",
		"test_results.json"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckOutputDir: %v, want it to name %q", err, want)
		}
	}
	if cerr := a.ClearOutputDir(); cerr == nil || err == nil || cerr.Error() != err.Error() {
		t.Errorf("ClearOutputDir: %v, want CheckOutputDir's error", cerr)
	}
	for _, f := range []string{TrainerStateName, "checkpoint-20/extra.bin", "checkpoint-5/f", "test_results.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}
