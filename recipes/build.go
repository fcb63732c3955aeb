package recipes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// Run is everything a recipe turns into: the backend, the tokenizer, the datasets, the model and the Trainer.
// Build makes one; it is the only place where a recipe reaches into layers (STYLE: configs never do).
type Run struct {
	Recipe    *Recipe
	Backend   tensor.Backend
	Tokenizer *loaders.Tokenizer
	// Train, Eval and Test are nil when the recipe has no such file.
	Train, Eval, Test *TextDataset
	Model             *transformer.BertForSequenceClassification
	// Notices are messages for the user about the model (freshly initialised head weights, unexpected tensors).
	Notices []string
	Trainer *trainer.Trainer
}

// TextDataset adapts a loaders.Dataset and its Collator to trainer.Dataset: Batch collates (tokenize,
// truncate to max_length, pad dynamically), and with GroupByLength the epoch order groups examples of similar
// length (loaders.EpochOrder, HF's group_by_length).
type TextDataset struct {
	*loaders.Dataset
	Collator      *loaders.Collator
	GroupByLength bool
}

var (
	_ trainer.Dataset = (*TextDataset)(nil)
	_ trainer.Orderer = (*TextDataset)(nil)
)

// Batch collates the examples at indices.
func (d *TextDataset) Batch(indices []int) (*loaders.Batch, error) { return d.Collator.Collate(indices) }

// EpochOrder returns epoch's order: loaders.EpochOrder with the tokenized lengths when GroupByLength is set.
func (d *TextDataset) EpochOrder(epoch int, shuffle bool, seed uint64, batchSize int) ([]int, error) {
	opts := loaders.SamplerOptions{Shuffle: shuffle, Seed: seed, GroupByLength: d.GroupByLength, BatchSize: batchSize}
	if d.GroupByLength {
		var err error
		if opts.Lengths, err = d.Collator.Lengths(); err != nil {
			return nil, err
		}
	}
	return loaders.EpochOrder(d.Len(), epoch, opts)
}

// OpenDevice opens the backend a recipe's device names: "cpu"; "cuda" or "cuda:N" (an error wrapping
// tensor.ErrNoDevice when the binary lacks CUDA support or has no such GPU); "auto" or "" is CUDA device 0 when
// cuda.Available(), else the CPU.
func OpenDevice(device string) (tensor.Backend, error) {
	switch {
	case device == "cpu":
		return cpu.New(), nil
	case device == "auto" || device == "":
		if cuda.Available() {
			return cuda.Open(0)
		}
		return cpu.New(), nil
	case device == "cuda":
		return cuda.Open(0)
	case strings.HasPrefix(device, "cuda:"):
		n, err := strconv.Atoi(strings.TrimPrefix(device, "cuda:"))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("recipes: device %q: want cpu, cuda, cuda:N or auto", device)
		}
		return cuda.Open(n)
	}
	return nil, fmt.Errorf("recipes: device %q: want cpu, cuda, cuda:N or auto", device)
}

// Build turns a validated recipe into a Run on backend b: it loads the tokenizer and the data files (labels
// mapped consistently across train, eval and test), builds the model (LoadPretrained for model.path, a freshly
// initialised BertForSequenceClassification from training.seed for model.config), applies LoRA when the
// recipe has a lora: section, and creates the Trainer with opts. Errors name the recipe key whose input failed.
func Build(r *Recipe, b tensor.Backend, opts ...trainer.Option) (*Run, error) {
	run := &Run{Recipe: r, Backend: b}
	var err error
	if run.Tokenizer, err = loaders.LoadTokenizer(r.Tokenizer.Path); err != nil {
		return nil, fmt.Errorf("recipes: tokenizer.path: %w", err)
	}
	hf, err := r.modelConfig()
	if err != nil {
		return nil, err
	}
	if err := run.loadData(hf); err != nil {
		return nil, err
	}
	if err := run.buildModel(hf); err != nil {
		return nil, err
	}
	if r.LoRA != nil {
		return nil, fmt.Errorf("recipes: lora: LoRA training is not available in this build yet (the lora package has no Apply); remove the lora: section to fine-tune fully")
	}
	var train, eval trainer.Dataset
	if run.Train != nil {
		train = run.Train
	}
	if run.Eval != nil {
		eval = run.Eval
	}
	if run.Trainer, err = trainer.New(run.Model, r.Training, train, eval, opts...); err != nil {
		return nil, err
	}
	return run, nil
}

// modelConfig returns the model's config.json: the checkpoint's, or model.config written as transformers would.
func (r *Recipe) modelConfig() (*loaders.BertConfig, error) {
	if r.Model.Config == nil {
		c, err := loaders.ReadBertConfig(r.Model.Path)
		if err != nil {
			return nil, fmt.Errorf("recipes: model.path: %w", err)
		}
		return c, nil
	}
	data, err := r.Model.Config.ConfigJSON()
	if err != nil {
		return nil, err
	}
	c, err := loaders.ParseBertConfig("model.config", data)
	if err != nil {
		return nil, fmt.Errorf("recipes: model.config: %w", err)
	}
	return c, nil
}

