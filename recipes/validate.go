package recipes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/transformer/bert"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/tune-ml/tune/chat"
	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/meta"
	"github.com/tune-ml/tune/tokenizers"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// Data formats, chosen by data.format or by each file's extension.
const (
	FormatTSV   = "tsv"
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

var deviceRe = regexp.MustCompile(`^(auto|cpu|cuda(:\d+)?)$`)

// CheckDevice checks a device name as the recipe's device key and the commands' --device flag take it: auto,
// cpu, cuda or cuda:N. Its error is the reason alone, for the caller to prefix with the key or the flag.
func CheckDevice(device string) error {
	if !deviceRe.MatchString(device) {
		return fmt.Errorf("must be auto, cpu, cuda or cuda:N (got %q)", device)
	}
	return nil
}

// Validate checks the decoded recipe: the model, tokenizer, data and device sections, lora.Config.Validate and
// trainer.TrainingArguments.Validate. It returns nil or the errors.Join of *Problems. Load calls it; call it
// again after changing a Recipe in code.
func (r *Recipe) Validate() error { return r.validate(newDecoder(r.Source)) }

// validate reports problems at the positions d recorded while decoding.
func (r *Recipe) validate(d *decoder) error {
	d.problems = nil
	bad := func(key, format string, a ...any) {
		d.add(d.position(key), key, "%s: %s", key, fmt.Sprintf(format, a...))
	}
	if err := transformer.CheckAttnImplementation(r.Model.AttnImplementation); err != nil {
		bad("model.attn_implementation", "%q is not supported: use \"sdpa\" (fused attention, the default) or \"eager\" (the two-pass reference)", r.Model.AttnImplementation)
	}
	before := len(d.problems)
	switch m := r.Model; {
	case m.Path == "" && m.Config == nil:
		bad("model", "set model.path (a Hugging Face checkpoint directory) or model.config (a new model from scratch)")
	case m.Path != "" && m.Config != nil:
		bad("model", "set either model.path or model.config, not both")
	case m.NumLabels != 0 && m.Config != nil:
		bad("model.num_labels", "applies to a checkpoint (model.path); a new model takes model.config.num_labels")
	case m.NumLabels < 0 || m.NumLabels > 1_000_000:
		bad("model.num_labels", "must be between 1 and 1000000 (0: the checkpoint's, or the training file's labels), got %d", m.NumLabels)
	case m.Config != nil:
		m.Config.validate(func(key, format string, a ...any) { bad("model.config."+key, format, a...) })
		if r.Tokenizer.Path == "" {
			bad("tokenizer.path", "is required when model.config builds a new model (there is no checkpoint directory to take it from)")
		}
		if r.Data.MaxLength > m.Config.MaxPositionEmbeddings && m.Config.MaxPositionEmbeddings > 0 {
			bad("data.max_length", "%d exceeds model.config.max_position_embeddings %d", r.Data.MaxLength,
				m.Config.MaxPositionEmbeddings)
		} else if msg := r.padBeyond(m.Config.MaxPositionEmbeddings, "model.config.max_position_embeddings"); msg != "" {
			bad("data.pad_to_multiple_of", "%s", msg)
		}
	}
	modelOK := len(d.problems) == before // the LoRA checks build the model's skeleton from it
	r.validateData(bad)
	if r.IsCausalLM() {
		r.validateCausalData(d, bad)
	} else if _, _, known := r.loraTaskType(); known {
		// A BERT classifier, known from model.config or model.path's config.json (not a recipe whose checkpoint
		// is not there yet: gpt2-full before tune download).
		r.validateClassifierData(d, bad)
	}
	if err := CheckDevice(r.Device); err != nil {
		bad("device", "%v", err)
	}
	if r.LoRA != nil && r.Model.Config != nil {
		bad("lora", "trains adapters on a frozen base model, but model.config builds a new model from random weights, "+
			"which a LoRA run does not save: the adapter would name no base model (base_model_name_or_path null) and "+
			"could not be evaluated, merged or loaded with PEFT. Train LoRA on a checkpoint (model.path), or train "+
			"the new model in full (remove the lora section)")
	} else if r.LoRA != nil {
		want, what, known := r.loraTaskType() // reads model.path's config.json: once
		if err := r.LoRA.Validate(); err != nil {
			addFieldErrors(err, "lora.", bad)
		} else if known && r.LoRA.TaskType != "" && r.LoRA.TaskType != want {
			// PEFT's AutoPeftModel builds the wrapper that adapter_config.json's task_type names (a causal-LM
			// wrapper around a classifier, modules_to_save null): the adapter would load as another model.
			bad("lora.task_type", "%s does not fit %s, whose adapters PEFT loads with task_type %s: set task_type: %s", r.LoRA.TaskType, what, want, want)
		} else if modelOK {
			r.checkTargets(bad)
			r.checkRank(bad)
		}
		if known && want == lora.TaskSeqCls && r.LoRA.TaskType == "" &&
			!slices.Contains(r.LoRA.ModulesToSave, "classifier") {
			// tester 13: a LoRA run set up by overrides saved task_type null, and its classifier never trained.
			r.Warnings = append(r.Warnings, "lora: no task_type and no modules_to_save: as in PEFT, the classifier head "+
				"then stays as loaded (freshly initialised when the checkpoint has none) and only the adapters train; "+
				"set lora.task_type: SEQ_CLS to train and save it with them, as the bert recipe does")
		}
	}
	addFieldErrors(r.Training.Validate(), "training.", bad)
	r.validateBestMetric(bad)
	if len(d.problems) > 0 {
		return errors.Join(d.problems...)
	}
	r.warnHostMemory()
	return nil
}

// hostBacked reports whether the run will keep its tensors in host memory: device cpu, or auto (the default)
// where no GPU is, as OpenDevice decides.
func (r *Recipe) hostBacked() bool {
	return r.Device == "cpu" || ((r.Device == "" || r.Device == "auto") && !cuda.Available())
}

// warnHostMemory adds to r.Warnings what building model.config's new model will need of host memory when that
// is more than the machine has (bert.BertConfig.HostMemoryError), on a run that builds it there: tune finetune
// then stops before training (exit status 1, as the machine, not the recipe, falls short), and validate says so
// first (tester 12: validate passed a hidden_size of 20000 that finetune could not build).
func (r *Recipe) warnHostMemory() {
	if r.Model.Config == nil || !r.hostBacked() {
		return
	}
	cfg, err := r.Model.Config.bertConfig()
	if err != nil {
		return
	}
	if err := cfg.HostMemoryError(); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("model.config: %s: tune finetune will stop before it trains "+
			"(exit status 1) unless more memory is free then", strings.TrimPrefix(err.Error(), "transformer: ")))
	}
}

