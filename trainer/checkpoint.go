package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/jsonerr"
	"github.com/tune-ml/tune/internal/smallfile"
)

// Checkpoint layout: output_dir/checkpoint-<global_step>/ holds what Model.Save writes (config.json +
// model.safetensors, or adapter_config.json + adapter_model.safetensors) and the files below. They mirror
// transformers' optimizer.pt, scheduler.pt, scaler.pt, rng_state.pth and training_args.bin (_save_checkpoint in transformers' trainer.py) in
// formats Go and Python both read without pickle.
const (
	// CheckpointPrefix starts every checkpoint directory name (transformers' PREFIX_CHECKPOINT_DIR + "-").
	CheckpointPrefix = "checkpoint-"
	// OptimizerName holds AdamW's exp_avg and exp_avg_sq (flat F32 over the trainable buffer) with "step", the
	// param group and the parameter layout in the safetensors metadata.
	OptimizerName = "optimizer.safetensors"
	// SchedulerName holds SchedulerState (LambdaLR's state_dict keys).
	SchedulerName = "scheduler.json"
	// ScalerName holds amp.GradScalerState with PyTorch's keys; written for FP16 runs only, as transformers does.
	ScalerName = "scaler.json"
	// RNGStateName holds DataState: the seeds and the position in the data and the dropout stream.
	RNGStateName = "rng_state.json"
	// TrainingArgsName holds the TrainingArguments of the run as JSON with HF's keys.
	TrainingArgsName = "training_args.json"
	// tmpPrefix starts the temporary directory a checkpoint is written into before its rename (atomicfile names
	// it tmpPrefix + "checkpoint-<step>-" + a random suffix).
	tmpPrefix = atomicfile.TempPrefix
)

// DataState is a checkpoint's rng_state.json. tune needs no RNG state beyond these numbers: the data order is a
// function of (data seed, epoch) and dropout draws Philox numbers at an offset, so a resumed run continues
// with exactly the batches and masks the uninterrupted run would have used.
type DataState struct {
	Seed          int64  `json:"seed"`                   // the run's seed (weights init, dropout)
	DataSeed      int64  `json:"data_seed"`              // the seed of the epoch orders: data_seed, else seed
	Shuffle       bool   `json:"shuffle"`                // whether epochs are shuffled (false: file order)
	Epoch         int    `json:"epoch"`                  // epoch of the next micro-batch, from 0
	MicroBatches  int    `json:"micro_batches_in_epoch"` // micro-batches of that epoch already trained on
	DropoutOffset uint64 `json:"dropout_offset"`         // Philox offset of the next micro-batch
	// The logging window open at the checkpoint (steps since the last training log, when the checkpoint is
	// not on a logging step): its steps, their summed loss, the token accuracies (causal LMs) and the
	// GradScaler-skipped steps, so that the first log after a resume and train_loss cover the same steps as
	// without the interruption. Absent (0) in older checkpoints: the window then starts at the resume.
	StepsSinceLog   int     `json:"steps_since_log,omitempty"`                  // steps since the last training log
	LossSinceLog    float64 `json:"loss_since_log,omitempty"`                   // their summed loss
	AccSumSinceLog  float64 `json:"token_accuracy_sum_since_log,omitempty"`     // Σ token accuracies (causal LMs)
	AccNSinceLog    int     `json:"token_accuracy_batches_since_log,omitempty"` // micro-batches in that sum
	SkippedSinceLog int     `json:"skipped_steps_since_log,omitempty"`          // GradScaler-skipped steps
	// TrainExamples is the size of the run's training set (0 in older checkpoints): a resume on another one is
	// warned about, or refused when the position does not fit it.
	TrainExamples int `json:"train_examples,omitempty"`
}

// checkpointHook, when set (by tests), runs after each file of a checkpoint is written into the temporary
// directory; an error aborts the save there, as a crash would.
var checkpointHook func(stage string) error

