package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/dirlock"
)

// IntervalStrategy says when an action (logging, evaluation, saving) happens, as HF's *_strategy fields do.
type IntervalStrategy string

// The interval strategies.
const (
	IntervalNo    IntervalStrategy = "no"    // never
	IntervalSteps IntervalStrategy = "steps" // every *_steps optimizer steps
	IntervalEpoch IntervalStrategy = "epoch" // at the end of every epoch
)

// TrainingArguments holds everything that controls a training run, with the names and defaults of Hugging Face
// transformers 5.17 (transformers/training_args.py); the yaml and json keys are the HF names, so a recipe's training: section reads
// like a TrainingArguments call. Start from DefaultTrainingArguments: the zero value is not valid (its
// learning_rate and batch sizes are 0). Validate reports every bad field at once.
type TrainingArguments struct {
	// OutputDir is where checkpoints, metrics.jsonl, trainer_state.json and plots go (relative to the working
	// directory). Default "trainer_output", as in transformers v5.
	OutputDir string `yaml:"output_dir" json:"output_dir"`

	// NumTrainEpochs is the number of passes over the training set; a fraction runs part of the last epoch
	// (total steps = ceil(epochs × steps per epoch)). Ignored when MaxSteps > 0. Default 3.0.
	NumTrainEpochs float64 `yaml:"num_train_epochs" json:"num_train_epochs"`
	// MaxSteps, when > 0, is the total number of optimizer steps and overrides NumTrainEpochs. Default -1.
	MaxSteps int `yaml:"max_steps" json:"max_steps"`

	// PerDeviceTrainBatchSize is the number of examples in one training micro-batch. Default 8. It is per
	// process, with Hugging Face's meaning: a data-parallel run of N processes would take a global batch of
	// N × per_device_train_batch_size × gradient_accumulation_steps per optimizer step (transformers
	// TrainingArguments.train_batch_size × world size); tune trains in one process today (docs/DISTRIBUTED.md).
	PerDeviceTrainBatchSize int `yaml:"per_device_train_batch_size" json:"per_device_train_batch_size"`
	// PerDeviceEvalBatchSize is the number of examples in one evaluation batch. Default 8.
	PerDeviceEvalBatchSize int `yaml:"per_device_eval_batch_size" json:"per_device_eval_batch_size"`
	// GradientAccumulationSteps is the number N of micro-batches whose gradients are accumulated before one
	// optimizer step (the effective batch is N × per_device_train_batch_size). Default 1.
	//
	// Loss normalisation in tune: the window's loss is the sum of the per-example losses over all labelled
	// examples of the N micro-batches divided by their count (loss normalisation by num_items_in_batch, transformers' trainer.py), so the gradient does not depend on how
	// the examples are split into micro-batches (a short last micro-batch is not over-weighted), and the logged
	// loss is that window mean. Each micro-batch's Backward is seeded with its share n_i/Σn of the window.
	//
	// transformers 5.17 differs: for BertForSequenceClassification (whose forward takes **kwargs) the Trainer
	// divides by nothing, so the accumulated gradient is the SUM of the N micro-batch mean-loss gradients and the
	// logged loss is the sum of the N means, about N·ln 2 at the start of a 2-class run (transformers' trainer.py, _inner_training_loop). The two
	// agree exactly for N = 1; for N > 1 HF's gradient (and its pre-clip grad norm) is about N times tune's,
	// which changes what max_grad_norm clips (AdamW itself is nearly scale-invariant). v4 releases divided each
	// micro-batch mean by N, which equals tune's rule only when all micro-batches have the same size.
	GradientAccumulationSteps int `yaml:"gradient_accumulation_steps" json:"gradient_accumulation_steps"`

	// LearningRate is the peak learning rate of AdamW; finite and > 0. Default 5e-5.
	LearningRate float64 `yaml:"learning_rate" json:"learning_rate"`
	// WeightDecay is AdamW's decoupled weight decay, applied to every weight except biases and LayerNorm
	// parameters (get_decay_parameter_names in transformers' trainer.py). Default 0.
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"`
	// AdamBeta1 and AdamBeta2 are AdamW's moment decay rates, in [0, 1). Defaults 0.9 and 0.999.
	AdamBeta1 float64 `yaml:"adam_beta1" json:"adam_beta1"`
	AdamBeta2 float64 `yaml:"adam_beta2" json:"adam_beta2"`
	// AdamEpsilon is added to AdamW's denominator; it must be at least 2^-126 (FP32's smallest normal). Default 1e-8.
	AdamEpsilon float64 `yaml:"adam_epsilon" json:"adam_epsilon"`
	// MaxGradNorm clips the global L2 norm of the (unscaled) gradients once per optimizer step; 0 disables
	// clipping. Default 1.0.
	MaxGradNorm float64 `yaml:"max_grad_norm" json:"max_grad_norm"`
	// Optim names the optimizer. tune has one, AdamW (decoupled weight decay, bias correction, PyTorch's
	// formula); "adamw_torch" and "adamw_torch_fused" (HF's v5 default) both select it.
	Optim string `yaml:"optim" json:"optim"`

	// LRSchedulerType is the learning-rate schedule (linear, cosine, constant, constant_with_warmup,
	// polynomial; transformers/optimization.py). Default linear.
	LRSchedulerType string `yaml:"lr_scheduler_type" json:"lr_scheduler_type"`
	// WarmupSteps is the warmup length: a value ≥ 1 is a number of optimizer steps (its integer part), a value
	// in (0, 1) is a fraction of the total steps T, giving ceil(T·x) steps (transformers v5; v4's warmup_ratio
	// is this field below 1). Default 0. See NumWarmupSteps.
	WarmupSteps float64 `yaml:"warmup_steps" json:"warmup_steps"`

	// FP16 trains with FP16 autocast and dynamic loss scaling (amp.GradScaler). Exclusive with BF16.
	FP16 bool `yaml:"fp16" json:"fp16"`
	// BF16 trains with BF16 autocast; no loss scaling. Exclusive with FP16.
	BF16 bool `yaml:"bf16" json:"bf16"`
	// FP16FullEval evaluates and predicts in FP16 even when training is FP32: with the whole model in FP16 when
	// it implements HalfInference, else (tune's models) under FP16 autocast (GEMMs in FP16 with FP32
	// accumulation, LayerNorm and softmax in FP32). Exclusive with BF16FullEval.
	FP16FullEval bool `yaml:"fp16_full_eval" json:"fp16_full_eval"`
	// BF16FullEval is FP16FullEval in BF16.
	BF16FullEval bool `yaml:"bf16_full_eval" json:"bf16_full_eval"`
	// TF32 allows TF32 Tensor Core math for FP32 GEMMs on the GPU; nil (the default) leaves the backend's
	// default, which in tune is off (FP32 GEMMs stay exact FP32).
	TF32 *bool `yaml:"tf32" json:"tf32"`
	// GradientCheckpointing recomputes each transformer layer's forward in backward instead of keeping its
	// activations (HF's gradient_checkpointing: the Trainer calls model.gradient_checkpointing_enable()): less
	// memory for about one more forward per step, results bit for bit unchanged. The model must implement
	// transformer.GradientCheckpointer. Default false.
	GradientCheckpointing bool `yaml:"gradient_checkpointing" json:"gradient_checkpointing"`
	// CUDAGraphs runs each optimizer step as one CUDA graph on a CUDA device (a tune extension; the closest
	// PyTorch setting is torch.compile's mode="reduce-overhead"): after warm-up steps the step is captured
	// and then replayed with one launch, its host code re-run to check it issues the same operations. Steps
	// that cannot be replayed run eagerly with the reason logged: another batch shape (a short last batch,
	// per-batch padding), steps that read the loss or gradient norm on the host (TUNE_SYNC_FREE=0, FP16 loss
	// scales that are not powers of two), a backend without graphs. Results are bit for bit those without it.
	// Default false.
	CUDAGraphs bool `yaml:"cuda_graphs" json:"cuda_graphs"`

	// Seed seeds weight initialisation, dropout (Philox) and the data order. Default 42.
	Seed int64 `yaml:"seed" json:"seed"`
	// DataSeed, when set, seeds the data order alone (HF's data_seed); nil uses Seed.
	DataSeed *int64 `yaml:"data_seed" json:"data_seed"`
	// Shuffle draws a new order of the training examples every epoch from the data seed. A tune extension
	// (HF always shuffles): false keeps file order, which a comparison with a reference run needs. Default true.
	Shuffle bool `yaml:"shuffle" json:"shuffle"`
	// LabelSmoothingFactor mixes the one-hot targets with the uniform distribution, in [0, 1). Default 0.
	LabelSmoothingFactor float64 `yaml:"label_smoothing_factor" json:"label_smoothing_factor"`

	// LoggingStrategy says when the training loss is logged (no, steps, epoch). Default steps.
	LoggingStrategy IntervalStrategy `yaml:"logging_strategy" json:"logging_strategy"`
	// LoggingSteps is the logging interval: ≥ 1 a number of optimizer steps (an integer), in (0, 1) a fraction
	// of the total steps (ceil). Default 500.
	LoggingSteps float64 `yaml:"logging_steps" json:"logging_steps"`
	// LoggingFirstStep also logs the first optimizer step. Default false.
	LoggingFirstStep bool `yaml:"logging_first_step" json:"logging_first_step"`

	// EvalStrategy says when the eval set is evaluated (no, steps, epoch). Default no.
	EvalStrategy IntervalStrategy `yaml:"eval_strategy" json:"eval_strategy"`
	// DoEval evaluates the final model once training ends (tune finetune's eval line and eval_results.json), as
	// transformers' example scripts do under --do_eval; an eval_strategy other than no implies it, as
	// TrainingArguments.__post_init__ sets do_eval then. The Trainer itself only reads EvalStrategy. With
	// neither, an eval set is not evaluated at all. Default false.
	DoEval bool `yaml:"do_eval" json:"do_eval"`
	// EvalSteps is the evaluation interval under eval_strategy steps, read like LoggingSteps; 0 (unset) uses
	// logging_steps, as HF does.
	EvalSteps float64 `yaml:"eval_steps" json:"eval_steps"`

	// SaveStrategy says when a checkpoint is written (no, steps, epoch). Default steps.
	SaveStrategy IntervalStrategy `yaml:"save_strategy" json:"save_strategy"`
	// SaveSteps is the checkpoint interval under save_strategy steps, read like LoggingSteps. Default 500.
	SaveSteps float64 `yaml:"save_steps" json:"save_steps"`
	// SaveTotalLimit, when > 0, keeps at most that many checkpoints, deleting the oldest first but never the
	// best one. 0 (HF's None) keeps all. Only a checkpoint's own files are deleted: a folder that also holds
	// files no checkpoint writes (a user's) keeps them, with a warning.
	SaveTotalLimit int `yaml:"save_total_limit" json:"save_total_limit"`
	// LoadBestModelAtEnd reloads the best checkpoint (by MetricForBestModel) when training ends. It needs
	// eval_strategy == save_strategy (not no), and under steps, save_steps a multiple of eval_steps.
	LoadBestModelAtEnd bool `yaml:"load_best_model_at_end" json:"load_best_model_at_end"`
	// MetricForBestModel names the eval metric that ranks checkpoints ("loss", "accuracy", "f1", ...; an
	// "eval_" prefix is accepted). Empty means "loss". See BestMetric.
	MetricForBestModel string `yaml:"metric_for_best_model" json:"metric_for_best_model"`
	// GreaterIsBetter says whether a larger MetricForBestModel is better; nil means true unless the metric is
	// the loss, as HF decides. See IsGreaterBetter.
	GreaterIsBetter *bool `yaml:"greater_is_better" json:"greater_is_better"`
	// EarlyStoppingPatience, when > 0, stops training after that many evaluations in a row without an
	// improvement of the best metric by more than EarlyStoppingThreshold (HF's EarlyStoppingCallback). Needs an
	// eval_strategy other than no.
	EarlyStoppingPatience int `yaml:"early_stopping_patience" json:"early_stopping_patience"`
	// EarlyStoppingThreshold is the minimum improvement that resets the patience counter. Default 0.
	EarlyStoppingThreshold float64 `yaml:"early_stopping_threshold" json:"early_stopping_threshold"`

	// MaxConsecutiveSkippedSteps stops an fp16 run with an error (a *NonFiniteError naming the step, the first
	// parameter whose gradient was non-finite and the loss scale) when that many optimizer steps in a row were
	// skipped by the GradScaler. Each skip halves the scale (PyTorch's skip-and-back-off, kept for occasional
	// overflows), so from init_scale 2^16 the default 25 leaves the scale at 2^-9: gradients that still
	// overflow then do so whatever the scale (the forward overflows, or the true gradients exceed FP16's
	// 65504), and PyTorch would go on skipping every step while its scale decays to 0. 0 never stops (the
	// scale then rests at amp.MinScale). A tune extension: transformers has no such argument. Default 25.
	MaxConsecutiveSkippedSteps int `yaml:"max_consecutive_skipped_steps" json:"max_consecutive_skipped_steps"`

	// ResumeFromCheckpoint is a checkpoint directory (output_dir/checkpoint-N) to resume from: weights,
	// optimizer, scheduler, scaler, RNG and data position; "true" or "latest" take the newest checkpoint in
	// output_dir. Empty starts afresh.
	ResumeFromCheckpoint string `yaml:"resume_from_checkpoint" json:"resume_from_checkpoint"`
	// OverwriteOutputDir lets a fresh run (no resume_from_checkpoint, or a checkpoint of another folder) replace the training run already in
	// output_dir (transformers v4's overwrite_output_dir): the files the previous run recorded writing there
	// (OutputsName) and its checkpoint-N folders are removed first, nothing else; a checkpoint-N folder holding
	// other files, or files of a run's names (OutputArtifacts) that the record does not list (or no record: a
	// run of an older tune), is an error, nothing removed. Without it a fresh run is refused when output_dir already holds a run or
	// model files, so a finished run or a user's checkpoint is never clobbered by accident; a folder holding only the
	// metrics.jsonl of a run interrupted before its first checkpoint takes a new run either way, which keeps that
	// file as metrics.jsonl.N. Default false.
	OverwriteOutputDir bool `yaml:"overwrite_output_dir" json:"overwrite_output_dir"`
}