// checkRank makes lora.Apply's checks of lora.r before anything loads (lora.CheckRank), on the model built on
// the meta backend from the checkpoint's config.json (transformer.Skeleton, which matches the
// weights with the config first): on device cpu, a rank whose adapters cannot fit in host memory is refused
// naming lora.r, as tune finetune refuses it when it builds them; a rank above min(in, out) of a targeted
// projection is a warning (r.Warnings), which validate and finetune print alike. A model that cannot be built
// from its config is left to CheckFiles and Build, which name what is wrong with it.
func (r *Recipe) checkRank(bad func(key, format string, a ...any)) {
	if r.Model.Path == "" { // LoRA on model.config is refused before (validate)
		return
	}
	m, err := transformer.Skeleton(r.Model.Path, meta.New(nil))
	if err != nil {
		return
	}
	// tester 12: validate passed lora.r=1e9 under device auto that finetune refused on the CPU.
	warnings, err := lora.CheckRank(m, *r.LoRA, r.hostBacked())
	var ce *lora.ConfigError
	switch {
	case errors.As(err, &ce):
		bad("lora."+ce.Key, "%s", ce.Reason)
	case err == nil:
		r.Warnings = append(r.Warnings, warnings...)
	}
}

// checkTargets refuses a lora.target_modules that names no module of the model (lora.Config.CheckTargets),
// with the model's module names and the closest to each bad one, before anything loads: the module paths come
// from the checkpoint's config.json alone (transformer.ProjectionPaths). A checkpoint
// whose config.json cannot be read is left to CheckFiles and Build, which name what is wrong with it.
func (r *Recipe) checkTargets(bad func(key, format string, a ...any)) {
	if !r.LoRA.TargetModules.IsSet() {
		return // lora.Apply takes PEFT's default for the model's type
	}
	if r.Model.Path == "" { // LoRA on model.config is refused before (validate)
		return
	}
	paths, err := transformer.ProjectionPaths(r.Model.Path)
	if err != nil || len(paths) == 0 {
		return
	}
	if err := r.LoRA.CheckTargets(paths); err != nil {
		bad("lora.target_modules", "for %s: %v", modelSource(r), err)
	}
}

