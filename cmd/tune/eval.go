package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/trainer"
)

func init() { register(newEvalCmd) }

// evalOptions holds `tune eval`'s flags and arguments.
type evalOptions struct {
	Recipe    string   // optional recipe: data settings, and the model in its output_dir
	Overrides []string // dotted key=value pairs for the recipe
	Model     string   // --model: a saved model directory
	Adapter   string   // --adapter: a PEFT LoRA adapter directory on top of the model
	ForceBase bool     // --force-base: apply --adapter to a --model its adapter_config.json does not name
	Tokenizer string   // --tokenizer: the tokenizer directory or file (default: the adapter's, else the model's)
	Revision  string   // --revision: the revision of Hub ids given to --model, --adapter and --tokenizer
	Data      string   // --data: the file to evaluate
	FP16      bool     // --fp16: evaluate under FP16 autocast (fp16_full_eval)
	BF16      bool     // --bf16: evaluate under BF16 autocast (bf16_full_eval)
	Device    string   // --device
	BatchSize int      // --batch-size: per_device_eval_batch_size
	MaxLength int      // --max-length: truncation (default: the recipe's data.max_length, else as predict)
	JSON      bool     // --json: print the metrics as one JSON object
	tokenizer string   // the tokenizer for recipes.OpenModel, set by setup (checkModelPaths)
	// batchSizeSet records that --batch-size was given (0 is its "the recipe's" default).
	batchSizeSet bool
}

func newEvalCmd() *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval [RECIPE [key=value ...]] [--model DIR [--adapter DIR]] [--tokenizer PATH] [--data FILE] [--fp16|--bf16]",
		Short: "Evaluate a trained model on a labelled file: loss, accuracy, F1, Matthews correlation",
		Long: `eval runs a trained model over a labelled TSV, CSV or JSONL file and prints eval_loss, eval_accuracy,
eval_f1 (binary for 2 labels, macro otherwise) and eval_matthews_correlation, as the Trainer's evaluation does.

The model is --model DIR (a directory with config.json, model.safetensors and the tokenizer, as tune finetune
writes into training.output_dir, or any Hugging Face BertForSequenceClassification checkpoint; or a Hub id
such as bert-base-uncased of a model in the Hugging Face cache, see tune download), with
--adapter DIR a PEFT LoRA adapter on top of it; or else the model the RECIPE trained (its training.output_dir:
the full model, or the LoRA adapter there on top of the recipe's model.path). The tokenizer is --tokenizer, else
the one in the adapter directory, else the model's; a checkpoint-N folder holds none, and takes its training
run's (the output_dir above it). The data is --data FILE, or else the recipe's data.test, or
else its data.eval; the recipe also gives the columns, the format and max_length. The file's labels are mapped
through the model's id2label/label2id (what training saved in config.json; an integer label is a class id), so
any file is scored against the classes the model was trained on; a label the model does not know is an error,
and so is a row without a label. A NaN or infinite eval_loss (non-finite logits) is an error too, as in tune
predict: exit 2 naming the weight when the model's weights are non-finite (a corrupt checkpoint), else exit 1
(an FP16 overflow, say).

--fp16 / --bf16 evaluate in half precision (the recipe's fp16_full_eval / bf16_full_eval): under autocast in
that dtype, as training in it does: every matrix product takes FP16/BF16 inputs and accumulates in FP32,
LayerNorm and softmax compute in FP32, and the weights stay FP32 in memory (transformers instead casts the
whole model with model.to(dtype); tune's results are at least as accurate). Without them the recipe's
training precision is used (FP32 when there is no recipe).`,
		Example: `  tune eval recipes/tiny.yaml
  tune eval --model runs/tiny --data recipes/data/tiny/dev.tsv
  tune eval --model ../bert-base-uncased --adapter runs/bert --data dev.tsv
  tune eval recipes/bert-full.yaml --bf16 --data ../shared/data/sst2/test.tsv
  tune eval --json --model runs/tiny --data dev.tsv`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				o.Recipe, o.Overrides = args[0], args[1:]
			}
			o.batchSizeSet = cmd.Flags().Changed("batch-size")
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "a saved model directory (default: the recipe's training.output_dir)")
	f.StringVar(&o.Adapter, "adapter", "", "a PEFT LoRA adapter directory applied on top of the model")
	forceBaseFlag(cmd, &o.ForceBase)
	f.StringVar(&o.Tokenizer, "tokenizer", "", "the tokenizer: a directory with tokenizer.json or vocab.txt, or the file (default: the adapter's, else the model's)")
	f.StringVar(&o.Revision, "revision", "", revisionFlagUsage)
	f.StringVar(&o.Data, "data", "", "the labelled file to evaluate (default: the recipe's data.test, else data.eval)")
	f.BoolVar(&o.FP16, "fp16", false, "evaluate under FP16 autocast (fp16_full_eval; weights stay FP32)")
	f.BoolVar(&o.BF16, "bf16", false, "evaluate under BF16 autocast (bf16_full_eval; weights stay FP32)")
	f.StringVar(&o.Device, "device", "", "cpu, cuda, cuda:N or auto (default: the recipe's device, else auto)")
	f.IntVar(&o.MaxLength, "max-length", 0, "truncate inputs to this many tokens, [CLS] and [SEP] included (default: the recipe's data.max_length; without a recipe 512, or the model's max_position_embeddings when fewer, as tune predict)")
	f.IntVar(&o.BatchSize, "batch-size", 0, "examples per batch (default: the recipe's per_device_eval_batch_size)")
	f.BoolVar(&o.JSON, "json", false, "print the metrics as one JSON object")
	return cmd
}