// EvaluatesAtEnd reports whether the final model is to be evaluated: do_eval, or an eval_strategy other than no.
func (a *TrainingArguments) EvaluatesAtEnd() bool { return a.DoEval || a.EvalStrategy != IntervalNo }

// ErrOutputDirInUse is wrapped by CheckOutputDir's error.
var ErrOutputDirInUse = errors.New("output_dir already holds a training run or model files")

// OutputArtifacts are the names a tune run writes into output_dir (besides checkpoint-N folders): what
// overwrite_output_dir removes, and what marks a folder as holding a run or a model.
var OutputArtifacts = []string{
	"trainer_state.json", "metrics.jsonl", "training_curve.png",
	"config.json", "model.safetensors", "model.safetensors.index.json",
	"adapter_config.json", "adapter_model.safetensors",
	"tokenizer.json", "tokenizer_config.json", "vocab.txt", "generation_config.json",
	"train_results.json", "eval_results.json", "test_results.json", AllResultsName,
}

// CheckOutputDir returns an error when output_dir cannot take a run: it is an existing file or the root of the
// file system or the user's home directory (wrapping ErrInvalidArguments; overwrite_output_dir would write a
// run's dozen files among the user's own), or a fresh run (no resume_from_checkpoint, or one naming another
// folder's checkpoint: resumesInPlace) would write into a
// folder that is not empty while overwrite_output_dir is false (an *OutputDirInUseError, wrapping
// ErrOutputDirInUse), as transformers' example scripts refuse an output_dir that "already exists and is not
// empty" (run_glue.py's last-checkpoint check). A folder that holds a previous run or model files (trainer_state.json, a checkpoint-N
// folder, config.json, model or adapter safetensors) is named as such; any other non-empty folder is named by
// its entries. With overwrite_output_dir a run replaces a previous run (ClearOutputDir) or writes beside a
// user's files, deleting none of them; model files without a trainer_state.json are still refused, since the
// run would replace them, and so is a previous run whose checkpoint-N folder holds a file no tune checkpoint
// writes (foreignCheckpoints), or whose folder holds files of a run's names its record does not list
// (unrecordedOutputs), before anything is built rather than when ClearOutputDir would remove them. A missing or empty folder is fine, and so is one that holds only the metrics.jsonl
// of a run interrupted before its first checkpoint (a run there starts from the beginning, and Train keeps that
// file as metrics.jsonl.N: keepInterruptedLog), with or without overwrite_output_dir.
func (a *TrainingArguments) CheckOutputDir() error {
	if abs, err := filepath.Abs(a.OutputDir); err == nil && filepath.Dir(abs) == abs {
		return &ArgumentError{Key: "output_dir", Reason: fmt.Sprintf("%s is the root of the file system; a run writes its model, "+
			"checkpoint-N folders and logs into output_dir: choose a folder of its own", a.OutputDir)}
	}
	if isHomeDir(a.OutputDir) {
		return &ArgumentError{Key: "output_dir", Reason: fmt.Sprintf("%s is your home directory; a run writes its model, "+
			"checkpoint-N folders and logs into output_dir, beside your own files: choose a folder of its own, such as %s",
			a.OutputDir, filepath.Join(a.OutputDir, "runs", "my-run"))}
	}
	info, err := os.Stat(a.OutputDir)
	if err != nil {
		return nil // absent (or unreadable: the MkdirAll that follows reports it)
	}
	if !info.IsDir() {
		return &ArgumentError{Key: "output_dir", Reason: fmt.Sprintf("%s is a file, not a folder; choose another output_dir", a.OutputDir)}
	}
	if a.resumesInPlace() {
		return nil
	}
	if interruptedRunLog(a.OutputDir, a.OverwriteOutputDir) {
		return nil // a new run keeps that log beside its own (keepInterruptedLog)
	}
	found := outputArtifactsIn(a.OutputDir)
	if a.OverwriteOutputDir {
		if len(found) > 0 && !isRunOutput(a.OutputDir, found) {
			return fmt.Errorf("trainer: %w: %s has %s but no %s, so it is not the output of a training run; "+
				"overwrite_output_dir only replaces a previous run and never deletes other files: choose another "+
				"output_dir", ErrOutputDirInUse, a.OutputDir, strings.Join(found, ", "), TrainerStateName)
		}
		if len(found) == 0 {
			return nil
		}
		return a.overwriteBlockers(found)
	}
	if len(found) > 0 {
		return &OutputDirInUseError{Dir: a.OutputDir, Found: found, ResumeFrom: a.ResumeFromCheckpoint}
	}
	if other := otherEntries(a.OutputDir); len(other) > 0 {
		return &OutputDirInUseError{Dir: a.OutputDir, Found: other, NotRun: true}
	}
	return nil
}