// isDefaultLabels reports whether the config's labels are transformers' placeholders LABEL_0, LABEL_1, ...
func isDefaultLabels(c *loaders.BertConfig) bool {
	for i := range c.NumLabels() {
		if c.ID2Label[i] != "LABEL_"+strconv.Itoa(i) {
			return false
		}
	}
	return true
}

// loadData reads the data files. A model with named labels maps the data's labels through its label2id; with
// placeholder labels the ids come from the training data (integers as they are, strings sorted), as HF's
// run_glue does, and eval and test reuse the training set's mapping.
func (run *Run) loadData(hf *loaders.BertConfig) error {
	r := run.Recipe
	regression := hf.NumLabels() == 1 || hf.ProblemType == "regression"
	base := loaders.DatasetOptions{Format: r.Data.Format, TextColumn: r.Data.TextColumn,
		TextPairColumn: r.Data.TextPairColumn, LabelColumn: r.Data.LabelColumn, Regression: regression}
	if !regression && !isDefaultLabels(hf) {
		base.Label2ID = hf.Label2ID
	}
	load := func(key, path string, opts loaders.DatasetOptions) (*TextDataset, error) {
		if path == "" {
			return nil, nil
		}
		ds, err := loaders.LoadDataset(path, opts)
		if err != nil {
			return nil, fmt.Errorf("recipes: %s: %w", key, err)
		}
		if !regression && len(ds.LabelNames) > hf.NumLabels() {
			return nil, fmt.Errorf("recipes: %s: %s has %d labels %v but the model has num_labels %d; set model.config.num_labels (or use a checkpoint with that many labels)",
				key, path, len(ds.LabelNames), ds.LabelNames, hf.NumLabels())
		}
		c, err := loaders.NewCollator(run.Tokenizer, ds, loaders.CollatorOptions{MaxLength: r.Data.MaxLength,
			PadToMultipleOf: r.Data.PadToMultipleOf, Cache: true})
		if err != nil {
			return nil, fmt.Errorf("recipes: %s: %w", key, err)
		}
		return &TextDataset{Dataset: ds, Collator: c, GroupByLength: r.Data.GroupByLength}, nil
	}
	var err error
	if run.Train, err = load("data.train", r.Data.Train, base); err != nil {
		return err
	}
	rest := base
	if run.Train != nil && !regression && base.Label2ID == nil {
		rest.Label2ID = labelIDs(run.Train.LabelNames)
	}
	if run.Eval, err = load("data.eval", r.Data.Eval, rest); err != nil {
		return err
	}
	run.Test, err = load("data.test", r.Data.Test, rest)
	return err
}

// labelIDs inverts a LabelNames slice.
func labelIDs(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

// buildModel loads the checkpoint or initialises a new model.
func (run *Run) buildModel(hf *loaders.BertConfig) error {
	r := run.Recipe
	seed := uint64(r.Training.Seed)
	if r.Model.Config != nil {
		cfg, err := transformer.BertConfigFromHF(hf)
		if err != nil {
			return fmt.Errorf("recipes: model.config: %w", err)
		}
		if run.Model, err = transformer.NewBertForSequenceClassification(run.Backend, cfg, seed); err != nil {
			return fmt.Errorf("recipes: model.config: %w", err)
		}
		return nil
	}
	m, report, err := transformer.LoadPretrained(r.Model.Path, run.Backend, transformer.LoadOptions{Seed: seed})
	if err != nil {
		return fmt.Errorf("recipes: model.path: %w", err)
	}
	run.Model = m
	if n := report.Notice(); n != "" {
		run.Notices = append(run.Notices, n)
	}
	if len(report.Unexpected) > 0 {
		run.Notices = append(run.Notices, fmt.Sprintf("unused tensors in %s: %s", r.Model.Path, strings.Join(report.Unexpected, ", ")))
	}
	return nil
}

// ParameterReport returns PEFT's print_trainable_parameters line for m: "trainable params: 1,234 || all
// params: 5,678 || trainable%: 21.7331".
func ParameterReport(m trainer.Model) string {
	var trainable, total int
	for _, p := range m.NamedParameters() {
		total += p.Value.Numel()
		if p.Trainable {
			trainable += p.Value.Numel()
		}
	}
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(trainable) / float64(total)
	}
	return fmt.Sprintf("trainable params: %s || all params: %s || trainable%%: %.4f", commas(trainable), commas(total), pct)
}

// commas formats n with thousands separators.
func commas(n int) string {
	s := strconv.Itoa(n)
	var parts []string
	for len(s) > 3 {
		parts = append(parts, s[len(s)-3:])
		s = s[:len(s)-3]
	}
	parts = append(parts, s)
	slices.Reverse(parts)
	return strings.Join(parts, ",")
}
