package recipes

import (
	"errors"
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/datasets"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// Run is everything a recipe turns into: the backend, the tokenizer, the datasets, the model and the Trainer.
// Build makes one; it is the only place where a recipe reaches into layers (STYLE: configs never do).
type Run struct {
	Recipe    *Recipe            // the validated recipe the run was built from
	Backend   tensor.Backend     // the device every tensor lives on (recipe device: cpu or cuda)
	Tokenizer *loaders.Tokenizer // the recipe's tokenizer (tokenizer.path, else the model's directory)
	// Train, Eval and Test are nil when the recipe has no such file (and for a causal LM, whose data are
	// SFTTrain and SFTEval).
	Train, Eval, Test *datasets.Text
	// SFTTrain and SFTEval are a causal LM's data (IsCausalLM); nil otherwise.
	SFTTrain, SFTEval *datasets.SFT
	// Causal is the causal LM (Base is nil then); nil for BERT recipes.
	Causal transformer.Adaptable
	// Base is the BERT model; Model is what is trained and saved: Base itself, or Base with LoRA adapters
	// (*lora.Model, which saves the adapter in PEFT's format).
	Base  *bert.BertForSequenceClassification
	Model trainer.Model
	// Notices are messages for the user about the model (freshly initialised head weights, unexpected tensors).
	Notices []string
	Trainer *trainer.Trainer // trains Model on Train, evaluating on Eval, with the recipe's training arguments

	fixedLabels bool // the model is trained: data labels map through its id2label (OpenModel)
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

// Build turns a validated recipe into a Run on backend b: it loads the tokenizer, builds the model
// (LoadPretrained for model.path, a freshly initialised BertForSequenceClassification from training.seed for
// model.config; a checkpoint whose named labels do not fit the training file takes the file's, as run_glue
// does: see trainingLabels), loads the data files (labels mapped consistently across train, eval and test;
// string labels name the model's classes), applies LoRA when the recipe has a lora: section (the adapter's
// base_model_name_or_path: Recipe.BaseModelNameOrPath; Validate refuses LoRA on model.config), and creates the Trainer with
// opts. Errors name the recipe key whose input failed.
func Build(r *Recipe, b tensor.Backend, opts ...trainer.Option) (*Run, error) {
	if r.IsCausalLM() {
		return buildCausalLM(r, b, opts...)
	}
	run := &Run{Recipe: r, Backend: b}
	var err error
	if run.Tokenizer, err = loadTokenizer(r); err != nil {
		return nil, err
	}
	if err := run.buildModel(); err != nil {
		return nil, err
	}
	if err := checkVocab(run.Tokenizer, r.Tokenizer.Path, run.Base, modelSource(r)); err != nil {
		return nil, errctx.Wrap("recipes: tokenizer.path", err)
	}
	run.Model = run.Base
	if r.LoRA != nil {
		lm, err := lora.Apply(run.Base, *r.LoRA, seed(r))
		if err != nil {
			return nil, loraError(r, err)
		}
		if lm.BaseModelNameOrPath, err = r.BaseModelNameOrPath(); err != nil {
			return nil, errctx.Wrap("recipes: model.path", err)
		}
		run.Notices = append(run.Notices, lm.Warnings...)
		run.Model = lm
	}
	if run.Train, err = run.LoadDataset("data.train", r.Data.Train, r.Data, nil); err != nil {
		return nil, err
	}
	var labels map[string]int // eval and test map labels as training did: through the model's classes
	if run.Train != nil && run.Train.LabelNames != nil {
		if err := run.nameLabels(run.Train.LabelNames); err != nil {
			return nil, errctx.Wrap("recipes: data.train", err)
		}
		labels = labelIDs(run.Base.Config.ID2Label)
	}
	if run.Eval, err = run.LoadDataset("data.eval", r.Data.Eval, r.Data, labels); err != nil {
		return nil, err
	}
	if run.Test, err = run.LoadDataset("data.test", r.Data.Test, r.Data, labels); err != nil {
		return nil, err
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

// nameLabels gives the model the training file's label names when they are strings (neg, pos) and the model
// has transformers' placeholders (LABEL_0, ...), as run_glue sets config.id2label/label2id from the data: the
// saved config.json then carries them, and evaluation and prediction map labels through them. Integer labels
// (0..n-1) and a model whose labels are already named are left as they are.
func (run *Run) nameLabels(names []string) error {
	cfg := &run.Base.Config
	if !isDefaultLabels(cfg.ID2Label) || isIDLabels(names) || len(names) > cfg.NumLabels() {
		return nil
	}
	id2label := bert.DefaultLabels(cfg.NumLabels())
	copy(id2label, names)
	seen := make(map[string]int, len(id2label))
	for i, n := range id2label {
		if j, ok := seen[n]; ok {
			return fmt.Errorf("the label %q would name classes %d and %d (num_labels %d, labels in the data %q); rename the label",
				n, j, i, cfg.NumLabels(), names)
		}
		seen[n] = i
	}
	cfg.ID2Label = id2label
	return nil
}

// isIDLabels reports whether names are the class ids themselves: "0", "1", ...
func isIDLabels(names []string) bool {
	for i, n := range names {
		if n != strconv.Itoa(i) {
			return false
		}
	}
	return true
}

// OpenModel loads a saved model for evaluation or prediction: dir holds config.json and model.safetensors (what
// tune finetune writes into output_dir after full fine-tuning, or any Hugging Face
// BertForSequenceClassification checkpoint); adapterDir, when set, is a PEFT LoRA adapter (adapter_config.json
// and adapter_model.safetensors, what a LoRA run writes into output_dir) loaded on top of it, with the label
// names and num_labels saved beside it (lora.SavedLabels, lora.SavedNumLabels). The tokenizer is read from the
// first of tokenizerPath, adapterDir and dir that holds one. The model's labels are final: LoadDataset maps a
// file's labels through its id2label (which config.json's label2id must invert). The Run has no recipe,
// datasets or Trainer.
func OpenModel(dir, adapterDir, tokenizerPath string, b tensor.Backend) (*Run, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, errctx.Wrap("recipes: the model directory", err)
	}
	var opts transformer.LoadOptions
	var err error
	if adapterDir != "" {
		if opts.Labels, err = lora.SavedLabels(adapterDir); err != nil {
			return nil, errctx.Wrap("recipes", err)
		}
		if opts.Labels == nil {
			if opts.NumLabels, err = lora.SavedNumLabels(adapterDir); err != nil {
				return nil, errctx.Wrap("recipes", err)
			}
		}
	}
	if adapterDir == "" {
		if err := checkClassifier(dir); err != nil {
			return nil, err
		}
	}
	m, report, err := bert.LoadPretrained(dir, b, opts)
	if err != nil {
		return nil, errctx.Wrap("recipes", err)
	}
	what := "--tokenizer"
	if tokenizerPath == "" {
		what = "the model's tokenizer (pass --tokenizer to name another)"
		tokenizerPath = dir
		if adapterDir != "" && hasTokenizer(adapterDir) {
			tokenizerPath = adapterDir
		}
	}
	tok, err := loaders.LoadTokenizer(tokenizerPath)
	if err == nil {
		err = tok.PadError() // every batch is padded
	}
	if err != nil {
		return nil, errctx.Wrapf(err, "recipes: %s", what)
	}
	if err := checkVocab(tok, tokenizerPath, m, "the model in "+dir); err != nil {
		hint := "pass --tokenizer with the model's own tokenizer"
		if adapterDir != "" {
			hint += ", or --model the base model the adapter was trained on"
		}
		return nil, fmt.Errorf("recipes: %w; %s", err, hint)
	}
	run := &Run{Backend: b, Tokenizer: tok, Base: m, Model: m, fixedLabels: true}
	run.addNotices(report, dir)
	if adapterDir != "" {
		lm, err := lora.LoadAdapter(m, adapterDir)
		if err != nil {
			return nil, errctx.Wrap("recipes", err)
		}
		run.Notices = append(run.Notices, lm.Warnings...)
		run.Model = lm
	}
	return run, nil
}

// checkClassifier refuses a checkpoint in dir that holds a trained head for another number of labels than its
// config.json names: eval and predict would score a freshly drawn head (from_pretrained refuses such a size
// mismatch too). It reads only the safetensors headers (bert.CheckPretrained), before the model is built: a
// num_labels of 1048576 beside a 2-row head would otherwise allocate and draw the [1048576, hidden] classifier
// first (6.6 GB for hidden 768). Errors of the check itself are left to the load, which reports them.
func checkClassifier(dir string) error {
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil
	}
	defer ck.Close()
	report, err := bert.CheckPretrained(dir, ck)
	if err != nil || report == nil {
		return nil
	}
	for _, mm := range report.Mismatched {
		if strings.HasPrefix(mm.Name, "classifier.") && len(mm.Model) > 0 {
			return badinput.Errorf("recipes: %s: the checkpoint's %s is %v but config.json's labels (id2label / num_labels: %d) "+
				"make it %v: the trained classifier does not fit the config; fix id2label and num_labels in %s",
				dir, mm.Name, mm.Checkpoint, mm.Model[0], mm.Model, filepath.Join(dir, loaders.ConfigName))
		}
	}
	return nil
}

// absPath returns p as an absolute path ("" stays ""): the adapter's base_model_name_or_path, which a relative
// path would make depend on the directory training ran in. PEFT writes the path the user passed; tune resolves
// it, so that tune merge and eval, run from anywhere, can find and check the base.
func absPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}

// checkVocab reports a tokenizer whose ids do not all fit the model's embedding table (vocab_size rows): the
// tokenizer belongs to another model, and the first batch would fail deep in the embedding lookup.
func checkVocab(tok *loaders.Tokenizer, tokPath string, m *bert.BertForSequenceClassification, model string) error {
	if n, v := tok.VocabSize(), m.Config.VocabSize; n > v {
		return vocabError{fmt.Sprintf("the tokenizer %s has %d tokens but %s has vocab_size %d: they do not belong together (token ids ≥ %d have no embedding)",
			tokPath, n, model, v, v)}
	}
	return nil
}

// ErrTokenizerMismatch matches (errors.Is) the error of Build and OpenModel for a tokenizer whose ids do not
// all fit the model's embedding table: the tokenizer and the model given do not belong together, which the
// CLI reports as bad usage (exit 2) whichever command was given them.
var ErrTokenizerMismatch = errors.New("recipes: the tokenizer does not fit the model's vocab_size")

// vocabError is checkVocab's error: its own message, matching ErrTokenizerMismatch.
type vocabError struct{ msg string }

func (e vocabError) Error() string        { return e.msg }
func (e vocabError) Is(target error) bool { return target == ErrTokenizerMismatch }

// BadInput marks the error as the input's (internal/badinput): exit status 2.
func (e vocabError) BadInput() bool { return true }

// modelSource names where a recipe's model comes from, for messages.
func modelSource(r *Recipe) string {
	if r.Model.Path != "" {
		return "the model in " + r.Model.Path + " (model.path)"
	}
	return "model.config"
}

// HasAdapter reports whether dir holds a PEFT adapter (adapter_config.json).
func HasAdapter(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, lora.AdapterConfigName))
	return err == nil
}