func (r *Recipe) validateData(bad func(key, format string, a ...any)) {
	dt := &r.Data
	if dt.Train == "" {
		bad("data.train", "is required: a TSV, CSV or JSONL file of labelled text")
	}
	needsEval := ""
	switch {
	case r.Training.EvalStrategy != trainer.IntervalNo:
		needsEval = "training.eval_strategy is " + string(r.Training.EvalStrategy)
	case r.Training.LoadBestModelAtEnd:
		needsEval = "training.load_best_model_at_end is set"
	case r.Training.DoEval:
		needsEval = "training.do_eval is set"
	}
	if dt.Eval == "" && needsEval != "" {
		bad("data.eval", "is required because %s", needsEval)
	}
	if dt.Format != "" && dt.Format != FormatTSV && dt.Format != FormatCSV && dt.Format != FormatJSONL {
		bad("data.format", "must be tsv, csv or jsonl, or empty to use each file's extension (got %q)", dt.Format)
	}
	for _, f := range r.dataFiles() {
		if _, err := dt.FormatOf(f.path); f.path != "" && err != nil {
			bad(f.key, "%v", err)
		}
	}
	if strings.TrimSpace(dt.TextColumn) == "" {
		bad("data.text_column", "must name the column holding the text")
	}
	if strings.TrimSpace(dt.LabelColumn) == "" {
		bad("data.label_column", "must name the column holding the label")
	}
	switch causal := r.IsCausalLM(); {
	case causal && dt.MaxLength < 2:
		// A causal LM's loss predicts each token from the ones before it (labels shifted by one, transformers'
		// ForCausalLMLoss): a row of one token has no target.
		bad("data.max_length", "must be ≥ 2 for a causal LM: each token is predicted from the ones before it, so a row "+
			"needs two tokens for one next-token target (got %d)", dt.MaxLength)
	case !causal && dt.MaxLength < 3:
		bad("data.max_length", "must be ≥ 3 ([CLS], one token, [SEP]) (got %d)", dt.MaxLength)
	}
	if dt.PadToMultipleOf < 0 {
		bad("data.pad_to_multiple_of", "must be ≥ 0 (got %d)", dt.PadToMultipleOf)
	}
}

// loraTaskType returns PEFT's task_type for the recipe's model and what the model is, for messages; known is
// false when model.path's config.json cannot tell (not there yet: CheckFiles reports it).
func (r *Recipe) loraTaskType() (want, what string, known bool) {
	if r.Model.Path != "" {
		if _, err := transformer.Lookup(r.Model.Path); err != nil {
			return "", "", false
		}
	}
	if r.IsCausalLM() {
		return "CAUSAL_LM", "a causal language model", true
	}
	return lora.TaskSeqCls, "a BERT sequence classifier", true
}

// padBeyond returns the problem when data.pad_to_multiple_of rounds a batch of data.max_length tokens up past
// positions (the model's max_position_embeddings, named by what): the collator pads every batch to a multiple of
// it, as transformers' DataCollatorWithPadding does, so the first batch would fail in the position embedding
// (pad_to_multiple_of 1000 beside 64 positions). "" when it fits, or when either is not set.
func (r *Recipe) padBeyond(positions int, what string) string {
	m, n := r.Data.PadToMultipleOf, r.Data.MaxLength
	if m <= 1 || n <= 0 || positions <= 0 {
		return ""
	}
	if padded := (n + m - 1) / m * m; padded > positions {
		return fmt.Sprintf("%d pads a batch of data.max_length %d tokens to %d, beyond %s %d: batches are padded to a "+
			"multiple of it; use one that keeps %d within %d (8 suits Tensor Cores), or 0", m, n, padded, what, positions, n, positions)
	}
	return ""
}

