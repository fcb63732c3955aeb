package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tune-ml/tune/internal/smallfile"
)

// OutputsName is the record, in output_dir, of the files a tune run wrote there (of OutputArtifacts: its
// model or adapter, tokenizer files, logs and results; checkpoint-N folders have their own manifest). Train
// begins it for a fresh run and writes it at the run's first save; every save of the run's files (checkpoints, the final trainer_state.json,
// Trainer.SaveModel, SaveMetrics, recipes' Run.SaveModel) brings it up to date through RecordOutputs, written
// atomically. overwrite_output_dir removes only the files it lists (ClearOutputDir), so that a file a user put
// beside a run under one of those names (a PEFT adapter beside a full fine-tune) is never deleted as the run's
// (tester10 T10-3).
const OutputsName = "tune_outputs.json"

// outputsFormat identifies tune's record of a run's outputs.
const outputsFormat = "tune-outputs-v1"

// outputsRecord is the content of OutputsName.
type outputsRecord struct {
	Format string `json:"format"` // outputsFormat
	// Files are the OutputArtifacts names in output_dir that the run wrote, sorted.
	Files []string `json:"files"`
	// Kept are the OutputArtifacts names present when the run started (none, after the checks of a fresh run):
	// not the run's, never listed in Files.
	Kept []string `json:"kept"`
}

// readOutputs returns output_dir's record, nil when there is none, and an error naming the file when it cannot
// be read or is not a record tune wrote.
func readOutputs(dir string) (*outputsRecord, error) {
	path := filepath.Join(dir, OutputsName)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	var b []byte
	if err == nil {
		b, err = smallfile.Read(path)
	}
	var r outputsRecord
	if err == nil {
		if err = json.Unmarshal(b, &r); err == nil && r.Format != outputsFormat {
			err = fmt.Errorf("format %q, not %q", r.Format, outputsFormat)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not tune's record of the files its run wrote (%v)", path, err)
	}
	return &r, nil
}

// writeOutputs writes r to dir's record, atomically.
func writeOutputs(dir string, r *outputsRecord) error {
	r.Format = outputsFormat
	if r.Files == nil {
		r.Files = []string{}
	}
	if r.Kept == nil {
		r.Kept = []string{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, OutputsName), append(b, '\n'))
}

// topArtifacts lists the OutputArtifacts files (not the checkpoint-N folders) present in dir, sorted.
func topArtifacts(dir string) []string {
	var names []string
	for _, n := range outputArtifactsIn(dir) {
		if !IsCheckpointDir(n) {
			names = append(names, n)
		}
	}
	return names
}

// startOutputs begins dir's record for a fresh run (the files already there are Kept, not the run's), which
// recordOutputs writes at the run's first save, so that a run that fails before it writes anything leaves
// no file; nil for a run that resumes in place, which keeps the record its first part wrote (none, for a run
// of a tune without records: its files stay unattributed, and a later overwrite_output_dir refuses them
// rather than deleting them).
func startOutputs(dir string, resumesInPlace bool) *outputsRecord {
	if resumesInPlace {
		return nil
	}
	return &outputsRecord{Kept: topArtifacts(dir)}
}

// recordOutputs writes the run's record: the one Train began at the first call, then RecordOutputs.
func (t *Trainer) recordOutputs() error {
	if r := t.outputs; r != nil {
		if err := writeOutputs(t.args.OutputDir, r); err != nil {
			return err
		}
		t.outputs = nil
	}
	return RecordOutputs(t.args.OutputDir)
}

// RecordOutputs brings output_dir's record of the files its run wrote (OutputsName) up to date with the
// OutputArtifacts present now, leaving out those Kept from before the run. It does nothing in a folder without
// a record (a directory Train did not start: Trainer.SaveModel into another folder, or a resumed run of a tune
// without records). The Trainer and recipes' Run.SaveModel call it after each save; a program that writes
// other files of those names into output_dir calls it after them, or an overwrite_output_dir run refuses them
// as files the run did not write.
func RecordOutputs(dir string) error {
	r, err := readOutputs(dir)
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	if r == nil {
		return nil
	}
	var files []string
	for _, n := range topArtifacts(dir) {
		if !slices.Contains(r.Kept, n) {
			files = append(files, n)
		}
	}
	if slices.Equal(files, r.Files) {
		return nil
	}
	r.Files = files
	return writeOutputs(dir, r)
}

// unrecordedOutputs returns the OutputArtifacts files in dir that its run's record does not list: all of them
// when there is no record (a run of a tune that kept none), and the error of a record that cannot be read.
func unrecordedOutputs(dir string) (names []string, recorded bool, err error) {
	r, err := readOutputs(dir)
	if err != nil {
		return nil, false, err
	}
	for _, n := range topArtifacts(dir) {
		if r == nil || !slices.Contains(r.Files, n) {
			names = append(names, n)
		}
	}
	return names, r != nil, nil
}

// UnrecordedOutputsError is CheckOutputDir's and ClearOutputDir's error when overwrite_output_dir would
// replace a previous run whose folder holds files of a run's names (OutputArtifacts) that the run's record
// (OutputsName) does not list: a user's files, or those of a run of a tune that kept no record. Nothing is
// removed: tune cannot tell them from the user's, and a new run would replace or merge into some of them.
type UnrecordedOutputsError struct {
	Dir      string   // the output_dir
	Files    []string // the unrecorded files, sorted
	Recorded bool     // whether the folder has a record at all
}

// Error names the files and what to do.
func (e *UnrecordedOutputsError) Error() string {
	why := "which its previous run did not write (its " + OutputsName + " does not list them)"
	if !e.Recorded {
		why = "and no " + OutputsName + " recording which files its previous run wrote (a run of an older tune), " +
			"so tune cannot tell them from yours"
	}
	return fmt.Sprintf("trainer: overwrite_output_dir: %s holds %s, %s: overwrite_output_dir removes only what a "+
		"run wrote, so nothing was removed; move the files you want to keep out of %s and delete the rest (or "+
		"the folder), or choose another output_dir", e.Dir, strings.Join(e.Files, ", "), why, e.Dir)
}

// Unwrap returns ErrOutputDirInUse.
func (e *UnrecordedOutputsError) Unwrap() error { return ErrOutputDirInUse }