// saveCheckpoint writes output_dir/checkpoint-<global_step> atomically (atomicfile.ReplaceDir): everything goes
// into a temporary directory inside output_dir, which is renamed into place only when complete, so a crash or kill
// during a save leaves the previous checkpoints intact (a leftover temporary directory is removed by the next
// Train); an existing checkpoint of the same step (a resumed run saving it again) is replaced. Then old
// checkpoints beyond save_total_limit are deleted, never the best one. A checkpoint whose trainable weights
// hold an inf or NaN, or whose GradScaler state would not load, is not written (a *NonFiniteError).
func (t *Trainer) saveCheckpoint() (string, error) {
	s := t.state
	final := filepath.Join(t.args.OutputDir, CheckpointPrefix+strconv.Itoa(s.GlobalStep))
	if err := t.checkWeights(false, "refusing to write "+filepath.Base(final)); err != nil {
		return "", err
	}
	// A folder of that name holding a user's files is not replaced (checkForeignCheckpoints refuses it before
	// training; this is for one made during the run).
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		if foreign := foreignCheckpointFiles(final); len(foreign) > 0 {
			return "", foreignCheckpointError(final, foreign)
		}
	}
	if t.scaler.Enabled() {
		if err := t.checkScalerState(); err != nil {
			return "", err
		}
	}
	if s.BestGlobalStep != nil && *s.BestGlobalStep == s.GlobalStep {
		s.BestModelCheckpoint = &final
	}
	t.saveCallbackStates()
	writers := []struct {
		stage string
		write func(dir string) error
	}{
		{"model", t.model.Save},
		{"optimizer", t.saveOptimizer},
		{"scheduler", func(d string) error { return writeJSON(filepath.Join(d, SchedulerName), t.sched.StateDict()) }},
		{"scaler", func(d string) error {
			if !t.scaler.Enabled() {
				return nil
			}
			return writeJSON(filepath.Join(d, ScalerName), t.scaler.StateDict())
		}},
		{"rng_state", func(d string) error { return writeJSON(filepath.Join(d, RNGStateName), t.dataState()) }},
		{"training_args", func(d string) error { return writeJSON(filepath.Join(d, TrainingArgsName), t.args) }},
		{"trainer_state", func(d string) error { return s.Save(filepath.Join(d, TrainerStateName)) }},
	}
	// 0777 less the umask, as os.makedirs gives transformers' checkpoint folders (they were 0700, MkdirTemp's,
	// in an output_dir whose files others may read).
	err := atomicfile.ReplaceDir(final, 0o777, func(tmp string) error {
		for _, w := range writers {
			if err := w.write(tmp); err != nil {
				return errctx.Wrap(w.stage, err) // "optimizer: writing ...", without "loaders: " in between
			}
			if checkpointHook != nil {
				if err := checkpointHook(w.stage); err != nil {
					return err
				}
			}
		}
		// Last: the manifest that makes the directory complete (sizes and SHA-256 of every file above).
		if err := WriteCheckpointManifest(tmp); err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
		return nil
	})
	if err != nil {
		// A failed save (a full disk) leaves the checkpoints before it as they were: name the one to resume from.
		return "", fmt.Errorf("trainer: checkpoint: %w; %s", err, t.lastCheckpointNote())
	}
	// The log and the curve written so far are the run's: a run killed after this checkpoint is replaced by
	// overwrite_output_dir with them.
	if err := t.recordOutputs(); err != nil {
		return "", err
	}
	return final, t.rotateCheckpoints()
}

// removeStaleTemps deletes temporary checkpoint directories a killed run left in dir. A checkpoint that
// atomicfile.ReplaceDir had moved aside (name + ".old") when the run was killed, before the new one took its
// place, is moved back instead, so a kill during the replacement loses nothing.
func removeStaleTemps(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, tmpPrefix+CheckpointPrefix) {
			continue
		}
		if rest, ok := strings.CutSuffix(strings.TrimPrefix(name, tmpPrefix), ".old"); ok {
			if i := strings.LastIndexByte(rest, '-'); i > 0 && IsCheckpointDir(rest[:i]) {
				final := filepath.Join(dir, rest[:i])
				if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
					if os.Rename(filepath.Join(dir, name), final) == nil {
						continue
					}
				}
			}
		}
		os.RemoveAll(filepath.Join(dir, name))
	}
}

// writeJSON writes v as indented JSON (two spaces, a final newline) to path atomically; an error names path.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("trainer: %s: %w", path, err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// readJSON reads path into v.
func readJSON(path string, v any) error {
	data, err := smallfile.Read(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonerr.Wrap(path, data, err)
	}
	return nil
}

// dataState returns the current seeds and position.
func (t *Trainer) dataState() DataState {
	a := &t.args
	r := &t.run
	ds := DataState{Seed: a.Seed, DataSeed: a.Seed, Shuffle: a.Shuffle, Epoch: r.epoch,
		MicroBatches: r.microDone, DropoutOffset: r.dropoutOffset}
	if t.train != nil {
		ds.TrainExamples = t.train.Len()
	}
	if t.state != nil && t.state.GlobalStep > r.lastLogged {
		ds.StepsSinceLog, ds.LossSinceLog = t.state.GlobalStep-r.lastLogged, r.trLoss
		ds.AccSumSinceLog, ds.AccNSinceLog, ds.SkippedSinceLog = r.accSum, r.accN, r.skippedSinceLog
	}
	if a.DataSeed != nil {
		ds.DataSeed = *a.DataSeed
	}
	return ds
}

// saveCallbackStates records TrainerControl and every StatefulCallback in state.stateful_callbacks.
func (t *Trainer) saveCallbackStates() {
	c := t.control
	t.state.StatefulCallbacks["TrainerControl"] = CallbackState{Args: map[string]any{
		"should_training_stop": c.ShouldTrainingStop, "should_epoch_stop": c.ShouldEpochStop,
		"should_save": c.ShouldSave, "should_evaluate": c.ShouldEvaluate, "should_log": c.ShouldLog,
	}, Attributes: map[string]any{}}
	for _, cb := range t.callbacks {
		if sc, ok := cb.(StatefulCallback); ok {
			t.state.StatefulCallbacks[sc.Name()] = sc.State()
		}
	}
}