// validateBestMetric checks training.metric_for_best_model against the metrics the evaluation reports
// (trainer.BestModelMetricNames), so a typo is caught now rather than after the first evaluation. A model
// built from model.config with num_labels 1 or problem_type regression reports only the loss, a causal LM the
// loss, mean_token_accuracy and perplexity; for a BERT checkpoint, whose head is read later, every name is
// allowed that some classifier reports.
func (r *Recipe) validateBestMetric(bad func(key, format string, a ...any)) {
	m := r.Training.MetricForBestModel
	if m == "" {
		return
	}
	classification, what := true, "the evaluation"
	if c := r.Model.Config; c != nil && (c.NumLabels == 1 || c.ProblemType == "regression") {
		classification, what = false, "the evaluation of a regression model (num_labels 1)"
	}
	names := trainer.BestModelMetricNames(classification)
	if r.IsCausalLM() {
		names, what = trainer.CausalLMMetricNames(), "the evaluation of a causal language model"
	}
	name, prefixed := strings.CutPrefix(m, "eval_")
	if slices.Contains(names, name) {
		return
	}
	msg := fmt.Sprintf("%q is not a metric %s reports (%s, with or without the eval_ prefix)", m, what,
		strings.Join(names, ", "))
	if c := closest(name, names); c != "" {
		if prefixed {
			c = "eval_" + c
		}
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	bad("training.metric_for_best_model", "%s", msg)
}

// dataFiles lists the data paths with their keys, in a fixed order.
func (r *Recipe) dataFiles() []struct{ key, path string } {
	return []struct{ key, path string }{
		{"data.train", r.Data.Train}, {"data.eval", r.Data.Eval}, {"data.test", r.Data.Test},
	}
}

// FormatOf returns the format of data file p: data.format when set, else from the extension.
func (dt *Data) FormatOf(p string) (string, error) {
	if dt.Format != "" {
		return dt.Format, nil
	}
	switch strings.ToLower(filepath.Ext(p)) {
	case ".tsv":
		return FormatTSV, nil
	case ".csv":
		return FormatCSV, nil
	case ".jsonl", ".json":
		return FormatJSONL, nil
	}
	return "", fmt.Errorf("cannot tell the format of %s from its extension; set data.format (tsv, csv or jsonl)", p)
}

// addFieldErrors reports each *trainer.ArgumentError or *lora.ConfigError inside err under prefix+key, and
// any other error as is.
func addFieldErrors(err error, prefix string, bad func(key, format string, a ...any)) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			addFieldErrors(e, prefix, bad)
		}
		return
	}
	var ae *trainer.ArgumentError
	var ce *lora.ConfigError
	switch {
	case errors.As(err, &ae):
		bad(prefix+ae.Key, "%s", ae.Reason)
	case errors.As(err, &ce):
		bad(prefix+ce.Key, "%s", ce.Reason)
	default:
		bad(strings.TrimSuffix(prefix, "."), "%v", err)
	}
}

