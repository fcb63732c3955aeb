package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/internal/dirlock"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/trainer"
)

func init() { register(newFinetuneCmd) }

// finetuneOptions holds `tune finetune`'s flags and arguments.
type finetuneOptions struct {
	Recipe    string   // a recipe file or an embedded recipe's name
	Overrides []string // dotted key=value pairs
	FP16      bool     // --fp16: training.fp16=true, training.bf16=false
	BF16      bool     // --bf16: training.bf16=true, training.fp16=false
	Device    string   // --device: overrides the recipe's device
	Graphs    bool     // --cuda-graphs: training.cuda_graphs=true
}

func newFinetuneCmd() *cobra.Command {
	o := &finetuneOptions{}
	cmd := &cobra.Command{
		Use:   "finetune [--fp16|--bf16] [--cuda-graphs] [--device cpu|cuda|cuda:N] RECIPE [key=value ...]",
		Short: "Fine-tune a model as a recipe says: train, evaluate, save",
		Long: `finetune reads RECIPE (a YAML file, or the name of an embedded recipe: see tune ls), applies the key=value
overrides (key=null or ~key removes a key: lora=null trains in full), checks everything (exit status 2 and
no output directory when the recipe is wrong), then loads the model and the data, trains with Hugging Face
Trainer semantics, evaluates and saves.

It prints the device, the precision and PEFT's trainable-parameter line, then progress: a progress bar on a
terminal (step/total, loss, learning rate, loss scale, tokens/s, ETA), one line per logged step otherwise.
At the end it prints the eval metrics of the final model (when the recipe evaluates: training.eval_strategy
epoch or steps, or training.do_eval=true, as in Hugging Face's example scripts) and where the outputs went,
all under training.output_dir, which must be new, empty, or a previous run's (training.overwrite_output_dir
replaces that run and deletes nothing else; a run stopped before its first checkpoint leaves only its
metrics.jsonl, which the next run there keeps as metrics.jsonl.1):
  model.safetensors + config.json (or the LoRA adapter) and the tokenizer files: the trained model, which
      tune eval, tune predict and Hugging Face's from_pretrained read;
  checkpoint-N/: checkpoints (resume with training.resume_from_checkpoint=true);
  metrics.jsonl, trainer_state.json, training_curve.png: the logs and the loss/metric curves;
  train_results.json, eval_results.json, all_results.json: the final metrics, as the example scripts write.

--fp16 trains with FP16 autocast and dynamic loss scaling, --bf16 with BF16 autocast; without them the
recipe's training.fp16/bf16 decide. The device defaults to the recipe's (auto: CUDA when this binary has it
and a GPU is present, else the CPU). --cuda-graphs (training.cuda_graphs=true) runs each optimizer step as
one CUDA graph after a warm-up; on the CPU it warns and the steps run eagerly. Ctrl-C (SIGINT) or SIGTERM
stops after the current step and exits 130 or 143 (128 + the signal); the last checkpoint stays valid.`,
		Example: `  tune finetune recipes/tiny.yaml
  tune finetune tiny training.num_train_epochs=2
  tune finetune --bf16 recipes/bert.yaml model.path=../bert-base-uncased
  tune finetune --fp16 --device cuda:1 recipes/bert-full.yaml training.learning_rate=2e-5
  tune finetune recipes/tiny.yaml training.resume_from_checkpoint=true`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("finetune needs a RECIPE (a file, or one of the names tune ls lists)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Recipe, o.Overrides = args[0], args[1:]
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.FP16, "fp16", false, "train in FP16 mixed precision with dynamic loss scaling (sets training.fp16)")
	f.BoolVar(&o.BF16, "bf16", false, "train in BF16 mixed precision (sets training.bf16)")
	f.StringVar(&o.Device, "device", "", "cpu, cuda, cuda:N or auto (default: the recipe's device)")
	f.BoolVar(&o.Graphs, "cuda-graphs", false, "run each optimizer step as one CUDA graph after a warm-up (sets training.cuda_graphs)")
	return cmd
}

// overrides returns the recipe overrides: the positional ones, then those the flags imply (flags win).
func (o *finetuneOptions) overrides() ([]string, error) {
	if o.FP16 && o.BF16 {
		return nil, usagef("--fp16 and --bf16 are exclusive: choose one mixed-precision mode")
	}
	out := append([]string(nil), o.Overrides...)
	for _, kv := range out {
		if !strings.Contains(kv, "=") && !strings.HasPrefix(kv, "~") {
			return nil, usagef("%q is not a key=value override (e.g. training.learning_rate=2e-5; ~key removes a key)", kv)
		}
	}
	// A flag overrides the recipe file's precision (--fp16 on a bf16 recipe), but not an override given on the
	// same command line that asks for the other mode: that is both at once.
	for _, kv := range out {
		k, v, _ := strings.Cut(kv, "=")
		on := slices.Contains([]string{"true", "True", "TRUE", "yes", "on", "1"}, strings.TrimSpace(v))
		switch {
		case o.FP16 && on && strings.TrimSpace(k) == "training.bf16":
			return nil, usagef("--fp16 and the override %s are exclusive: choose one mixed-precision mode", kv)
		case o.BF16 && on && strings.TrimSpace(k) == "training.fp16":
			return nil, usagef("--bf16 and the override %s are exclusive: choose one mixed-precision mode", kv)
		}
	}
	switch {
	case o.FP16:
		out = append(out, "training.fp16=true", "training.bf16=false")
	case o.BF16:
		out = append(out, "training.bf16=true", "training.fp16=false")
	}
	if o.Graphs {
		out = append(out, "training.cuda_graphs=true")
	}
	if o.Device != "" {
		if err := recipes.CheckDevice(o.Device); err != nil {
			return nil, usagef("--device %s: %v", o.Device, err)
		}
		out = append(out, "device="+o.Device)
	}
	return out, nil
}

func (o *finetuneOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// SIGTERM (timeout(1), Slurm, Kubernetes, systemd) stops the run as Ctrl-C does: the step in flight ends, the
	// lock is released and the message names the last checkpoint; before, the default action killed the process
	// mid-step and left a stale lock. The exit status is 128 + the signal (interruptCode). While the model and
	// data load, a signal ends the process at once, with the lock released (guardLoading).
	ctx, stop := notifyStop(ctx)
	defer stop()
	guard := guardLoading(ctx, stderr)
	if err := checkSingleProcess(os.Getenv); err != nil {
		return err
	}
	overrides, err := o.overrides()
	if err != nil {
		return err
	}
	r, err := loadRecipe(o.Recipe, overrides, stderr)
	if err != nil {
		return err
	}
	if err := r.CheckFiles(); err != nil {
		return usageError{err}
	}
	// One run per output_dir, for the whole run: a second one is refused here, naming the holder.
	lock, err := dirlock.Acquire(r.Training.OutputDir)
	var held *dirlock.HeldError
	if errors.As(err, &held) {
		return usageError{err}
	}
	if err != nil {
		return usageError{fmt.Errorf("training.output_dir: %w", err)}
	}
	defer lock.Release()
	guard.onStop(func() { lock.Release() })
	if lock.Stale != "" {
		fmt.Fprintf(stderr, "tune: warning: %s\n", lock.Stale)
	}
	if err := checkRunOutputDir(r); err != nil {
		return err
	}
	b, err := recipes.OpenDevice(r.Device)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "device: %s\n", b.Name())
	run, err := recipes.Build(r, b, trainer.WithOutput(stdout), trainer.WithLogger(cliLogger(stderr)))
	if errors.Is(err, lora.ErrNoTargets) || errors.Is(err, lora.ErrInvalidConfig) {
		// A recipe value the model's module names or sizes refute (lora.target_modules, lora.r): bad usage, as a
		// typo in any other key (exit 2).
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer run.Trainer.Close()
	for _, n := range run.Notices {
		fmt.Fprintf(stderr, "tune: note: %s\n", n)
	}
	a := r.Training
	fmt.Fprintf(stdout, "recipe: %s\nprecision: %s\n%s\n", r.Source, precisionName(a), lora.TrainableReport(run.Model))
	fmt.Fprintf(stdout, "data: %d training examples", run.TrainLen())
	if run.HasEval() {
		fmt.Fprintf(stdout, ", %d eval examples", run.EvalLen())
	}
	fmt.Fprintln(stdout)
	if run.HasEval() && !a.EvaluatesAtEnd() {
		fmt.Fprintf(stderr, "tune: note: data.eval is set but training.eval_strategy is no: the eval set is not evaluated "+
			"(set training.do_eval=true to evaluate the final model, or training.eval_strategy=epoch or steps)\n")
	}

	guard.started()
	out, err := run.Trainer.Train(ctx)
	if errors.Is(err, trainer.ErrNothingToTrain) {
		return usageError{err} // a resume_from_checkpoint with nothing after it: bad usage, nothing written
	}
	if ae := (*trainer.ArgumentError)(nil); errors.As(err, &ae) {
		// An argument only the dataset's size shows to be out of range (num_train_epochs × the steps of an
		// epoch): bad usage, named by its recipe key, nothing written.
		return usageError{fmt.Errorf("%s: training.%s: %s", r.Source, ae.Key, ae.Reason)}
	}
	if err != nil {
		return err
	}
	// The model is saved before the final evaluation, as run_glue.py calls trainer.save_model() before
	// trainer.evaluate(): a Ctrl-C in the evaluation leaves the trained model, and the message says so.
	if err := run.SaveModel(a.OutputDir); err != nil { // the model or adapter, and the tokenizer files
		return err
	}
	metrics, err := finalMetrics(ctx, run)
	if errors.Is(err, context.Canceled) {
		return interruptedEval{fmt.Sprintf("the final evaluation was interrupted; the trained model is saved in %s: "+
			"the same command with training.resume_from_checkpoint=true finishes the run (evaluation and results), "+
			"or tune eval --model %s evaluates it", a.OutputDir, a.OutputDir), err}
	}
	if err != nil {
		return err
	}
	if err := saveResults(a.OutputDir, run, out, metrics); err != nil {
		return err
	}
	if out.StartStep > 0 && out.GlobalStep == out.StartStep {
		// A resume from the run's last checkpoint: nothing trained, the end of training written ("trained steps
		// 21-20" said otherwise).
		fmt.Fprintf(stdout, "\nno step left to train: the checkpoint is at step %d, the end of the run; saved the final "+
			"model and results (train_loss %.4f over the run's %d steps)\n", out.StartStep, out.TrainingLoss, out.GlobalStep)
	} else if out.StartStep > 0 {
		fmt.Fprintf(stdout, "\ntrained steps %d-%d (resumed at step %d) in %.1fs, train_loss %.4f over the run's %d steps\n",
			out.StartStep+1, out.GlobalStep, out.StartStep, out.Metrics["train_runtime"], out.TrainingLoss, out.GlobalStep)
	} else {
		fmt.Fprintf(stdout, "\ntrained %d steps in %.1fs, train_loss %.4f\n", out.GlobalStep, out.Metrics["train_runtime"], out.TrainingLoss)
	}
	if metrics != nil {
		fmt.Fprintf(stdout, "eval:%s\n", formatMetrics(metrics))
	}
	printOutputs(stdout, a.OutputDir, r.LoRA != nil)
	return nil
}

// checkRunOutputDir is what finetune refuses in training.output_dir once it holds the folder's lock: a finished
// run without overwrite_output_dir, files a run would replace that it did not write, ... (CheckOutputDir), as
// a usage error whose way out is in recipe keys. tune validate asks it too.
func checkRunOutputDir(r *recipes.Recipe) error {
	if err := r.Training.CheckOutputDir(); err != nil {
		var inUse *trainer.OutputDirInUseError
		if errors.As(err, &inUse) { // the way out in recipe keys: training.overwrite_output_dir=true, ...
			return usagef("%s", inUse.Message("training."))
		}
		return usageError{err}
	}
	return nil
}

// saveResults writes train_results.json, eval_results.json and all_results.json into output_dir, as
// transformers' run_glue does (trainer.save_metrics, with train_samples and eval_samples added).
func saveResults(dir string, run *recipes.Run, out trainer.TrainOutput, eval map[string]float64) error {
	train := maps.Clone(out.Metrics)
	train["train_samples"] = float64(run.TrainLen())
	if err := trainer.SaveMetrics(dir, "train", train); err != nil {
		return err
	}
	if eval == nil {
		return nil
	}
	eval = maps.Clone(eval)
	eval["eval_samples"] = float64(run.EvalLen())
	eval["epoch"] = out.Metrics["epoch"]
	return trainer.SaveMetrics(dir, "eval", eval)
}

// precisionName describes the training precision.
func precisionName(a trainer.TrainingArguments) string {
	switch {
	case a.FP16:
		return "fp16 autocast with dynamic loss scaling"
	case a.BF16:
		return "bf16 autocast"
	}
	return "fp32"
}

// finalMetrics returns the eval metrics of the final model: the logged evaluation of the best step when
// load_best_model_at_end restored it, the last logged evaluation when it was at the final step, else a new
// evaluation. Nil without an eval set, and when the recipe asks for no evaluation (eval_strategy no and no
// do_eval: transformers' example scripts evaluate only under do_eval, which eval_strategy implies).
func finalMetrics(ctx context.Context, run *recipes.Run) (map[string]float64, error) {
	if !run.HasEval() || !run.Recipe.Training.EvaluatesAtEnd() {
		return nil, nil
	}
	s := run.Trainer.State()
	want := s.GlobalStep
	if run.Recipe.Training.LoadBestModelAtEnd && s.BestGlobalStep != nil {
		want = *s.BestGlobalStep
	}
	for i := len(s.LogHistory) - 1; i >= 0; i-- {
		if l := s.LogHistory[i]; int(l["step"]) == want {
			if _, ok := l["eval_loss"]; ok {
				return l, nil
			}
		}
	}
	return run.Trainer.Evaluate(ctx)
}

// formatMetrics renders the eval_* entries as " accuracy 0.8520  f1 0.8512 ..." in sorted order.
func formatMetrics(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if name, ok := strings.CutPrefix(k, "eval_"); ok && !strings.HasSuffix(k, "_per_second") && k != "eval_runtime" {
			fmt.Fprintf(&b, "  %s %.4f", name, m[k])
		}
	}
	return b.String()
}

