package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/datasets"
	"github.com/tune-ml/tune/internal/probe"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/trainer"
)

func init() { register(newDebugCmd) }

// errFound is what tune debug nan returns after printing its report when something is non-finite (exit 1).
var errFound = errors.New("non-finite values found")

func newDebugCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "debug",
		Short: "Find where a model turns non-finite, and compare FP32 with FP16/BF16 autocast",
		Long: `debug holds the mixed-precision debugging tools:

  tune debug nan RECIPE | --model DIR ...    per-module inf/NaN checks in forward and backward
  tune debug compare --model DIR --input FILE  each layer's output and the logits, FP32 vs autocast`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDebugNaNCmd(), newDebugCompareCmd())
	return cmd
}

// debugData are the flags that choose the batches of a --model run.
type debugData struct {
	Model, Adapter, Tokenizer, Input string
	ForceBase                        bool // --force-base (checkAdapterBase)
	Device                           string
	Batches, BatchSize, MaxLength    int
	tokenizer                        string
}

func (d *debugData) flags(cmd *cobra.Command, batches int) {
	f := cmd.Flags()
	f.StringVar(&d.Model, "model", "", "a saved model directory (config.json, model.safetensors)")
	f.StringVar(&d.Adapter, "adapter", "", "a PEFT LoRA adapter directory applied on top of --model")
	forceBaseFlag(cmd, &d.ForceBase)
	f.StringVar(&d.Tokenizer, "tokenizer", "", "the tokenizer (default: the adapter's, else the model's)")
	f.StringVar(&d.Input, "input", "", "a TSV, CSV or JSONL file of texts (labels, if present, drive the backward)")
	f.StringVar(&d.Device, "device", "", "cpu, cuda, cuda:N or auto (default: the recipe's, else auto)")
	f.IntVar(&d.Batches, "batches", batches, "how many batches to run")
	f.IntVar(&d.BatchSize, "batch-size", 8, "examples per batch (--model; a recipe uses per_device_train_batch_size)")
	f.IntVar(&d.MaxLength, "max-length", 128, "truncate inputs to this many tokens (--model)")
}

// open loads --model (and --adapter) and the first --batches batches of --input in file order.
func (d *debugData) open(stderr io.Writer, labelled bool) (*recipes.Run, []*loaders.Batch, error) {
	if d.Batches < 1 || d.BatchSize < 1 || d.MaxLength < 2 {
		return nil, nil, usagef("--batches and --batch-size must be ≥ 1 and --max-length ≥ 2")
	}
	tok, err := checkModelPaths(stderr, d.Model, d.Adapter, d.Tokenizer, d.ForceBase)
	if err != nil {
		return nil, nil, err
	}
	if d.Input != "" {
		if err := checkInputFile("--input", d.Input); err != nil {
			return nil, nil, err
		}
	}
	device := d.Device
	if device == "" {
		device = "auto"
	}
	b, err := openDevice(device)
	if err != nil {
		return nil, nil, err
	}
	run, err := openModel(d.Model, d.Adapter, tok, b)
	if err != nil {
		return nil, nil, err
	}
	printNotices(stderr, run)
	if d.Input == "" {
		return run, nil, nil
	}
	data := recipes.Data{MaxLength: d.MaxLength}
	var ds *datasets.Text
	if labelled {
		ds, err = run.LoadDataset("--input", d.Input, data, nil)
	}
	if !labelled || err != nil {
		var uerr error
		if ds, uerr = run.LoadUnlabelled("--input", d.Input, data); uerr != nil {
			if err == nil {
				err = uerr
			}
			return nil, nil, err
		}
		if err != nil {
			fmt.Fprintf(stderr, "tune: note: %s has no usable labels (%v): forward only\n", d.Input, err)
		}
	}
	order := make([]int, ds.Len())
	for i := range order {
		order[i] = i
	}
	batches, err := collate(ds, order, d.BatchSize, d.Batches)
	return run, batches, err
}