// CheckFiles checks that the recipe's inputs exist: the model directory and its config.json, the tokenizer
// (a directory holding tokenizer.json or vocab.txt, or such a file) and the data files; for a model built
// from model.config, that vocab_size covers the tokenizer's vocabulary; and that training.output_dir can be
// a directory (it is not a file, nor below one); that training.resume_from_checkpoint names a checkpoint
// (checkResume). It returns every problem at once. An input of an embedded
// recipe that lies outside what tune embeds (bert's checkpoint and SST-2 files) is reported as the recipe
// writes it, with the key=value overrides that supply it.
func (r *Recipe) CheckFiles() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, &Problem{Pos: r.Source, Key: key, Msg: key + ": " + fmt.Sprintf(format, a...)})
	}
	name := strings.TrimPrefix(r.Source, "embedded:")
	var missing []string // keys of r.outside whose files are not there
	fail := func(key, format string, a ...any) {
		if written, ok := r.outside[key]; ok {
			missing = append(missing, key)
			bad(key, "the embedded recipe %s names %s, a path relative to the recipes/ directory of tune's source "+
				"tree, not found from here; give it as an override: %s=%s", name, written, key, overridePlaceholder(key))
			return
		}
		bad(key, format, a...)
	}
	modelBad := false
	switch {
	case r.Model.Path == "":
	case r.hubMissing["model.path"] != nil:
		bad("model.path", "no directory %s here, and %v", r.Model.Path, r.hubMissing["model.path"])
		modelBad = true
	default:
		if _, err := os.Stat(r.Model.Path); err != nil {
			hint := ""
			if errors.Is(err, fs.ErrNotExist) {
				hint = "; set model.path to a checkpoint directory, or to a Hub id (such as bert-base-uncased) of a model " +
					"in the Hugging Face cache, which tune download fills"
			}
			fail("model.path", "%s%s", pathError(err), hint)
			modelBad = true
		} else if _, err := os.Stat(filepath.Join(r.Model.Path, "config.json")); err != nil {
			fail("model.path", "%s is not a Hugging Face checkpoint directory (no config.json)%s: %s", r.Model.Path, r.cachedNote("model.path"), pathError(err))
			modelBad = true
		} else if h := loaders.OtherWeightsHint(r.Model.Path); h != "" && !hasSafetensors(r.Model.Path) {
			// Weights in a format tune does not read (pytorch_model.bin): Build would fail at the load.
			bad("model.path", "%s has no %s (nor %s): %s", r.Model.Path, loaders.SafetensorsWeightsName, loaders.SafetensorsIndexName, h)
			modelBad = true
		} else if r.IsCausalLM() {
			// A decoder checkpoint: config.json as its family reads it (the sizes it can build, no weights read),
			// so that tune validate reports what Build would.
			if err := checkCausalConfig(r.Model.Path); err != nil {
				bad("model.path", "%s", errctx.Trim(err.Error()))
			} else {
				r.checkCausalMaxLength(bad)
			}
		} else if err := CheckModelConfig(r.Model.Path); err != nil {
			bad("model.path", "%s", errctx.Trim(err.Error()))
		} else if hf, err := loaders.ReadBertConfig(r.Model.Path); err == nil && hf.MaxPositionEmbeddings > 0 &&
			r.Data.MaxLength > hf.MaxPositionEmbeddings {
			// The position embeddings have max_position_embeddings rows; a longer sequence has no position to
			// look up (transformers' tokenizers cap model_max_length at it for the same reason).
			bad("data.max_length", "%d exceeds the model's max_position_embeddings %d (%s, model.path): sequences "+
				"longer than that have no position embedding; set data.max_length=%d or less",
				r.Data.MaxLength, hf.MaxPositionEmbeddings, filepath.Join(r.Model.Path, loaders.ConfigName), hf.MaxPositionEmbeddings)
		} else if err == nil {
			if msg := r.padBeyond(hf.MaxPositionEmbeddings, "the model's max_position_embeddings ("+
				filepath.Join(r.Model.Path, loaders.ConfigName)+")"); msg != "" {
				bad("data.pad_to_multiple_of", "%s", msg)
			}
		}
	}
	tok := ""
	switch {
	case r.Tokenizer.Path == "" || modelBad && r.Tokenizer.Path == r.Model.Path:
	case r.hubMissing["tokenizer.path"] != nil:
		bad("tokenizer.path", "no file or directory %s here, and %v", r.Tokenizer.Path, r.hubMissing["tokenizer.path"])
	default:
		var err error
		if tok, err = TokenizerFile(r.Tokenizer.Path); err != nil {
			err = errors.New(pathError(err))
			if note := r.cachedNote("tokenizer.path"); note != "" {
				err = fmt.Errorf("%w%s", err, note)
			}
			fail("tokenizer.path", "%v", err)
		}
	}
	for _, f := range r.dataFiles() {
		if f.path == "" {
			continue
		}
		if st, err := os.Stat(f.path); err != nil {
			fail(f.key, "%s", pathError(err))
		} else if st.IsDir() {
			bad(f.key, "%s is a directory; name a data file", f.path)
		} else if !st.Mode().IsRegular() {
			// A named pipe waits for a writer (finetune hung with no message), a device is read without end.
			bad(f.key, "%s is %s, not a regular file: tune reads a data file whole, and this one would be waited on "+
				"or read without end; name a regular data file, or save what the pipe gives to one first", f.path,
				smallfile.Kind(st.Mode()))
		}
	}
	if len(missing) > 0 {
		kv := make([]string, len(missing))
		for i, k := range missing {
			kv[i] = k + "=" + overridePlaceholder(k)
		}
		hint := ""
		if slices.Contains(missing, "model.path") && r.Tokenizer.Path == r.Model.Path {
			hint = " (and tokenizer.path=DIR if the checkpoint directory holds no tokenizer.json or vocab.txt)"
		}
		errs = append(errs, &Problem{Pos: r.Source, Msg: fmt.Sprintf("the embedded recipe %s needs files that tune "+
			"does not embed: run it with %s%s, or copy it (tune cp %s my-%s.yaml) and edit its paths",
			name, strings.Join(kv, " "), hint, name, name)})
	}
	if err := outputDirProblem(r.Training.OutputDir); err != nil {
		bad("training.output_dir", "%v", err)
	} else if f := fileInPath(r.Training.OutputDir); f != "" {
		bad("training.output_dir", "%s is a file, not a directory; set training.output_dir to a directory (tune does not replace files)", f)
	} else if ae := (*trainer.ArgumentError)(nil); errors.As(r.Training.CheckOutputDir(), &ae) {
		bad("training.output_dir", "%s", ae.Reason)
	} else if key, in := r.inputInOutputDir(); key != "" {
		bad("training.output_dir", "%s would overwrite what %s reads (%s): a run writes config.json, model and "+
			"tokenizer files and checkpoint-N folders there (and overwrite_output_dir removes old ones); choose another "+
			"training.output_dir", r.Training.OutputDir, key, in)
	}
	r.checkResume(bad)
	if c := r.Model.Config; c != nil && tok != "" {
		if n, err := vocabSize(tok); err != nil {
			bad("tokenizer.path", "%v", err)
		} else if n > c.VocabSize {
			bad("model.config.vocab_size", "%d is smaller than the tokenizer's %d tokens (%s)", c.VocabSize, n, tok)
		}
	} else if r.Model.Path != "" && !modelBad && tok != "" && !r.IsCausalLM() {
		// The same check Build makes (checkVocab) for a checkpoint, made here so that the mismatch is a recipe
		// error (exit 2) whatever the model's source, before the weights load.
		if hf, err := loaders.ReadBertConfig(r.Model.Path); err == nil && hf.VocabSize > 0 {
			if n, err := vocabSize(tok); err == nil && n > hf.VocabSize {
				bad("tokenizer.path", "the tokenizer %s has %d tokens but the model in %s (model.path) has vocab_size %d: "+
					"they do not belong together (token ids ≥ %d have no embedding)", tok, n, r.Model.Path, hf.VocabSize, hf.VocabSize)
			}
		}
	} else if r.Model.Path != "" && !modelBad && tok != "" {
		// A decoder: the same check, from config.json's vocab_size (the embedding's rows; it may be larger than
		// the tokenizer, never smaller), so that a token id past it fails here and not at the batch that holds it.
		if err := CheckCausalVocab(tok, r.Model.Path); err != nil {
			bad("tokenizer.path", "%s", strings.TrimPrefix(err.Error(), "recipes: "))
		}
	}
	if r.IsCausalLM() && tok != "" {
		// What buildCausalLM reads before the data: the tokenizer as transformers builds it, its
		// tokenizer_config.json and the chat template, compiled (a BERT tokenizer is read above, by vocabSize
		// and the label checks).
		if err := checkCausalTokenizer(r.Tokenizer.Path); err != nil {
			bad("tokenizer.path", "%s", errctx.Trim(err.Error()))
		}
	}
	if r.Model.Path != "" && !modelBad {
		// The weights' headers (every offset and size is checked; no tensor data is read), as the load reads
		// them: a truncated model.safetensors fails here, not after the data are prepared. A folder without
		// weights is Build's to report (it names what the folder holds).
		if ck, err := loaders.OpenCheckpoint(r.Model.Path); err == nil {
			ck.Close()
		} else if !errors.Is(err, loaders.ErrNoWeights) && !errors.Is(err, fs.ErrNotExist) {
			bad("model.path", "%s", errctx.Trim(err.Error()))
		}
	}
	return errors.Join(errs...)
}