// hasTokenizer reports whether dir holds tokenizer.json or vocab.txt.
func hasTokenizer(dir string) bool {
	for _, f := range []string{"tokenizer.json", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// LoadDataset reads the data file path (key names it in errors; "" gives nil) with the run's tokenizer, the
// columns, format and max_length of d, and the model's labels: a model with named labels, and any model OpenModel
// loaded (a trained one), maps the file's labels through its id2label, an integer being taken as a class id
// and any other label an error naming file:line and the known labels; a model being built for training with
// transformers' placeholder names (LABEL_0, ...) takes the ids from labels when non-nil, else from the file
// (integers as they are, strings sorted), as HF's run_glue does. A file with more classes than the model's
// num_labels is an error, and so is a row without a label. A regression model (num_labels 1) reads float targets.
func (run *Run) LoadDataset(key, path string, d Data, labels map[string]int) (*datasets.Text, error) {
	return run.loadDataset(key, path, d, labels, false)
}

// LoadUnlabelled reads a data file of inputs without labels (for prediction), like LoadDataset.
func (run *Run) LoadUnlabelled(key, path string, d Data) (*datasets.Text, error) {
	return run.loadDataset(key, path, d, nil, true)
}

func (run *Run) loadDataset(key, path string, d Data, labels map[string]int, unlabelled bool) (*datasets.Text, error) {
	if path == "" {
		return nil, nil
	}
	cfg := run.Base.Config
	regression := cfg.NumLabels() == 1 || cfg.ProblemType == bert.Regression
	opts := dataOptions(d)
	opts.Regression, opts.Unlabelled = regression && !unlabelled, unlabelled
	if !regression && !unlabelled {
		opts.Label2ID = labels
		if run.fixedLabels || !isDefaultLabels(cfg.ID2Label) {
			opts.Label2ID = labelIDs(cfg.ID2Label)
		}
	}
	if !regression && !unlabelled {
		opts.NumLabels = cfg.NumLabels() // integer labels are checked against it before any table is sized
	}
	ds, err := datasets.LoadText(path, run.Tokenizer, datasets.TextOptions{DatasetOptions: opts, MaxLength: d.MaxLength,
		PadToMultipleOf: d.PadToMultipleOf, GroupByLength: d.GroupByLength})
	var lre *loaders.LabelRangeError
	if errors.As(err, &lre) && lre.NumLabels > 0 {
		return nil, labelOutOfRange(key, lre)
	}
	if err != nil {
		return nil, errctx.Wrapf(err, "recipes: %s", key)
	}
	if !regression && len(ds.LabelNames) > cfg.NumLabels() {
		return nil, tooManyLabels(key, ds.Dataset, cfg.NumLabels())
	}
	if !regression && !unlabelled {
		if err := unlabelledRows(key, ds.Dataset); err != nil {
			return nil, err
		}
		if n := numbersAsNames(key, ds.Dataset); opts.Label2ID == nil && n != "" {
			run.Notices = append(run.Notices, n)
		}
		// Only beside a training file of names (its labels were no class ids, the mapping no placeholders).
		if n := idsBesideNames(key, ds.Dataset); labels != nil && !run.fixedLabels && run.Train != nil &&
			run.Train.IDLabelLine == 0 && n != "" {
			run.Notices = append(run.Notices, n)
		}
	}
	return ds, nil
}

// idsBesideNames returns a note when an eval or test file, whose labels map through the training file's label
// names (neg, pos), has an integer label, which is then taken as a class id of that mapping (0 is neg): a file
// of class ids beside a training file of names is most likely labelled another way, and the metrics would mean
// nothing without a word. transformers' run_glue maps the eval labels through the training
// mapping too; tune eval takes integers as class ids by design.
func idsBesideNames(key string, ds *loaders.Dataset) string {
	names := ds.LabelNames
	if ds.IDLabelLine == 0 || isDefaultLabels(names) || isIDLabels(names) {
		return ""
	}
	shown := listMapping(names, 4, func(i int, n string) string { return fmt.Sprintf("%d → %q", i, n) })
	return fmt.Sprintf("%s: %s:%d has the label %q, a class id, while data.train's labels are names (%s): integer "+
		"labels are taken as class ids of that mapping (%s); if the file's numbers mean other classes, relabel it "+
		"with the training file's names", key, ds.Path, ds.IDLabelLine, ds.IDLabel, quoteNames(names), strings.Join(shown, ", "))
}

// listMapping shows the first max entries of a label mapping, each as item(class id, name), and how many more
// there are.
func listMapping(names []string, max int, item func(int, string) string) []string {
	shown := make([]string, 0, min(len(names), max)+1)
	for i, n := range names[:min(len(names), max)] {
		shown = append(shown, item(i, n))
	}
	if len(names) > max {
		shown = append(shown, fmt.Sprintf("and %d more", len(names)-max))
	}
	return shown
}

// numbersAsNames returns a note when a file's labels, which name the classes (no model mapping them), include
// numbers but are not all class ids 0..n-1 ({1, positive}, {-1, 1}, {0, 1.5}): loaders then takes every label as
// a name and sorts them as strings, as run_glue sorts a label list, so "1" may become class 0, while an integer
// label is a class id wherever every label is one (tune eval on a 0/1 file). The note shows the mapping.
func numbersAsNames(key string, ds *loaders.Dataset) string {
	names := ds.LabelNames
	if len(names) == 0 || isIDLabels(names) {
		return ""
	}
	number := ""
	for _, n := range names {
		if _, err := strconv.ParseFloat(n, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			number = n
			break
		}
	}
	if number == "" {
		return ""
	}
	shown := listMapping(names, 6, func(i int, n string) string { return fmt.Sprintf("%q → class %d", n, i) })
	return fmt.Sprintf("%s: %s has number labels (%q) but not only class ids 0..%d, so every label is taken as a "+
		"name and the names are sorted as strings: %s. If the numbers are class ids, renumber the labels 0..n-1 (and "+
		"use no other labels)", key, ds.Path, number, len(names)-1, strings.Join(shown, ", "))
}

// unlabelledRows refuses a labelled file (training, evaluation, tune eval) with rows that have no label (an
// empty label field, a JSON label that is null or ""), which loaders reads as IgnoreLabel: the loss would skip
// them while they were counted as examples (a broken export trained on half its rows without a word, and
// eval_samples_per_second counted rows never scored). transformers fails on a None label too. The error is
// loaders' *MissingLabelError (bad input, exit 2): the first such row's file:line, the label column or key,
// and how many rows have none.
func unlabelledRows(key string, ds *loaders.Dataset) error {
	if err := ds.MissingLabels(); err != nil {
		return errctx.Wrapf(err, "recipes: %s", key)
	}
	return nil
}

// isDefaultLabels reports whether names are transformers' placeholders LABEL_0, LABEL_1, ...
func isDefaultLabels(names []string) bool {
	for i, n := range names {
		if n != "LABEL_"+strconv.Itoa(i) {
			return false
		}
	}
	return true
}

// labelIDs inverts a list of label names.
func labelIDs(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

// seed is the seed of weight initialisation: training.seed.
func seed(r *Recipe) uint64 { return uint64(r.Training.Seed) }

// buildModel loads the recipe's checkpoint or initialises a new model from model.config into run.Base.
func (run *Run) buildModel() error {
	r := run.Recipe
	initSeed := seed(r)
	if r.Model.Config != nil {
		cfg, err := r.Model.Config.bertConfig()
		if err != nil {
			return err
		}
		if run.Base, err = bert.NewBertForSequenceClassification(run.Backend, cfg, initSeed); err != nil {
			return errctx.Wrap("recipes: model.config", err)
		}
		return errctx.Wrap("recipes: model.attn_implementation", run.Base.SetAttnImplementation(r.Model.AttnImplementation))
	}
	opts := transformer.LoadOptions{Seed: initSeed, AttnImplementation: r.Model.AttnImplementation}
	opts.Labels, opts.NumLabels = run.trainingLabels()
	m, report, err := bert.LoadPretrained(r.Model.Path, run.Backend, opts)
	if err != nil {
		return errctx.Wrap("recipes: model.path", err)
	}
	run.Base = m
	run.addNotices(report, r.Model.Path)
	return nil
}

// addNotices keeps LoadPretrained's messages for the user.
func (run *Run) addNotices(report *transformer.LoadReport, dir string) {
	if n := report.Notice(); n != "" {
		run.Notices = append(run.Notices, n)
	}
	if n := report.UnusedNotice(dir); n != "" {
		run.Notices = append(run.Notices, n)
	}
}

// loraError is lora.Apply's error as the recipe's: a *lora.ConfigError found only once the model is known (a
// rank whose adapters cannot fit in memory) is named by its recipe key, "embedded:tiny: lora.r: ...", and stays
// in the chain, so that the CLI reports it as bad usage, as the same key refused by Validate.
func loraError(r *Recipe, err error) error {
	var ce *lora.ConfigError
	if !errors.As(err, &ce) {
		return errctx.Wrap("recipes: lora", err)
	}
	msg := "lora." + ce.Key + ": " + ce.Reason
	if r.Source != "" {
		msg = r.Source + ": " + msg
	}
	return &keyedError{msg: msg, err: err}
}

// keyedError is an error with a message of its own that wraps its cause.
type keyedError struct {
	msg string
	err error
}

func (e *keyedError) Error() string { return e.msg }
func (e *keyedError) Unwrap() error { return e.err }