// otherEntries lists up to five entries of dir (sorted, folders with a trailing /) and "N more" for the rest,
// leaving out the run lock file (internal/dirlock), which the CLI creates before the check, the record of a
// run's outputs (OutputsName), which a run stopped before its first log leaves alone, and the temporary
// files and folders an interrupted tune write leaves (atomicfile.TempPrefix), which no run reads.
func otherEntries(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.Name() == dirlock.Name || e.Name() == OutputsName || strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			continue
		}
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("%d more", len(names)-5))
	}
	return names
}

// OutputDirInUseError is CheckOutputDir's error for a fresh run into an output_dir that is not empty while
// overwrite_output_dir is false. It wraps ErrOutputDirInUse.
type OutputDirInUseError struct {
	Dir   string   // the output_dir
	Found []string // what CheckOutputDir found there (OutputArtifacts names, checkpoint-N folders, or other entries)
	// NotRun is set when the folder holds none of a run's files, only other entries (Found lists them).
	NotRun bool
	// ResumeFrom is resume_from_checkpoint when it names a checkpoint of another folder (resumesInPlace is
	// false): the resumed run would write its output over the run found in Dir.
	ResumeFrom string
}

// Error names the way out in TrainingArguments' names (HF's), as a Go program sets them (see Advice).
func (e *OutputDirInUseError) Error() string {
	return "trainer: " + e.Message("")
}