// CheckModelConfig reads the checkpoint's config.json as the model will be built from it, so that a config the
// model cannot be built from (an unsupported hidden_act, a vocab_size of 3000000000, ...) is reported before
// anything is loaded. It reads only config.json. CheckFiles checks model.path with it, tune eval and predict
// their --model; the error names the file.
func CheckModelConfig(dir string) error {
	hf, err := loaders.ReadBertConfig(dir)
	if err != nil {
		return err
	}
	if _, err := bert.BertConfigFromHF(hf); err != nil {
		return &bert.ConfigFileError{Path: filepath.Join(dir, loaders.ConfigName), Err: err}
	}
	return nil
}

// hasSafetensors reports whether dir holds model.safetensors or its shard index.
func hasSafetensors(dir string) bool {
	for _, name := range []string{loaders.SafetensorsWeightsName, loaders.SafetensorsIndexName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// overridePlaceholder is what a message shows as the value of an input key's override: DIR or FILE.
func overridePlaceholder(key string) string {
	if strings.HasPrefix(key, "data.") {
		return "FILE"
	}
	return "DIR"
}

// cachedNote says, for a key resolved to a snapshot in the Hugging Face cache, which repository the snapshot
// is and how to complete it; "" for a local path.
func (r *Recipe) cachedNote(key string) string {
	id := r.hubIDs[key]
	if id == "" {
		return ""
	}
	rev := ""
	if r.Model.Revision != "" {
		rev = " --revision " + r.Model.Revision
	}
	return fmt.Sprintf(" (the Hugging Face cache's snapshot of %s; `tune download %s%s` fetches what it lacks)", id, id, rev)
}

// outputDirProblem returns the error that makes p, or the first path above it that exists, unusable as a
// directory to create or write in, other than a file in the way (fileInPath): a loop of symbolic links, a
// dangling link, a component that cannot be searched. The other paths of a recipe report the same errors
// through their os.Stat; without this check a looping output_dir passed and failed after loading with
// "mkdir ...: file exists".
func outputDirProblem(p string) error {
	if p == "" {
		return nil
	}
	for p = filepath.Clean(p); ; {
		_, err := os.Stat(p)
		if err == nil {
			return nil
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return nil // a file in the way: fileInPath names it
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err // ELOOP, EACCES, ...
		}
		if lst, lerr := os.Lstat(p); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			return fmt.Errorf("%s is a symbolic link to %s, which does not exist; remove the link or create its target", p, target)
		}
		up := filepath.Dir(p)
		if up == p {
			return nil
		}
		p = up
	}
}

// fileInPath returns p or the nearest existing directory above it when that is not a directory (so p cannot be
// created as one), else "".
func fileInPath(p string) string {
	if p == "" {
		return ""
	}
	for p = filepath.Clean(p); ; {
		st, err := os.Stat(p)
		if err == nil {
			if st.IsDir() {
				return ""
			}
			return p
		}
		up := filepath.Dir(p)
		if up == p {
			return ""
		}
		p = up
	}
}

// pathError says why a path could not be used without Go's wording: "dev.tsv: no such file or directory"
// rather than the *fs.PathError's "stat dev.tsv: no such file or directory".
func pathError(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	switch {
	case errors.Is(pe.Err, fs.ErrNotExist):
		return pe.Path + ": no such file or directory"
	case errors.Is(pe.Err, fs.ErrPermission):
		return pe.Path + ": permission denied"
	}
	return pe.Path + ": " + pe.Err.Error()
}

// TokenizerFile returns the tokenizer file that p names, as loaders.LoadTokenizer will read it: p itself when it
// is a file, else p/tokenizer.json, else p/vocab.txt. A p that does not exist gives the *fs.PathError; a
// directory holding neither file an error saying so. CheckFiles checks tokenizer.path with it, tune eval and
// predict their --tokenizer.
func TokenizerFile(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		if st.Mode()&fs.ModeDevice != 0 {
			return "", fmt.Errorf("%s is a device, which would be read without end; name tokenizer.json, vocab.txt or their directory", p)
		}
		return p, nil
	}
	for _, name := range []string{"tokenizer.json", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(p, name)); err == nil {
			return filepath.Join(p, name), nil
		}
	}
	return "", fmt.Errorf("%s holds neither tokenizer.json nor vocab.txt", p)
}