// printOutputs lists what training wrote into dir.
func printOutputs(w io.Writer, dir string, adapter bool) {
	fmt.Fprintf(w, "outputs in %s:\n", dir)
	all, _ := trainer.ScanCheckpoints(dir)
	var cps, incomplete []string
	for _, c := range all {
		if c.Problem == "" {
			cps = append(cps, filepath.Base(c.Dir))
		} else {
			incomplete = append(incomplete, fmt.Sprintf("%s (%s)", filepath.Base(c.Dir), c.Problem))
		}
	}
	// What this run saved, by its recipe: the folder's files would name a user's PEFT adapter kept beside a
	// full fine-tune (never replaced) as the run's output.
	what := "model (config.json, model.safetensors)"
	if adapter {
		what = "LoRA adapter in PEFT's format (adapter_config.json, adapter_model.safetensors)"
	}
	fmt.Fprintf(w, "  %s and tokenizer: %s\n", what, dir)
	for _, name := range []string{trainer.MetricsName, trainer.TrainerStateName, trainer.CurveName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil { // no curve without a logged step
			fmt.Fprintf(w, "  %s\n", filepath.Join(dir, name))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, trainer.AllResultsName)); err == nil {
		var also []string
		for _, f := range []string{"train_results.json", "eval_results.json"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				also = append(also, f)
			}
		}
		fmt.Fprintf(w, "  %s (and %s, as transformers' example scripts write)\n", filepath.Join(dir, trainer.AllResultsName), strings.Join(also, ", "))
	}
	if len(cps) > 0 {
		fmt.Fprintf(w, "  checkpoints: %s\n", strings.Join(cps, ", "))
	}
	if len(incomplete) > 0 {
		fmt.Fprintf(w, "  incomplete checkpoints, never resumed from: %s\n", strings.Join(incomplete, ", "))
	}
	if other := otherModelFiles(dir, adapter); len(other) > 0 {
		fmt.Fprintf(w, "  not written by this run, left as they were: %s\n", strings.Join(other, ", "))
	}
}