// setup resolves the recipe (or the defaults), the model and adapter directories and the data file. Without
// --model the recipe's training.output_dir is evaluated: a full model there, or a LoRA adapter there on top of
// the recipe's model.path.
func (o *evalOptions) setup(stderr io.Writer) (r *recipes.Recipe, model, adapter, data string, err error) {
	if o.FP16 && o.BF16 {
		return nil, "", "", "", usagef("--fp16 and --bf16 are exclusive")
	}
	if o.BatchSize < 1 && (o.batchSizeSet || o.BatchSize < 0) {
		// 0 and -1 ran with the default batch; predict refuses them too.
		return nil, "", "", "", usagef("--batch-size must be ≥ 1")
	}
	if o.Recipe == "" && o.Model == "" {
		return nil, "", "", "", usagef("eval needs a RECIPE or --model DIR")
	}
	if o.Recipe != "" {
		if r, err = loadRecipe(o.Recipe, o.Overrides, stderr); err != nil {
			return nil, "", "", "", err
		}
	} else {
		d := recipes.Default()
		r = &d
	}
	model, adapter, data = o.Model, o.Adapter, o.Data
	if model == "" {
		out := r.Training.OutputDir
		switch {
		case recipes.HasAdapter(out) && r.Model.Path != "" && adapter == "":
			model, adapter = r.Model.Path, out
		case fileExistsAt(filepath.Join(out, "config.json")):
			model = out
		default:
			return nil, "", "", "", usagef("no trained model in %s (training.output_dir): run tune finetune %s first, or pass --model DIR", out, o.Recipe)
		}
	}
	for _, p := range []string{data, r.Data.Test, r.Data.Eval} {
		if data == "" {
			data = p
		}
	}
	if data == "" {
		return nil, "", "", "", usagef("nothing to evaluate: pass --data FILE (or give the recipe a data.test or data.eval)")
	}
	tok := o.Tokenizer
	for _, f := range []struct {
		flag string
		p    *string
	}{{"--model", &model}, {"--adapter", &adapter}, {"--tokenizer", &tok}} {
		if *f.p, err = resolveHub(f.flag, *f.p, o.Revision); err != nil {
			return nil, "", "", "", err
		}
	}
	if o.tokenizer, err = checkModelPaths(stderr, model, adapter, tok, o.ForceBase); err != nil {
		return nil, "", "", "", err
	}
	if err := checkDataFile("--data", data, r.Data.Format, "name a .tsv, .csv or .jsonl file (or evaluate a recipe whose data.format says it)"); err != nil {
		return nil, "", "", "", err
	}
	fallback := r.Data.MaxLength
	if o.Recipe == "" {
		fallback = defaultMaxLength
	}
	if r.Data.MaxLength, err = maxLength(o.MaxLength, fallback, model); err != nil {
		return nil, "", "", "", err
	}
	return r, model, adapter, data, nil
}

// fileExistsAt reports whether path exists.
func fileExistsAt(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (o *evalOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	r, modelDir, adapter, data, err := o.setup(stderr)
	if err != nil {
		return err
	}
	device := r.Device
	if o.Device != "" {
		device = o.Device
	}
	b, err := openDevice(device)
	if err != nil {
		return err
	}
	run, err := openModel(modelDir, adapter, o.tokenizer, b)
	if err != nil {
		return err
	}
	printNotices(stderr, run)
	ds, err := run.LoadDataset("--data", data, r.Data, nil)
	if err != nil {
		return err
	}
	args := r.Training
	args.FP16FullEval, args.BF16FullEval = o.FP16, o.BF16
	if o.BatchSize > 0 {
		args.PerDeviceEvalBatchSize = o.BatchSize
	}
	tr, err := trainer.New(run.Model, args, nil, ds, trainer.WithOutput(io.Discard), trainer.WithLogger(cliLogger(stderr)))
	if err != nil {
		return usageError{err}
	}
	defer tr.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	metrics, err := tr.Evaluate(ctx)
	if err != nil {
		return err
	}
	// Non-finite logits give a NaN or infinite eval_loss and meaningless scores: fail as predict does.
	if l, ok := metrics["eval_loss"]; ok && (math.IsNaN(l) || math.IsInf(l, 0)) {
		if err := corruptWeights(run.Model, modelDir, adapter); err != nil {
			return err
		}
		return fmt.Errorf("eval_loss is %v on %s: the model gave non-finite logits (%s); the metrics would mean nothing",
			l, data, nonFiniteHint(o.FP16, o.BF16, modelDir, adapter))
	}
	if o.JSON {
		out, err := json.Marshal(trainer.LogEntry(metrics))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	if adapter != "" {
		modelDir += " + adapter " + adapter
	}
	fmt.Fprintf(stdout, "model: %s\ndata: %s (%d examples)\ndevice: %s\n", modelDir, data, ds.Len(), b.Name())
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		fmt.Fprintf(stdout, "%-28s %.4f\n", k, metrics[k])
	}
	return nil
}