// Message is the error's text without the package prefix, with keys named with prefix (see Advice): what
// output_dir holds and how to go on.
func (e *OutputDirInUseError) Message(prefix string) string {
	if e.NotRun {
		return fmt.Sprintf("%soutput_dir %s is not empty (%s) and holds no training run; %s", prefix, e.Dir,
			strings.Join(e.Found, ", "), e.Advice(prefix))
	}
	found := e.Found
	if len(found) > 6 { // a finished run has a dozen files: name those that say what it is
		rank := func(n string) int {
			switch {
			case n == TrainerStateName:
				return 0
			case IsCheckpointDir(n):
				return 1
			case strings.HasSuffix(n, ".safetensors"):
				return 2
			}
			return 3
		}
		found = slices.Clone(found)
		slices.SortStableFunc(found, func(a, b string) int { return rank(a) - rank(b) })
		found = append(found[:5], fmt.Sprintf("%d more", len(e.Found)-5))
	}
	resume := ""
	if e.ResumeFrom != "" {
		resume = fmt.Sprintf(", and %sresume_from_checkpoint %s is not one of its checkpoints: the resumed run would "+
			"write its model, logs and results over them", prefix, e.ResumeFrom)
	}
	return fmt.Sprintf("%soutput_dir %s already holds a training run or model files (%s)%s; %s", prefix, e.Dir,
		strings.Join(found, ", "), resume, e.Advice(prefix))
}

// Unwrap returns ErrOutputDirInUse.
func (e *OutputDirInUseError) Unwrap() error { return ErrOutputDirInUse }

// Advice says how to go on. With prefix "" it names the TrainingArguments fields; with a prefix (a recipe's
// "training.") it names the keys with it and the values to give: "set training.overwrite_output_dir=true ...".
func (e *OutputDirInUseError) Advice(prefix string) string {
	overwrite, resume := "overwrite_output_dir", "resume_from_checkpoint"
	if prefix != "" {
		overwrite, resume = prefix+overwrite+"=true", prefix+resume+"=true"
	}
	if e.NotRun {
		return fmt.Sprintf("choose an empty or new %soutput_dir, or set %s to write the run beside those files (tune deletes none of them)",
			prefix, overwrite)
	}
	return fmt.Sprintf("set %s to replace what a tune run wrote there, %s to continue that run, or choose another %soutput_dir",
		overwrite, resume, prefix)
}

// resumesInPlace reports whether resume_from_checkpoint continues the run in output_dir: "true" or "latest"
// (the newest checkpoint there), or a checkpoint folder inside output_dir (symbolic links resolved). A
// checkpoint of another folder (another run's, resumed into a new output_dir) starts a new output there, which
// CheckOutputDir and ClearOutputDir then treat as a fresh run's: a resume from another folder into a finished
// run's output_dir replaced its model, results and log without overwrite_output_dir (tester7 F8).
func (a *TrainingArguments) resumesInPlace() bool {
	spec := a.ResumeFromCheckpoint
	if spec == "" {
		return false
	}
	if s := strings.ToLower(spec); s == "true" || s == "latest" {
		return true
	}
	resolved := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return p
	}
	rel, err := filepath.Rel(resolved(a.OutputDir), resolved(spec))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// IsCheckpointDir reports whether name is a checkpoint folder's name as the Trainer writes it:
