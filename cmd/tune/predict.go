package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/datasets"
	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/trainer"
)

func init() { register(newPredictCmd) }

// predictOptions holds `tune predict`'s flags.
type predictOptions struct {
	Model          string    // --model: a saved model directory
	Adapter        string    // --adapter: a PEFT LoRA adapter directory on top of --model
	ForceBase      bool      // --force-base: apply --adapter to a --model its adapter_config.json does not name
	Tokenizer      string    // --tokenizer: the tokenizer directory or file (default: the adapter's, else the model's)
	Revision       string    // --revision: the revision of Hub ids given to --model, --adapter and --tokenizer
	Input          string    // --input: TSV, CSV or JSONL of texts
	Output         string    // --output: JSONL file; "" or "-" is stdout
	Force          bool      // --force: replace an existing --output
	outputPath     string    // the file to write, set by check: Output, or under --force the file a link to it names
	tokenizer      string    // the tokenizer for recipes.OpenModel, set by check (checkModelPaths)
	maxLength      int       // the truncation length, set by check (maxLength)
	stdin          io.Reader // standard input, for --input -
	FP16, BF16     bool      // half-precision inference: FP16 / BF16 autocast (fp16_full_eval / bf16_full_eval)
	Device         string
	BatchSize      int
	MaxLength      int
	Format         string
	TextColumn     string
	TextPairColumn string
}

// prediction is one line of tune predict's output.
type prediction struct {
	Line    int       `json:"line"` // the input's line in its file
	Text    string    `json:"text"` // the input text
	Pair    *string   `json:"text_pair,omitempty"`
	Label   any       `json:"label"` // the predicted label name (id2label), or the value for regression
	LabelID *int      `json:"label_id,omitempty"`
	Logits  []float32 `json:"logits"` // (num_labels), FP32
}