// checkCausalTokenizer loads the decoder tokenizer at path (tokenizer.json, tokenizer_config.json) and compiles
// its chat template, as buildCausalLM does.
func checkCausalTokenizer(path string) error {
	if _, err := tokenizers.LoadForTransformers(path); err != nil {
		return err
	}
	cfg, err := tokenizers.LoadConfig(path)
	if err != nil {
		return err
	}
	if cfg.ChatTemplate != "" {
		if _, err := chat.FromConfig(cfg); err != nil {
			return err
		}
	}
	return nil
}

// CheckCausalVocab refuses a tokenizer (the file tokenizer) whose largest id does not fit the embedding of the
// decoder in dir (config.json's vocab_size): those tokens would fail in the embedding lookup of the batch that
// holds them, hours into a run. The error matches ErrTokenizerMismatch. A config.json without vocab_size, or
// files that cannot be read, are left to the loaders, which report them.
func CheckCausalVocab(tokenizer, dir string) error {
	var c struct {
		VocabSize int `json:"vocab_size"`
	}
	data, err := smallfile.Read(filepath.Join(dir, loaders.ConfigName)) // bounded: the loaders report a larger one
	if err != nil || json.Unmarshal(data, &c) != nil || c.VocabSize <= 0 {
		return nil
	}
	n, err := vocabSize(tokenizer)
	if err != nil || n <= c.VocabSize {
		return nil
	}
	return vocabError{fmt.Sprintf("recipes: the tokenizer %s has %d tokens (its largest id is %d) but the model in %s has "+
		"vocab_size %d (%s): they do not belong together (token ids ≥ %d have no embedding)",
		tokenizer, n, n-1, dir, c.VocabSize, filepath.Join(dir, loaders.ConfigName), c.VocabSize)}
}