// Checkpoints returns the complete checkpoint directories in outputDir (named checkpoint-N, with a manifest
// that matches their files: see ManifestName and ScanCheckpoints), sorted by step.
func Checkpoints(outputDir string) ([]string, error) {
	all, err := ScanCheckpoints(outputDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range all {
		if c.Problem == "" {
			out = append(out, c.Dir)
		}
	}
	return out, nil
}

// ResolveCheckpoint turns resume_from_checkpoint into a directory: "true" or "latest" is the newest complete
// checkpoint in outputDir (an incomplete one is never chosen, and the error lists them when none is complete);
// anything else is a checkpoint directory, which must be complete. Sizes are checked here, sums when the
// checkpoint is loaded (VerifyCheckpoint).
func ResolveCheckpoint(outputDir, spec string) (string, error) {
	if s := strings.ToLower(spec); s == "true" || s == "latest" {
		all, err := ScanCheckpoints(outputDir)
		var bad []string
		for i := len(all) - 1; err == nil && i >= 0; i-- {
			if all[i].Problem == "" {
				return all[i].Dir, nil
			}
			bad = append(bad, fmt.Sprintf("%s: %s", filepath.Base(all[i].Dir), all[i].Problem))
		}
		msg := fmt.Sprintf("trainer: resume_from_checkpoint %s: no complete checkpoint-N directory (with its %s) in %s", spec, ManifestName, outputDir)
		if len(bad) > 0 {
			msg += "; incomplete: " + strings.Join(bad, "; ")
		}
		return "", errors.New(msg)
	}
	if err := readManifest(spec, false); err != nil {
		return "", fmt.Errorf("trainer: resume_from_checkpoint %s is not a complete checkpoint: %w", spec, err)
	}
	return spec, nil
}

// checkForeignCheckpoints refuses, before training, a checkpoint-N folder of outputDir that this run may
// save its checkpoint of step N into (N after startStep, the step the run starts at; an incomplete one of
// startStep itself too) while it holds files no tune checkpoint writes: the save would replace the folder
// and lose them. all is ScanCheckpoints(outputDir).
func checkForeignCheckpoints(all []CheckpointInfo, startStep int) error {
	for _, c := range all {
		if c.Step < startStep || c.Step == startStep && c.Problem == "" {
			continue
		}
		if foreign := foreignCheckpointFiles(c.Dir); len(foreign) > 0 {
			return foreignCheckpointError(c.Dir, foreign)
		}
	}
	return nil
}

// manifestFiles returns the plain names of the files dir's manifest lists (nil without a readable one).
func manifestFiles(dir string) []string {
	data, err := smallfile.Read(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil
	}
	var m Manifest
	if json.Unmarshal(data, &m) != nil || m.Format != manifestFormat {
		return nil
	}
	var names []string
	for _, f := range m.Files {
		if f.Name != "" && f.Name == filepath.Base(f.Name) && f.Name != "." && f.Name != ".." && f.Name != ManifestName {
			names = append(names, f.Name)
		}
	}
	return names
}

// rotateCheckpoints deletes the oldest checkpoints beyond save_total_limit, never the best one; with a limit
// of 1 and a best checkpoint that is not the newest, both are kept (transformers' rule).
func (t *Trainer) rotateCheckpoints() error {
	limit := t.args.SaveTotalLimit
	if limit <= 0 {
		return nil
	}
	cps, err := Checkpoints(t.args.OutputDir)
	if err != nil || len(cps) <= limit {
		return err
	}
	best := ""
	if t.state.BestModelCheckpoint != nil {
		best = filepath.Base(*t.state.BestModelCheckpoint)
	}
	keep := limit
	if limit == 1 && best != "" && filepath.Base(cps[len(cps)-1]) != best {
		keep = 2
	}
	excess := len(cps) - keep
	for _, dir := range cps {
		if excess <= 0 {
			break
		}
		if filepath.Base(dir) == best {
			continue
		}
		// A file the checkpoint does not list (a user's notes put there) is not the run's to delete: only the
		// listed files go, and the folder stays with the others (it was removed whole, tester7 F11).
		foreign := foreignCheckpointFile(dir)
		listed := manifestFiles(dir)
		// The manifest goes first: a kill in the middle of the deletion leaves an incomplete directory, never one
		// that looks complete without its files.
		if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("trainer: save_total_limit: deleting %s: %w", dir, err)
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			return fmt.Errorf("trainer: save_total_limit: deleting %s: %w", dir, err)
		}
		excess--
		if foreign == "" {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("trainer: save_total_limit: deleting %s: %w", dir, err)
			}
			continue
		}
		for _, name := range listed {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("trainer: save_total_limit: deleting %s: %w", dir, err)
			}
		}
		t.logger.Warn(fmt.Sprintf("save_total_limit: %s holds %s, which no tune checkpoint writes: the checkpoint's own "+
			"files were deleted and the folder kept with what else it holds", dir, foreign))
	}
	return nil
}