// otherModelFiles lists the model files of the other kind in dir, which this run did not write: a PEFT
// adapter's beside a full fine-tune (adapter is false), a full model's beside a LoRA run.
func otherModelFiles(dir string, adapter bool) []string {
	names := []string{lora.AdapterConfigName, "adapter_model.safetensors"}
	if adapter {
		names = []string{"model.safetensors"}
	}
	var out []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// cliLogger returns a logger that prints the Trainer's messages on w: what it did ("tune: resuming from
// runs/x/checkpoint-500 (global step 500)", at slog.LevelInfo) and its warnings and errors ("tune: warning:
// message (key=value, ...)"); debug messages are dropped.
func cliLogger(w io.Writer) *slog.Logger { return slog.New(&cliHandler{w: w}) }

// cliHandler is a slog.Handler for cliLogger.
type cliHandler struct {
	w     io.Writer
	attrs []slog.Attr
}

func (h *cliHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *cliHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("tune: ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var kv []string
	add := func(a slog.Attr) bool {
		kv = append(kv, a.Key+"="+a.Value.String())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if len(kv) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(kv, ", "))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *cliHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &cliHandler{w: h.w, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *cliHandler) WithGroup(string) slog.Handler { return h }

// interruptedEval is the error of a Ctrl-C in the final evaluation: its message, wrapping context.Canceled
// unprinted (the exit code is the interrupt's).
type interruptedEval struct {
	msg string
	err error
}

func (e interruptedEval) Error() string { return e.msg }
func (e interruptedEval) Unwrap() error { return e.err }