// vocabSize counts the entries of a vocab.txt (lines) or a tokenizer.json (model.vocab plus added tokens
// beyond it).
func vocabSize(file string) (int, error) {
	data, err := smallfile.ReadCapped(file, smallfile.MaxTokenizerBytes, "a tokenizer file")
	if err != nil {
		return 0, err
	}
	if filepath.Ext(file) != ".json" {
		return strings.Count(strings.TrimRight(string(data), "\n"), "\n") + 1, nil
	}
	var tj struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID int `json:"id"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	n := 0
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	return n, nil
}

// unpackEmbedded writes the embedded data files into the user's cache directory, once per content (the
// directory name carries a hash of everything embedded), and returns the directory embedded recipes resolve
// their relative paths against. It writes into a temporary directory and renames it, so a concurrent or
// interrupted run never sees a partial copy.
func unpackEmbedded() (string, error) {
	h := sha256.New()
	var files []string
	_ = fs.WalkDir(embedded, ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			data, _ := embedded.ReadFile(p)
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
			h.Write(data)
			files = append(files, p)
		}
		return nil
	})
	base, top := "", "tune"
	if b, err := os.UserCacheDir(); err == nil {
		base = b
	} else {
		// No user cache (HOME unset): a per-user name in the shared temporary directory, not /tmp/tune, which
		// any user can create first.
		base, top = os.TempDir(), fmt.Sprintf("tune-%d", os.Getuid())
	}
	dir := filepath.Join(base, top, "recipes-"+hex.EncodeToString(h.Sum(nil))[:12])
	if _, err := os.Stat(dir); err == nil && embeddedIntact(dir, files) {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("recipes: unpacking the embedded data: %w", err)
	}
	// 0700: a private cache, as it has always been. A copy whose files changed since (truncated by a full disk,
	// edited by hand) is replaced: the name is the embedded content's hash, so the files must be that content.
	err := atomicfile.ReplaceDir(dir, 0o700, func(tmp string) error {
		for _, p := range files {
			data, _ := embedded.ReadFile(p)
			dst := filepath.Join(tmp, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another process unpacked the same content first
		}
		return "", fmt.Errorf("recipes: unpacking the embedded data: %w", err)
	}
	return dir, nil
}

// embeddedIntact reports whether dir holds the embedded files unchanged (their bytes are compared: the data are
// a few MB, read in milliseconds): a copy truncated by a full disk or edited by hand made tune finetune tiny
// train on other data than the binary embeds, without a word.
func embeddedIntact(dir string, files []string) bool {
	for _, p := range files {
		want, _ := embedded.ReadFile(p)
		// At most the embedded size is read: a file replaced by a larger one, or by a link to /dev/zero, is not
		// intact either, and reading it whole would take memory by its size.
		got, err := smallfile.ReadCapped(filepath.Join(dir, filepath.FromSlash(p)), int64(len(want)), "an embedded data file")
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

// inputInOutputDir returns the first input (model.path, then tokenizer.path) that a run writing into
// training.output_dir could overwrite or delete: the output folder itself, or a checkpoint-N folder inside it.
// Paths are compared after resolving symbolic links, so a link to the model folder is caught too.
func (r *Recipe) inputInOutputDir() (key, path string) {
	out, err := realPath(r.Training.OutputDir)
	if err != nil {
		return "", "" // absent: nothing in it can be an input
	}
	for _, in := range []struct{ key, path string }{{"model.path", r.Model.Path}, {"tokenizer.path", r.Tokenizer.Path}} {
		if in.path == "" {
			continue
		}
		dir, err := realPath(in.path)
		if err != nil {
			continue
		}
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			dir = filepath.Dir(dir)
		}
		if dir == out || isCheckpointInside(out, dir) {
			return in.key, in.path
		}
	}
	return "", ""
}

// isCheckpointInside reports whether dir is out/checkpoint-N or lies below such a folder.
func isCheckpointInside(out, dir string) bool {
	rel, err := filepath.Rel(out, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	first := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
	return trainer.IsCheckpointDir(first)
}

// realPath returns p absolute with every symbolic link resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