func newPredictCmd() *cobra.Command {
	o := &predictOptions{}
	cmd := &cobra.Command{
		Use:   "predict --model DIR [--adapter DIR] [--tokenizer PATH] --input FILE [--output FILE [--force]] [--fp16|--bf16]",
		Short: "Run a trained model over a file of texts and write the predictions as JSONL",
		Long: `predict runs a trained sequence classifier over the texts of a TSV, CSV or JSONL file (labels, if present,
are ignored) and writes one JSON object per input, in input order:

  {"line": 2, "text": "a gripping film", "label": "LABEL_1", "label_id": 1, "logits": [-1.92, 2.05]}

label is the model's id2label name of the argmax (the training file's label names when they were strings, as
transformers' run_glue saves them; LABEL_0, LABEL_1, ... for integer labels); for a regression model
(num_labels 1) it is the predicted value. The predictions go to standard output (no --output, or --output -),
or to --output FILE, which must not exist unless --force is given (it is then replaced only once every
prediction is written; a symbolic link to a file is kept and the file it points to replaced). --output must not be a directory, a device
or other special file, or the --input file, and its directory must exist: all checked before the model loads.

--model, --adapter and --tokenizer also take Hub ids (bert-base-uncased) of models in the Hugging Face cache
(see tune download), at --revision. The model directory holds config.json, model.safetensors and the
tokenizer (what tune finetune writes into training.output_dir after full fine-tuning, or a Hugging Face
checkpoint); --adapter adds a PEFT LoRA adapter
(what a LoRA run writes into training.output_dir) on top of it. The tokenizer is --tokenizer, else the one in
the adapter directory, else the model's; a checkpoint-N folder (--model or --adapter) holds none, and takes its
training run's (the output_dir above it).

--fp16 / --bf16 run inference in half precision under autocast in that dtype (fp16_full_eval / bf16_full_eval):
every matrix product takes FP16/BF16 inputs and accumulates in FP32, LayerNorm and softmax compute in FP32, the
logits are rounded to the half dtype, and the weights stay FP32 in memory (transformers instead casts the whole
model with model.to(dtype); tune's results are at least as accurate).`,
		Example: `  tune predict --model runs/tiny --input recipes/data/tiny/dev.tsv
  tune predict --model ../bert-base-uncased --adapter runs/bert --input dev.tsv
  tune predict --model runs/bert-full --input reviews.jsonl --text-column review --output preds.jsonl --bf16`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("predict takes flags only (--model DIR --input FILE), got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdin = cmd.InOrStdin()
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "the model directory (config.json, model.safetensors, tokenizer) (required)")
	f.StringVar(&o.Adapter, "adapter", "", "a PEFT LoRA adapter directory applied on top of --model")
	forceBaseFlag(cmd, &o.ForceBase)
	f.StringVar(&o.Tokenizer, "tokenizer", "", "the tokenizer: a directory with tokenizer.json or vocab.txt, or the file (default: the adapter's, else the model's)")
	f.StringVar(&o.Revision, "revision", "", revisionFlagUsage)
	f.StringVar(&o.Input, "input", "", "a TSV, CSV or JSONL file of texts; - reads standard input (one text per line, or --format) (required)")
	f.StringVar(&o.Output, "output", "", "write the JSONL to this file instead of standard output (a new file, unless --force; - is standard output)")
	f.BoolVar(&o.Force, "force", false, "replace an existing --output file")
	f.BoolVar(&o.FP16, "fp16", false, "run under FP16 autocast (fp16_full_eval; weights stay FP32)")
	f.BoolVar(&o.BF16, "bf16", false, "run under BF16 autocast (bf16_full_eval; weights stay FP32)")
	f.StringVar(&o.Device, "device", "auto", "cpu, cuda, cuda:N or auto")
	f.IntVar(&o.BatchSize, "batch-size", 64, "examples per batch")
	f.IntVar(&o.MaxLength, "max-length", 0, "truncate inputs to this many tokens, [CLS] and [SEP] included (default: 512, or the model's max_position_embeddings when fewer; as tune eval)")
	f.StringVar(&o.Format, "format", "", "tsv, csv or jsonl (default: from the extension)")
	f.StringVar(&o.TextColumn, "text-column", "", "the column holding the text (default: sentence, else text)")
	f.StringVar(&o.TextPairColumn, "text-pair-column", "", "an optional second text column")
	return cmd
}

// check reports flag misuse as a usage error, and sets outputPath and tokenizer; notices go to stderr.
func (o *predictOptions) check(stderr io.Writer) error {
	switch {
	case o.Model == "":
		return usagef("predict needs --model DIR")
	case o.Input == "":
		return usagef("predict needs --input FILE")
	case o.FP16 && o.BF16:
		return usagef("--fp16 and --bf16 are exclusive")
	case o.BatchSize < 1:
		return usagef("--batch-size must be ≥ 1")
	}
	for _, f := range []struct {
		flag string
		p    *string
	}{{"--model", &o.Model}, {"--adapter", &o.Adapter}, {"--tokenizer", &o.Tokenizer}} {
		var err error
		if *f.p, err = resolveHub(f.flag, *f.p, o.Revision); err != nil {
			return err
		}
	}
	tok, err := checkModelPaths(stderr, o.Model, o.Adapter, o.Tokenizer, o.ForceBase)
	if err != nil {
		return err
	}
	if o.maxLength, err = maxLength(o.MaxLength, defaultMaxLength, o.Model); err != nil {
		return err
	}
	o.tokenizer = tok
	if o.Input != "-" {
		if err := checkDataFile("--input", o.Input, o.Format, "pass --format tsv, csv or jsonl"); err != nil {
			return err
		}
	}
	if o.Output != "" && o.Output != "-" {
		p, err := checkOutputFile("--output", o.Output, o.Input, o.Force)
		if err != nil {
			return err
		}
		o.outputPath = p
	}
	return nil
}

func (o *predictOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if err := o.check(stderr); err != nil {
		return err
	}
	b, err := openDevice(o.Device)
	if err != nil {
		return err
	}
	run, err := openModel(o.Model, o.Adapter, o.tokenizer, b)
	if err != nil {
		return err
	}
	printNotices(stderr, run)
	input := o.Input
	if input == "-" {
		var cleanup func()
		if input, cleanup, err = o.stdinFile(); err != nil {
			return err
		}
		defer cleanup()
	}
	ds, err := run.LoadUnlabelled("--input", input, recipes.Data{Format: o.Format, TextColumn: o.TextColumn,
		TextPairColumn: o.TextPairColumn, MaxLength: o.maxLength})
	if err != nil {
		return err
	}
	args := trainer.DefaultTrainingArguments()
	args.OutputDir = os.TempDir() // Predict writes nothing there
	args.PerDeviceEvalBatchSize = o.BatchSize
	args.FP16FullEval, args.BF16FullEval = o.FP16, o.BF16
	tr, err := trainer.New(run.Model, args, nil, nil, trainer.WithOutput(io.Discard), trainer.WithLogger(cliLogger(stderr)))
	if err != nil {
		return err
	}
	defer tr.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := tr.Predict(ctx, ds)
	if err != nil {
		return err
	}
	return o.write(stdout, run, ds, out)
}

// stdinFile saves standard input (--input -) to a temporary file LoadUnlabelled reads, and returns it with its
// removal. With --format the input is in that format; without, input whose first character is '{' is JSONL, and
// anything else one text per line (line N of the input is the prediction's line N). The input is copied line by
// line (loaders.LineReader: a line over loaders.DefaultMaxRowBytes is an error naming it), so memory does not
// grow with it.
func (o *predictOptions) stdinFile() (string, func(), error) {
	in := o.stdin
	if in == nil {
		in = os.Stdin
	}
	dir, err := os.MkdirTemp("", "tune-predict-")
	if err != nil {
		return "", nil, fmt.Errorf("predict: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	fail := func(err error) (string, func(), error) { cleanup(); return "", nil, err }
	f, err := os.CreateTemp(dir, "stdin-")
	if err != nil {
		return fail(fmt.Errorf("predict: %w", err))
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	format, blank := o.Format, 0 // blank: empty lines not yet written (trailing ones are dropped)
	lr := loaders.NewLineReader(in, "standard input (--input -)", 0)
	for {
		line, _, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(fmt.Errorf("predict: %w", err))
		}
		text := string(line)
		if format == "" {
			if strings.TrimSpace(text) == "" {
				blank++
				continue
			}
			format = "text"
			if strings.HasPrefix(strings.TrimSpace(text), "{") {
				format = "jsonl"
				for ; blank > 0; blank-- {
					w.WriteByte('\n')
				}
			}
		}
		if format != "text" { // --format's file, or JSONL, as it is
			w.Write(line)
			w.WriteByte('\n')
			continue
		}
		if text == "" {
			blank++
			continue
		}
		for ; blank > 0; blank-- {
			_ = enc.Encode(map[string]string{"text": ""})
		}
		_ = enc.Encode(map[string]string{"text": text})
	}
	if format == "" {
		return fail(usagef("--input -: standard input is empty; pipe texts in, one per line"))
	}
	if err := w.Flush(); err != nil {
		return fail(fmt.Errorf("predict: %w", err))
	}
	if format == "text" { // one text per line: JSONL with a "text" field, one object per input line
		format = "jsonl"
		if o.TextColumn == "" {
			o.TextColumn = "text"
		}
	}
	p := filepath.Join(dir, "stdin."+format)
	if err := os.Rename(f.Name(), p); err != nil {
		return fail(fmt.Errorf("predict: %w", err))
	}
	return p, cleanup, nil
}

// corruptWeights returns, when a weight of m (loaded from model and adapter) is non-finite, the bad-input error
// that says so (exit status 2: the model must change, no retry helps), else nil (also when the weights cannot
// be read: the caller's own error then stands).
func corruptWeights(m trainer.Model, model, adapter string) error {
	name, i, v, found, err := trainer.FirstNonFiniteWeight(m)
	if err != nil || !found {
		return nil
	}
	from := model
	if adapter != "" {
		from += " with the adapter " + adapter
	}
	check := debugNaNCommand(model, adapter)
	return usagef("the model's weights are non-finite (%s[%d] = %v, as loaded from %s): the checkpoint is corrupt "+
		"(a diverged run saved by another tool?); load an earlier checkpoint or the original model; `%s` lists every "+
		"non-finite tensor", name, i, v, from, check)
}

// nonFiniteHint says what non-finite logits most likely mean under the precision predict ran in.
func (o *predictOptions) nonFiniteHint() string {
	return nonFiniteHint(o.FP16, o.BF16, o.Model, o.Adapter)
}

// nonFiniteHint says what non-finite logits most likely mean under FP16 or BF16 autocast, or FP32 (neither):
// predict's and eval's message. For the weights it names tune debug nan on the model (and adapter), which scans
// every weight for inf and NaN (tune inspect reads only the headers).
func nonFiniteHint(fp16, bf16 bool, model, adapter string) string {
	check := debugNaNCommand(model, adapter)
	switch {
	case fp16:
		return "an FP16 overflow? FP16 holds at most 65504: try --bf16, or neither"
	case bf16:
		return "BF16 has FP32's range, so the model's weights are likely non-finite: check them with `" + check + "`, or try without --bf16"
	}
	return "the model's weights are likely non-finite (a diverged training run?): check them with `" + check + "`, which names the non-finite ones"
}

// debugNaNCommand is the tune debug nan command line that lists the non-finite tensors of model (and adapter).
func debugNaNCommand(model, adapter string) string {
	check := "tune debug nan --model " + shellArg(model)
	if adapter != "" {
		check += " --adapter " + shellArg(adapter)
	}
	return check
}

// shellArg returns s as one word for a POSIX shell, for a command line a message suggests: as it is when it
// holds only characters no shell treats specially, else in single quotes.
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// write prints one prediction per input as JSONL, to --output or stdout. --output is written to a temporary file
// (mode 0644) moved into place once complete, so a failed run leaves no partial file: without --force it is
// hard-linked, which fails rather than replace a file created at that name while predict ran; with --force it is
// renamed over the file (the file a symbolic link points to, the link kept).
func (o *predictOptions) write(stdout io.Writer, run *recipes.Run, ds *datasets.Text, out trainer.PredictionOutput) error {
	emit := func(w io.Writer) error {
		names := run.Base.Config.ID2Label
		L := out.NumLabels
		preds := out.Predictions()
		enc := json.NewEncoder(w)
		for i, ex := range ds.Examples {
			p := prediction{Line: ex.Line, Text: ex.Text, Pair: ex.Pair, Logits: out.Logits[i*L : (i+1)*L]}
			if L == 1 {
				p.Label = p.Logits[0]
			} else {
				id := int(preds[i])
				p.LabelID, p.Label = &id, names[id]
			}
			for _, v := range p.Logits {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					if err := corruptWeights(run.Model, o.Model, o.Adapter); err != nil {
						return err
					}
					return fmt.Errorf("input at line %d gave non-finite logits %v (%s)", ex.Line, p.Logits, o.nonFiniteHint())
				}
			}
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}
	if o.outputPath != "" {
		save := atomicfile.WriteNew
		if o.Force {
			save = atomicfile.Write
		}
		err := save(o.outputPath, 0o644, emit)
		if !o.Force && errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("predict: --output %s was created by something else while predicting; it was left as it was and the predictions were not written: choose another name, or pass --force", o.Output)
		}
		if err != nil {
			return errctx.Wrap("predict", err)
		}
		return nil
	}
	w := bufio.NewWriter(stdout)
	if err := emit(w); err != nil {
		return errctx.Wrap("predict", err)
	}
	return w.Flush()
}