// "checkpoint-" followed by the global step in decimal digits ("checkpoint-500", not "checkpoint-backup").
func IsCheckpointDir(name string) bool {
	step, ok := strings.CutPrefix(name, CheckpointPrefix)
	if !ok || step == "" {
		return false
	}
	for _, c := range step {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// outputArtifactsIn lists the OutputArtifacts and checkpoint-N folders present in dir, sorted.
func outputArtifactsIn(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var found []string
	for _, e := range entries {
		if (e.IsDir() && IsCheckpointDir(e.Name())) || (!e.IsDir() && slices.Contains(OutputArtifacts, e.Name())) {
			found = append(found, e.Name())
		}
	}
	return found
}

// isRunOutput reports whether the output_dir entries found (outputArtifactsIn) mark the output of a training run:
// a trainer_state.json, which a run writes at its end, or a checkpoint-N folder holding one, which a run that was
// killed before its end (SIGTERM from timeout(1) or a scheduler) leaves behind with its metrics.jsonl.
func isRunOutput(dir string, found []string) bool {
	for _, name := range found {
		if name == TrainerStateName {
			return true
		}
		if IsCheckpointDir(name) {
			if st, err := os.Stat(filepath.Join(dir, name, TrainerStateName)); err == nil && st.Mode().IsRegular() {
				return true
			}
		}
	}
	return false
}

// interruptedRunLog reports whether dir holds what a run interrupted before its first checkpoint leaves: of
// the files a run writes (outputArtifactsIn), only its metrics.jsonl (MetricsName). Nothing else may be there
// but the metrics.jsonl.N that earlier such runs kept (keepInterruptedLog), the run lock, its record of outputs and temporary files
// (as otherEntries leaves them out), unless userFiles (overwrite_output_dir, which writes a run beside a user's
// files). There is nothing in it to resume from, and no model a new run would replace.
func interruptedRunLog(dir string, userFiles bool) bool {
	found := outputArtifactsIn(dir)
	if len(found) != 1 || found[0] != MetricsName || !regularFile(filepath.Join(dir, MetricsName)) {
		return false
	}
	if userFiles {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		n := e.Name()
		if n != MetricsName && n != dirlock.Name && n != OutputsName && !strings.HasPrefix(n, atomicfile.TempPrefix) && keptLogIndex(n) == 0 {
			return false
		}
	}
	return true
}

// keptLogIndex returns N for a name metrics.jsonl.N (N ≥ 1 in decimal digits), else 0.
func keptLogIndex(name string) int {
	num, ok := strings.CutPrefix(name, MetricsName+".")
	if !ok || num == "" || num[0] == '0' || len(num) > 9 {
		return 0
	}
	n := 0
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// keepInterruptedLog, when output_dir holds only the metrics.jsonl of a run interrupted before its first
// checkpoint (interruptedRunLog; userFiles is overwrite_output_dir), renames that file to metrics.jsonl.N, N one more than the largest kept
// before, so that a new run there writes its own log and the old one is not lost; it returns the new name, ""
// when there was nothing to keep. A rerun of the same command used to be refused (the folder "already holds a
// training run"), and with overwrite_output_dir too (it "is not the output of a training run"), while the
// interruption's message said a new run starts from the beginning.
func keepInterruptedLog(dir string, userFiles bool) (string, error) {
	if !interruptedRunLog(dir, userFiles) {
		return "", nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("trainer: output_dir: %w", err)
	}
	last := 0
	for _, e := range entries {
		last = max(last, keptLogIndex(e.Name()))
	}
	to := filepath.Join(dir, MetricsName+"."+strconv.Itoa(last+1))
	if err := os.Rename(filepath.Join(dir, MetricsName), to); err != nil {
		return "", fmt.Errorf("trainer: output_dir: keeping the interrupted run's %s: %w", MetricsName, err)
	}
	return to, nil
}

// ClearOutputDir removes what a previous tune run wrote into output_dir (the files its record OutputsName lists,
// the record, and its checkpoint-N folders), when overwrite_output_dir is set and the run does not resume;
// other files are left alone. Files of a run's names (OutputArtifacts) that the record does not list, or all
// of them when there is no record (a run of a tune that wrote none), are an *UnrecordedOutputsError before
// anything is removed: they used to be deleted as the run's, a user's PEFT adapter beside a full fine-tune
// among them (tester10 T10-3). It does
// nothing unless output_dir holds a trainer_state.json, itself or in a checkpoint-N folder (the mark of a run's
// output, isRunOutput): CheckOutputDir refuses such a folder before a run starts. A checkpoint-N folder that
// holds anything a tune checkpoint does not write (foreignCheckpointFile: a user's file, or a folder no tune
// run made) is an error, before anything is removed (it used to be deleted with the rest, tester4).
func (a *TrainingArguments) ClearOutputDir() error {
	if !a.OverwriteOutputDir || a.resumesInPlace() {
		return nil
	}
	found := outputArtifactsIn(a.OutputDir)
	if !isRunOutput(a.OutputDir, found) {
		return nil
	}
	if err := a.overwriteBlockers(found); err != nil {
		return err
	}
	// What is left in found is the run's: the files its record lists (unrecordedOutputs found no other) and
	// its checkpoint-N folders (foreignCheckpoints found nothing else in them). The record goes last, so that
	// a removal that fails leaves the rest attributed.
	for _, name := range append(found, OutputsName) {
		if err := os.RemoveAll(filepath.Join(a.OutputDir, name)); err != nil {
			return fmt.Errorf("trainer: overwrite_output_dir: %w", err)
		}
	}
	return nil
}

// unrecordedOutputs returns an *UnrecordedOutputsError when output_dir holds files of a run's names
// (OutputArtifacts) that the record of its previous run (OutputsName) does not list, or has no record: the
// files overwrite_output_dir would otherwise delete as the run's, a user's adapter or results among them.
func (a *TrainingArguments) unrecordedOutputs() error {
	names, recorded, err := unrecordedOutputs(a.OutputDir)
	if err != nil {
		return fmt.Errorf("trainer: overwrite_output_dir: %w: %w; remove it and the files it would list, or choose "+
			"another output_dir", ErrOutputDirInUse, err)
	}
	if len(names) > 0 {
		return &UnrecordedOutputsError{Dir: a.OutputDir, Files: names, Recorded: recorded}
	}
	return nil
}

// overwriteBlockers returns everything that keeps overwrite_output_dir from replacing the previous run in
// output_dir, all at once (tester 13 needed three runs to learn of three files): the entries of its
// checkpoint-N folders that no tune checkpoint writes (foreignCheckpoints) and the files of a run's names that
// its record does not list (unrecordedOutputs), joined. CheckOutputDir reports them before a run builds
// anything (a bad input: exit 2 in the CLI), ClearOutputDir again before it removes anything.
func (a *TrainingArguments) overwriteBlockers(found []string) error {
	return errors.Join(a.foreignCheckpoints(found), a.unrecordedOutputs())
}

// foreignCheckpoints returns an error naming every checkpoint-N folder among found (outputArtifactsIn) that
// holds entries no tune checkpoint writes (foreignCheckpointFiles), with up to five of them each, nil when
// there is none.
func (a *TrainingArguments) foreignCheckpoints(found []string) error {
	var held []string
	for _, name := range found {
		if !IsCheckpointDir(name) {
			continue
		}
		if f := foreignCheckpointFiles(filepath.Join(a.OutputDir, name)); len(f) > 0 {
			if len(f) > 5 {
				f = append(f[:5:5], fmt.Sprintf("%d more", len(f)-5))
			}
			held = append(held, fmt.Sprintf("%s holds %s, which no tune checkpoint writes", filepath.Join(a.OutputDir, name), strings.Join(f, ", ")))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("trainer: overwrite_output_dir: %s: overwrite_output_dir removes only what a run wrote, so "+
		"nothing was removed; move those (or their folders) out of %s first", strings.Join(held, "; "), a.OutputDir)
}

// checkpointFiles are the names a tune checkpoint's files have, besides the model's or adapter's own
// (OutputArtifacts).
var checkpointFiles = []string{OptimizerName, SchedulerName, ScalerName, RNGStateName, TrainingArgsName,
	TrainerStateName, ManifestName}

// foreignCheckpointFile returns the name of the first entry of the checkpoint-N folder dir that a tune
// checkpoint does not hold, "" when there is none (see foreignCheckpointFiles).
func foreignCheckpointFile(dir string) string {
	if f := foreignCheckpointFiles(dir); len(f) > 0 {
		return f[0]
	}
	return ""
}

// foreignCheckpointFiles returns the names of the entries of the checkpoint-N folder dir that a tune
// checkpoint does not hold, nil when there is none: with a manifest, any entry it does not list; without one
// (an older or an interrupted tune run), any entry whose name no checkpoint writes, or a subdirectory.
func foreignCheckpointFiles(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var listed map[string]bool
	if b, err := os.ReadFile(filepath.Join(dir, ManifestName)); err == nil {
		var m Manifest
		if json.Unmarshal(b, &m) == nil && m.Format == manifestFormat {
			listed = map[string]bool{ManifestName: true}
			for _, f := range m.Files {
				listed[f.Name] = true
			}
		}
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		switch {
		case listed != nil && !listed[n],
			listed == nil && (e.IsDir() || !slices.Contains(checkpointFiles, n) && !slices.Contains(OutputArtifacts, n) &&
				!isShardName(n)):
			out = append(out, n)
		}
	}
	return out
}

// isShardName reports whether name is one of a sharded model's weight files, model-00001-of-00002.safetensors
// (loaders.WriteCheckpoint; transformers' save_pretrained names them so).
func isShardName(name string) bool {
	rest, ok := strings.CutPrefix(name, "model-")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".safetensors")
	i, of, ok2 := strings.Cut(rest, "-of-")
	if !ok || !ok2 || len(i) != 5 || len(of) != 5 {
		return false
	}
	for _, c := range i + of {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// foreignCheckpointError is the error for a checkpoint-N folder dir that a save of step N would replace while it
// holds files no tune checkpoint writes (foreign, from foreignCheckpointFiles): bad input, since the same run
// gives the same result until they are moved. The folder used to be replaced and the files lost (tester10).
func foreignCheckpointError(dir string, foreign []string) error {
	names := foreign
	more := ""
	if len(names) > 5 {
		names, more = names[:5], fmt.Sprintf(" and %d more", len(foreign)-5)
	}
	it := "it"
	if len(foreign) > 1 {
		it = "them"
	}
	return badinput.Errorf("trainer: output_dir: %s holds %s%s, which no tune checkpoint writes, and this run saves "+
		"its checkpoint of that step there, replacing the folder: move %s (or the folder) out of %s first",
		dir, strings.Join(names, ", "), more, it, filepath.Dir(dir))
}

// DefaultTrainingArguments returns transformers 5.17's defaults (transformers/training_args.py) plus tune's Shuffle = true.
func DefaultTrainingArguments() TrainingArguments {
	return TrainingArguments{
		OutputDir:                  "trainer_output",
		NumTrainEpochs:             3,
		MaxSteps:                   -1,
		PerDeviceTrainBatchSize:    8,
		PerDeviceEvalBatchSize:     8,
		GradientAccumulationSteps:  1,
		LearningRate:               5e-5,
		AdamBeta1:                  0.9,
		AdamBeta2:                  0.999,
		AdamEpsilon:                1e-8,
		MaxGradNorm:                1,
		Optim:                      "adamw_torch_fused",
		LRSchedulerType:            ScheduleLinear,
		Seed:                       42,
		Shuffle:                    true,
		LoggingStrategy:            IntervalSteps,
		LoggingSteps:               500,
		EvalStrategy:               IntervalNo,
		MaxConsecutiveSkippedSteps: 25,
		SaveStrategy:               IntervalSteps,
		SaveSteps:                  500,
	}
}

// ErrInvalidArguments is wrapped by every *ArgumentError, so callers can test errors.Is(err, ErrInvalidArguments).
var ErrInvalidArguments = errors.New("invalid training arguments")

// ArgumentError reports one TrainingArguments field whose value is not allowed. Key is the HF name
// ("learning_rate"), so a recipe can point at the line that set it.
type ArgumentError struct {
	Key    string // the HF argument name: "learning_rate", "eval_steps"
	Reason string // what is wrong, with the value given: "must be finite and > 0 (got +Inf)"
}

// Error formats as "trainer: learning_rate: must be finite and > 0 (got +Inf)".
func (e *ArgumentError) Error() string { return "trainer: " + e.Key + ": " + e.Reason }

// Unwrap returns ErrInvalidArguments.
func (e *ArgumentError) Unwrap() error { return ErrInvalidArguments }

// Validate checks every field the way transformers' TrainingArguments.__post_init__ (and its
// EarlyStoppingCallback) does, plus the finiteness checks HF leaves to a crash later (YAML 1.2 floats such as 1e-5, yaml.v3; PyYAML's YAML 1.1 reads them as strings: a learning rate
// of .inf parses but is rejected here). It returns nil or the errors.Join of one *ArgumentError per bad field.
func (a *TrainingArguments) Validate() error {
	var errs []error
	bad := func(key, format string, v ...any) {
		errs = append(errs, &ArgumentError{Key: key, Reason: fmt.Sprintf(format, v...)})
	}
	finite := func(key string, x float64) bool {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			bad(key, "must be a finite number (got %v)", x)
			return false
		}
		return true
	}

	if strings.TrimSpace(a.OutputDir) == "" {
		bad("output_dir", "must name a directory")
	}
	if a.MaxSteps <= 0 && a.MaxSteps != -1 {
		bad("max_steps", "must be > 0, or -1 to train for num_train_epochs (got %d)", a.MaxSteps)
	} else if a.MaxSteps > MaxStepCount { // near the int64 limit the epoch count overflowed: 0 steps, exit 0
		bad("max_steps", "must be at most %g steps (got %d)", float64(MaxStepCount), a.MaxSteps)
	}
	if finite("num_train_epochs", a.NumTrainEpochs) && a.MaxSteps <= 0 && a.NumTrainEpochs <= 0 {
		bad("num_train_epochs", "must be > 0 when max_steps is not set (got %v)", a.NumTrainEpochs)
	} else if a.MaxSteps <= 0 && a.NumTrainEpochs > MaxStepCount {
		bad("num_train_epochs", "must be at most %g (got %v); set max_steps for a run of a given length", float64(MaxStepCount), a.NumTrainEpochs)
	}
	if a.PerDeviceTrainBatchSize < 1 {
		bad("per_device_train_batch_size", "must be ≥ 1 (got %d)", a.PerDeviceTrainBatchSize)
	}
	if a.PerDeviceEvalBatchSize < 1 {
		bad("per_device_eval_batch_size", "must be ≥ 1 (got %d)", a.PerDeviceEvalBatchSize)
	}
	if a.GradientAccumulationSteps < 1 {
		bad("gradient_accumulation_steps", "must be ≥ 1 (got %d)", a.GradientAccumulationSteps)
	}
	if finite("learning_rate", a.LearningRate) && a.LearningRate <= 0 {
		bad("learning_rate", "must be > 0 (got %v)", a.LearningRate)
	}
	if finite("weight_decay", a.WeightDecay) && a.WeightDecay < 0 {
		bad("weight_decay", "must be ≥ 0 (got %v)", a.WeightDecay)
	}
	for _, b := range []struct {
		key string
		v   float64
	}{{"adam_beta1", a.AdamBeta1}, {"adam_beta2", a.AdamBeta2}} {
		if finite(b.key, b.v) && (b.v < 0 || b.v >= 1) {
			bad(b.key, "must be in [0, 1) (got %v)", b.v)
		}
	}
	if finite("adam_epsilon", a.AdamEpsilon) && a.AdamEpsilon < minAdamEpsilon {
		// PyTorch accepts 0, and AdamW then divides 0 by 0 for every weight whose gradient has been 0 so far
		// (an embedding row no batch used): NaN weights at the first step, blamed on the learning rate. AdamW
		// runs in FP32, where 1e-46 is 0 and a subnormal may be flushed to 0.
		bad("adam_epsilon", "must be at least %.3g, FP32's smallest normal number (got %v): AdamW divides by "+
			"sqrt(v) + adam_epsilon in FP32, which is 0 for a weight whose gradient has always been 0 (an unused "+
			"embedding row) and makes it NaN; the default is 1e-8", minAdamEpsilon, a.AdamEpsilon)
	}
	if finite("max_grad_norm", a.MaxGradNorm) && a.MaxGradNorm < 0 {
		bad("max_grad_norm", "must be ≥ 0; 0 disables clipping (got %v)", a.MaxGradNorm)
	}
	if a.Optim != "adamw_torch" && a.Optim != "adamw_torch_fused" {
		bad("optim", "tune implements AdamW only: use adamw_torch or adamw_torch_fused (got %q)", a.Optim)
	}
	if !slices.Contains(ScheduleNames, a.LRSchedulerType) {
		bad("lr_scheduler_type", "must be one of %s (got %q)", strings.Join(ScheduleNames, ", "), a.LRSchedulerType)
	} else if a.LRSchedulerType == SchedulePolynomial && a.LearningRate <= PolynomialLREnd {
		bad("learning_rate", "the polynomial schedule needs learning_rate > lr_end = %g (got %v)",
			PolynomialLREnd, a.LearningRate)
	}
	if finite("warmup_steps", a.WarmupSteps) && a.WarmupSteps < 0 {
		bad("warmup_steps", "must be ≥ 0: a step count (≥ 1) or a fraction of the total steps (< 1) (got %v)",
			a.WarmupSteps)
	} else if a.WarmupSteps > MaxStepCount {
		bad("warmup_steps", "must be at most %g steps (got %v)", float64(MaxStepCount), a.WarmupSteps)
	}
	if a.FP16 && a.BF16 {
		bad("bf16", "fp16 and bf16 are both true; choose one mixed-precision mode")
	}
	if a.FP16FullEval && a.BF16FullEval {
		bad("bf16_full_eval", "fp16_full_eval and bf16_full_eval are both true; choose one")
	}
	if finite("label_smoothing_factor", a.LabelSmoothingFactor) &&
		(a.LabelSmoothingFactor < 0 || a.LabelSmoothingFactor >= 1) {
		bad("label_smoothing_factor", "must be in [0, 1) (got %v)", a.LabelSmoothingFactor)
	}

	a.validateIntervals(bad, finite)
	a.validateBestModel(bad, finite)
	return errors.Join(errs...)
}

// validateIntervals checks the logging, eval and save strategies and their step counts.
func (a *TrainingArguments) validateIntervals(bad func(string, string, ...any), finite func(string, float64) bool) {
	for _, s := range []struct {
		key   string
		v     IntervalStrategy
		steps float64
		skey  string
	}{
		{"logging_strategy", a.LoggingStrategy, a.LoggingSteps, "logging_steps"},
		{"eval_strategy", a.EvalStrategy, a.EvalSteps, "eval_steps"},
		{"save_strategy", a.SaveStrategy, a.SaveSteps, "save_steps"},
	} {
		if !slices.Contains(strategyNames, s.v) {
			bad(s.key, "must be one of no, steps, epoch (got %q)", s.v)
			continue
		}
		if !finite(s.skey, s.steps) {
			continue
		}
		switch {
		case s.steps < 0:
			bad(s.skey, "must be ≥ 0 (got %v)", s.steps)
		case s.steps > MaxStepCount:
			bad(s.skey, "must be at most %g steps (got %v)", float64(MaxStepCount), s.steps)
		case s.steps > 1 && s.steps != math.Trunc(s.steps):
			bad(s.skey, "must be an integer when ≥ 1, or a fraction of the total steps below 1 (got %v)", s.steps)
		case s.v != IntervalSteps || s.steps > 0:
		case s.key != "eval_strategy":
			bad(s.skey, "must be > 0 when %s is steps", s.key)
		case a.LoggingSteps <= 0: // eval_steps unset falls back to logging_steps
			bad(s.skey, "eval_strategy is steps but neither eval_steps nor logging_steps is set")
		}
	}
}

// validateBestModel checks load_best_model_at_end and early stopping against the eval and save strategies, as
// HF's __post_init__ and EarlyStoppingCallback do.
func (a *TrainingArguments) validateBestModel(bad func(string, string, ...any), finite func(string, float64) bool) {
	if a.SaveTotalLimit < 0 {
		bad("save_total_limit", "must be ≥ 0; 0 keeps every checkpoint (got %d)", a.SaveTotalLimit)
	}
	if a.LoadBestModelAtEnd {
		switch {
		case a.EvalStrategy == IntervalNo:
			bad("load_best_model_at_end", "needs an eval_strategy (steps or epoch) to know which model is best")
		case a.EvalStrategy != a.SaveStrategy:
			bad("load_best_model_at_end", "needs save_strategy equal to eval_strategy (got save %q, eval %q)",
				a.SaveStrategy, a.EvalStrategy)
		case a.EvalStrategy == IntervalSteps && a.EvalSteps >= 1 && a.SaveSteps >= 1 &&
			math.Mod(a.SaveSteps, a.evalSteps()) != 0:
			bad("save_steps", "must be a round multiple of eval_steps when load_best_model_at_end is set (got %v and %v)",
				a.SaveSteps, a.evalSteps())
		}
	}
	if a.EarlyStoppingPatience < 0 {
		bad("early_stopping_patience", "must be ≥ 0; 0 disables early stopping (got %d)", a.EarlyStoppingPatience)
	}
	if a.EarlyStoppingPatience > 0 && a.EvalStrategy == IntervalNo {
		bad("early_stopping_patience", "needs an eval_strategy (steps or epoch): early stopping watches the eval metric")
	}
	if a.MaxConsecutiveSkippedSteps < 0 {
		bad("max_consecutive_skipped_steps", "must be ≥ 0; 0 never stops an fp16 run for skipped steps (got %d)", a.MaxConsecutiveSkippedSteps)
	}
	if finite("early_stopping_threshold", a.EarlyStoppingThreshold) && a.EarlyStoppingThreshold < 0 {
		bad("early_stopping_threshold", "must be ≥ 0 (got %v)", a.EarlyStoppingThreshold)
	}
}

// evalSteps is eval_steps, or logging_steps when it is unset (HF's rule).
func (a *TrainingArguments) evalSteps() float64 {
	if a.EvalSteps == 0 {
		return a.LoggingSteps
	}
	return a.EvalSteps
}

// NumWarmupSteps returns the number of warmup optimizer steps for a run of total optimizer steps: int(x) for
// warmup_steps x ≥ 1, ceil(total·x) for x < 1 (transformers 5.17 `get_warmup_steps`, transformers/optimization.py).
func (a *TrainingArguments) NumWarmupSteps(total int) int {
	return intervalSteps(a.WarmupSteps, total)
}

// LoggingInterval returns logging_steps resolved against total optimizer steps (a fraction below 1 becomes
// ceil(total·x)), at least 1.
func (a *TrainingArguments) LoggingInterval(total int) int {
	return max(1, intervalSteps(a.LoggingSteps, total))
}

// EvalInterval returns eval_steps (or logging_steps when unset) resolved like LoggingInterval.
func (a *TrainingArguments) EvalInterval(total int) int {
	return max(1, intervalSteps(a.evalSteps(), total))
}

// SaveInterval returns save_steps resolved like LoggingInterval.
func (a *TrainingArguments) SaveInterval(total int) int {
	return max(1, intervalSteps(a.SaveSteps, total))
}

// minAdamEpsilon is the smallest adam_epsilon: FP32's smallest normal number (AdamW's arithmetic is FP32).
const minAdamEpsilon = 0x1p-126

// MaxStepCount bounds max_steps, the float step counts (warmup_steps, logging_steps, eval_steps, save_steps) and
// num_train_epochs: 1e15 steps would not end (a million years at 30 steps a second), and beyond 2^63 a float
// converts to a negative int.
const MaxStepCount = 1e15

// intervalSteps is HF's reading of a step-count field: x ≥ 1 is a count, x < 1 a fraction of total (ceil).
func intervalSteps(x float64, total int) int {
	if x >= 1 {
		return int(x)
	}
	return int(math.Ceil(float64(total) * x))
}

// TotalSteps returns the number of optimizer steps of the run and the number of epochs it spans, given the
// number of micro-batches in one epoch, as transformers' Trainer computes them: an epoch has
// ceil(batchesPerEpoch / gradient_accumulation_steps) optimizer steps (the last window may be short, at least
// one step); max_steps > 0 wins, else total = ceil(num_train_epochs × steps per epoch).
func (a *TrainingArguments) TotalSteps(batchesPerEpoch int) (steps, epochs int) {
	perEpoch := max(1, (batchesPerEpoch+a.GradientAccumulationSteps-1)/max(1, a.GradientAccumulationSteps))
	if a.MaxSteps > 0 {
		return a.MaxSteps, (a.MaxSteps + perEpoch - 1) / perEpoch
	}
	return int(math.Ceil(a.NumTrainEpochs * float64(perEpoch))), int(math.Ceil(a.NumTrainEpochs))
}

// BestMetric returns the metric that ranks checkpoints, without an "eval_" prefix: metric_for_best_model, or
// "loss" when it is empty.
func (a *TrainingArguments) BestMetric() string {
	m := strings.TrimPrefix(a.MetricForBestModel, "eval_")
	if m == "" {
		return "loss"
	}
	return m
}

// IsGreaterBetter reports whether a larger BestMetric is better: greater_is_better when set, else true for
// every metric except the loss (HF's rule).
func (a *TrainingArguments) IsGreaterBetter() bool {
	if a.GreaterIsBetter != nil {
		return *a.GreaterIsBetter
	}
	return a.BestMetric() != "loss"
}

// MixedPrecision names the training precision as HF's mixed_precision does: "fp16", "bf16" or "no".
func (a *TrainingArguments) MixedPrecision() string {
	switch {
	case a.FP16:
		return "fp16"
	case a.BF16:
		return "bf16"
	}
	return "no"
}

// strategyNames are the valid values of the *_strategy fields.
var strategyNames = []IntervalStrategy{IntervalNo, IntervalSteps, IntervalEpoch}

// isHomeDir reports whether dir is the user's home directory ($HOME), through symbolic links too.
func isHomeDir(dir string) bool {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return false
	}
	same := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Clean(p)
	}
	return same(dir) == same(home)
}
