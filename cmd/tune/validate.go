package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/internal/dirlock"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tensor"
)

func init() { register(newValidateCmd) }

// validateOptions holds `tune validate`'s flags and arguments.
type validateOptions struct {
	Recipe    string   // a recipe file or an embedded recipe's name
	Overrides []string // dotted key=value pairs
	NoFiles   bool     // --no-files: skip the check that the input files exist
	FP16      bool     // --fp16, --bf16, --cuda-graphs and --device: as tune finetune's, so a finetune command line validates as is
	BF16      bool
	Graphs    bool
	Device    string
}

func newValidateCmd() *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate [--fp16|--bf16] [--cuda-graphs] [--device cpu|cuda|cuda:N] RECIPE [key=value ...]",
		Short: "Check a recipe and print it resolved, without training",
		Long: `validate reads RECIPE (a YAML file, or the name of an embedded recipe: see tune ls), applies the
key=value overrides and checks what tune finetune checks before it loads the data: unknown keys (with the
closest valid key), values of the wrong type (with their line), the training arguments (fp16 and bf16
together, a non-finite or non-positive learning rate, ...), the LoRA settings, that the model, tokenizer
and data files exist, that the tokenizer loads (for BERT with a padding token in its vocabulary), and that
training.output_dir is one finetune would write into: not locked by a run in progress, not a finished run
without overwrite_output_dir, no files there that a run would replace but did not write (skip these file
checks with --no-files). The data files' contents (columns, rows, labels) are read by finetune, which names
the file and line of a bad one before it trains. A device this machine lacks (device: cuda in a binary
without CUDA) is a warning: the recipe may be meant for another machine. It creates no output (an embedded
recipe's data is unpacked once into the user cache directory). On success it prints the resolved recipe:
every default filled in (do_eval set when eval_strategy is not no, as transformers sets it), relative paths
resolved (an embedded recipe's paths to files tune does not embed are printed as the recipe writes them).

Overrides are dotted keys with YAML values: training.learning_rate=2e-5, lora.r=16,
lora.target_modules=[query,key,value], data.train=other.tsv; key=null or ~key removes a key (lora=null: full
fine-tuning, as if the recipe had no lora section). --fp16, --bf16, --cuda-graphs and --device are tune
finetune's. Paths
in overrides are relative to the working directory; paths in the recipe file are relative to the file's
directory. A lora.target_modules name that no module of the model has is reported here too, from the
checkpoint's config.json alone, with the model's module names.

Exit status 2 when the recipe is invalid.`,
		Example: `  tune validate recipes/tiny.yaml training.output_dir=runs/tiny-2
  tune validate tiny training.learning_rate=5e-4 training.num_train_epochs=2
  tune validate --no-files recipes/bert.yaml lora.r=16 lora.lora_alpha=32`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("validate needs a RECIPE (a file, or one of the names tune ls lists)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Recipe, o.Overrides = args[0], args[1:]
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.NoFiles, "no-files", false, "check the recipe only, not that its model, tokenizer and data files exist")
	f.BoolVar(&o.FP16, "fp16", false, "as tune finetune --fp16 (sets training.fp16)")
	f.BoolVar(&o.BF16, "bf16", false, "as tune finetune --bf16 (sets training.bf16)")
	f.BoolVar(&o.Graphs, "cuda-graphs", false, "as tune finetune --cuda-graphs (sets training.cuda_graphs)")
	f.StringVar(&o.Device, "device", "", "as tune finetune --device (cpu, cuda, cuda:N or auto)")
	return cmd
}

func (o *validateOptions) run(stdout, stderr io.Writer) error {
	if err := checkSingleProcess(os.Getenv); err != nil { // what finetune refuses first
		return err
	}
	// The same overrides finetune would apply for these flags and arguments.
	overrides, err := (&finetuneOptions{Overrides: o.Overrides, FP16: o.FP16, BF16: o.BF16, Graphs: o.Graphs, Device: o.Device}).overrides()
	if err != nil {
		return err
	}
	r, err := loadRecipe(o.Recipe, overrides, stderr)
	if err != nil {
		return err
	}
	if !o.NoFiles {
		if err := r.CheckFiles(); err != nil {
			return usageError{err}
		}
		if err := r.CheckTokenizer(); err != nil { // what finetune refuses before it builds the model
			return err
		}
		// What finetune refuses next, before it loads anything: an output_dir another run holds (its lock), or
		// one whose contents the run would replace (a finished run without overwrite_output_dir, files a run
		// did not write). Checked without taking the lock or creating anything.
		if err := dirlock.Check(r.Training.OutputDir); err != nil {
			var held *dirlock.HeldError
			if errors.As(err, &held) {
				return usageError{err}
			}
			return usageError{fmt.Errorf("training.output_dir: %w", err)}
		}
		if err := checkRunOutputDir(r); err != nil {
			return err
		}
	}
	if strings.HasPrefix(r.Device, "cuda") && !cuda.Available() {
		// The recipe may be meant for another machine (validated on a laptop, trained on a GPU server), so
		// this is a warning, not a refusal; tune finetune here would stop with exit status 3 (tester 13).
		_, why := cuda.Probe()
		reason := strings.TrimSuffix(errctx.Trim(fmt.Sprint(why)), ": "+tensor.ErrNoDevice.Error())
		fmt.Fprintf(stderr, "tune: warning: device: %s is not available here: %s; tune finetune of this recipe would exit 3 on this machine\n",
			r.Device, reason)
	}
	out, err := r.Marshal()
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// loadRecipe loads a recipe with its overrides (recipes.Load), prints its warnings to stderr, and turns an
// invalid recipe or a missing recipe file into a usage error (exit status 2). The commands that run a recipe
// share it, so they all report a bad recipe the same way and before they create anything.
func loadRecipe(ref string, overrides []string, stderr io.Writer) (*recipes.Recipe, error) {
	r, err := recipes.Load(ref, overrides)
	if err != nil {
		if errors.Is(err, recipes.ErrInvalid) || errors.Is(err, fs.ErrNotExist) {
			return nil, usageError{err}
		}
		return nil, err
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "tune: warning: %s: %s\n", r.Source, w)
	}
	return r, nil
}