// collate returns up to n batches of size bs from order.
func collate(ds *datasets.Text, order []int, bs, n int) ([]*loaders.Batch, error) {
	var out []*loaders.Batch
	for _, idx := range loaders.Batches(order, bs, false) {
		if len(out) == n {
			break
		}
		bt, err := ds.Batch(idx)
		if err != nil {
			return nil, err
		}
		out = append(out, bt)
	}
	return out, nil
}

type debugNaNOptions struct {
	debugData
	FP16, BF16 bool
}

func newDebugNaNCmd() *cobra.Command {
	o := &debugNaNOptions{}
	cmd := &cobra.Command{
		Use:   "nan RECIPE [key=value ...] | --model DIR [--adapter DIR] [--input FILE]",
		Short: "Run forward and backward with per-module inf/NaN checks and name the first module that turns non-finite",
		Long: `nan looks for where a model turns non-finite. It scans every weight, checks the batches' data (token ids
outside the vocabulary, attention masks other than 0/1, non-finite regression targets), then runs each batch
forward and backward in the run's precision with every module output, projection input and gradient checked
for inf and NaN, and names the first module (by its Hugging Face name) whose tensor turns non-finite, with
what feeds it.

With a RECIPE (and key=value overrides, as tune finetune takes) it uses the recipe's model, the first
--batches batches of its training data in epoch 0's order, its batch size and its precision; the backward is
seeded with the fp16 run's first loss scale (init_scale 65536), so gradients overflow where training's
would. With --model it uses that model (and --adapter) on --input's texts in file order; without --input
only the weights are checked. --fp16/--bf16 choose the autocast dtype (default: the recipe's, else FP32).

Exit status 1 when anything is non-finite (the report says what), 0 when every value is finite.`,
		Example: `  tune debug nan recipes/bert.yaml training.fp16=true
  tune debug nan --model runs/bert --input dev.tsv --bf16`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 && o.Model != "" {
				return usagef("give a RECIPE or --model DIR, not both")
			}
			if len(args) == 0 && o.Model == "" {
				return usagef("debug nan needs a RECIPE or --model DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.flags(cmd, 2)
	cmd.Flags().BoolVar(&o.FP16, "fp16", false, "run under FP16 autocast")
	cmd.Flags().BoolVar(&o.BF16, "bf16", false, "run under BF16 autocast")
	return cmd
}

func (o *debugNaNOptions) run(args []string, stdout, stderr io.Writer) error {
	if o.FP16 && o.BF16 {
		return usagef("--fp16 and --bf16 are exclusive")
	}
	var (
		model   trainer.Model
		batches []*loaders.Batch
		policy  = amp.FP32
		source  string
	)
	if len(args) > 0 {
		r, err := loadRecipe(args[0], args[1:], stderr)
		if err != nil {
			return err
		}
		if err := r.CheckFiles(); err != nil {
			return usageError{err}
		}
		if r.IsCausalLM() {
			// The probe walks a sequence classifier's modules and data.train's classification batches; a
			// decoder recipe has neither (its rows are SFT rows), as --model refuses a decoder.
			return usagef("recipe %s trains a causal language model (model.path %s): tune debug nan checks BERT sequence "+
				"classifiers only; tune finetune itself stops at the first non-finite loss or gradient of an SFT run and names "+
				"the step", r.Source, r.Model.Path)
		}
		device := r.Device
		if o.Device != "" {
			device = o.Device
		}
		b, err := openDevice(device)
		if err != nil {
			return err
		}
		run, err := recipes.Build(r, b, trainer.WithOutput(io.Discard), trainer.WithLogger(cliLogger(stderr)))
		if err != nil {
			return err
		}
		defer run.Trainer.Close()
		a := r.Training
		order, err := run.Train.EpochOrder(0, a.Shuffle, uint64(a.Seed), a.PerDeviceTrainBatchSize)
		if err != nil {
			return err
		}
		if batches, err = collate(run.Train, order, a.PerDeviceTrainBatchSize, o.Batches); err != nil {
			return err
		}
		model, source = run.Model, fmt.Sprintf("recipe %s: the first %d of data.train's batches", r.Source, len(batches))
		switch {
		case a.FP16:
			policy = amp.FP16
		case a.BF16:
			policy = amp.BF16
		}
	} else {
		run, bs, err := o.open(stderr, true)
		if err != nil {
			return err
		}
		model, batches, source = run.Model, bs, "model "+o.Model
		if o.Input != "" {
			source += fmt.Sprintf(": the first %d of %s's batches", len(bs), o.Input)
		}
	}
	switch {
	case o.FP16:
		policy = amp.FP16
	case o.BF16:
		policy = amp.BF16
	}
	scale := float32(1)
	if policy == amp.FP16 {
		scale = float32(amp.DefaultGradScalerOptions().InitScale)
	}
	fmt.Fprintf(stdout, "%s\n", source)
	rep, err := probe.FindNaN(model, batches, probe.NaNOptions{Policy: policy, Scale: scale})
	if err != nil {
		return err
	}
	if err := rep.Write(stdout); err != nil {
		return err
	}
	if !rep.Found() {
		return nil
	}
	switch {
	case rep.First != nil:
		return fmt.Errorf("%w: first in %s", errFound, rep.First.Where())
	case len(rep.BadWeights()) > 0:
		return fmt.Errorf("%w: the weights %s", errFound, rep.BadWeights()[0].Module)
	}
	return fmt.Errorf("%w in the data: %s", errFound, rep.Data[0])
}

type debugCompareOptions struct {
	debugData
	DTypes string
}

func newDebugCompareCmd() *cobra.Command {
	o := &debugCompareOptions{}
	cmd := &cobra.Command{
		Use:   "compare --model DIR [--adapter DIR] --input FILE [--dtypes fp16,bf16]",
		Short: "Compare each layer's output and the logits in FP32 and under FP16/BF16 autocast",
		Long: `compare runs the first --batches batches of --input (file order, no dropout) in FP32 and then under FP16
and BF16 autocast, and prints for each module output (the embeddings, every encoder layer, the pooler) and
for the logits the max and mean |FP32 − autocast| with the dtype that module's output had, flagging values
above 1e-2 with "!" (a max difference below 1e-2 means autocast is safe for this model on these inputs), and
then which dtype each op class runs in under each autocast dtype. Labels in --input are ignored.`,
		Example: `  tune debug compare --model ../shared/data/tiny-bert-random --input dev.tsv
  tune debug compare --model runs/bert --adapter runs/bert-lora --input dev.tsv --dtypes bf16`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("debug compare takes flags only (--model DIR --input FILE), got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr()) },
	}
	o.flags(cmd, 4)
	cmd.Flags().StringVar(&o.DTypes, "dtypes", "fp16,bf16", "the autocast dtypes to compare with FP32")
	return cmd
}

func (o *debugCompareOptions) run(stdout, stderr io.Writer) error {
	if o.Model == "" || o.Input == "" {
		return usagef("debug compare needs --model DIR and --input FILE")
	}
	var policies []amp.Policy
	for _, s := range strings.Split(o.DTypes, ",") {
		p, err := amp.ParsePrecision(strings.TrimSpace(s))
		if err != nil || !p.Enabled {
			return usagef("--dtypes %q: want fp16, bf16 or both, comma-separated", o.DTypes)
		}
		policies = append(policies, p)
	}
	run, batches, err := o.open(stderr, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model %s, %s (%s)\n", o.Model, o.Input, run.Backend.Name())
	rep, err := probe.Compare(run.Model, batches, policies)
	if err != nil {
		return err
	}
	if err := rep.Write(stdout); err != nil {
		return err
	}
	if bad := rep.FirstRefNonFinite(); bad != nil {
		return fmt.Errorf("%w: the FP32 output of %s", errFound, bad.Module)
	}
	return nil
}
