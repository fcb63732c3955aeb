package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/hub"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/typo"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// checkModelPaths checks the model, adapter and tokenizer paths of eval and predict before anything is loaded,
// model first, so that a wrong path is reported as itself, a usage error (exit 2) naming its flag, rather than
// as a missing tokenizer inside it or after the weights are read: the model must be a directory with a
// config.json the model can be built from (recipes.CheckModelConfig, as tune finetune checks model.path) and
// safetensors weights, not a LoRA adapter directory; the adapter (when set) a directory with
// adapter_config.json whose base is --model (checkAdapterBase; forceBase is --force-base); the tokenizer what
// recipes.TokenizerFile accepts (as tune finetune checks tokenizer.path).
//
// It returns the tokenizer to pass to recipes.OpenModel: tokenizer itself when set; else "" when the adapter
// or model directory holds one (OpenModel's default). A checkpoint-N folder of a training run holds no tokenizer
// (the Trainer saves only the model and the training state there): for an adapter or model directory that is
// one, the run's output_dir above it is used, which tune finetune gives the tokenizer at the end of the run,
// and stderr says so. (Saving the tokenizer into every checkpoint, as transformers' Trainer does when given
// one, would also serve a checkpoint copied elsewhere or read while the run is still going; pass --tokenizer
// there.) Without any tokenizer it is a usage error asking for --tokenizer.
func checkModelPaths(stderr io.Writer, model, adapter, tokenizer string, forceBase bool) (string, error) {
	if err := checkDir("--model", model); err != nil {
		return "", err
	}
	hasWeights := isFile(filepath.Join(model, loaders.SafetensorsWeightsName)) ||
		isFile(filepath.Join(model, loaders.SafetensorsIndexName))
	switch {
	case recipes.HasAdapter(model) && !hasWeights:
		_, base, _ := lora.ReadAdapterConfig(model)
		hint := ""
		if base != "" {
			hint = fmt.Sprintf(" (its base_model_name_or_path is %s)", base)
		} else {
			hint = " (its adapter_config.json names none, base_model_name_or_path null: an adapter trained on a new " +
				"model (model.config), whose random base was never saved, cannot be evaluated; tune no longer trains one)"
		}
		return "", usagef("--model %s is a LoRA adapter directory: pass the base model it was trained on as --model%s and this directory as --adapter", model, hint)
	case !isFile(filepath.Join(model, loaders.ConfigName)):
		return "", usagef("--model %s has no %s: it is not a Hugging Face model directory (config.json and model.safetensors, as tune finetune writes)", model, loaders.ConfigName)
	case !hasWeights:
		hint := ""
		if h := loaders.OtherWeightsHint(model); h != "" {
			hint = "; " + h
		}
		return "", usagef("--model %s has no %s (nor %s): tune reads safetensors weights only%s", model, loaders.SafetensorsWeightsName, loaders.SafetensorsIndexName, hint)
	}
	if f, err := transformer.Lookup(model); err == nil && f.Name != "bert" {
		return "", usagef("--model %s is a %s causal language model (its config.json), not a sequence classifier: "+
			"tune eval, tune predict and tune debug read BERT sequence classifiers; continue text with tune generate --model %s, "+
			"and read its eval_loss in the training run's eval_results.json", model, f.Name, model)
	}
	if err := recipes.CheckModelConfig(model); err != nil {
		return "", usagef("--model %s: %s", model, errctx.Trim(err.Error()))
	}
	if adapter != "" {
		if err := checkDir("--adapter", adapter); err != nil {
			return "", err
		}
		if !recipes.HasAdapter(adapter) {
			return "", usagef("--adapter %s has no %s: it is not a PEFT adapter directory", adapter, lora.AdapterConfigName)
		}
		base, err := checkAdapterConfig(adapter)
		if err != nil {
			return "", err
		}
		if err := checkAdapterBase(stderr, model, adapter, base, forceBase); err != nil {
			return "", err
		}
	}
	if tokenizer != "" {
		if _, err := recipes.TokenizerFile(tokenizer); err != nil {
			return "", usagef("--tokenizer %s: %v", tokenizer, pathProblem(err))
		}
		return tokenizer, nil
	}
	// The adapter's tokenizer wins over the model's, as in OpenModel; a checkpoint's run stands in for it.
	for _, d := range []struct{ flag, dir string }{{"--adapter", adapter}, {"--model", model}} {
		switch run := checkpointRunDir(d.dir); {
		case d.dir == "":
		case hasTokenizerFile(d.dir):
			return "", nil
		case run != "" && hasTokenizerFile(run):
			fmt.Fprintf(stderr, "tune: using the tokenizer in %s: %s %s is a checkpoint of that training run, and checkpoints hold none\n", run, d.flag, d.dir)
			return run, nil
		}
	}
	where := "--model " + model
	if adapter != "" {
		where = "neither --adapter " + adapter + " nor " + where
	}
	return "", usagef("%s holds no tokenizer (neither tokenizer.json nor vocab.txt): pass --tokenizer with the model's tokenizer directory or file", where)
}

// defaultMaxLength is the truncation length eval and predict use without --max-length or a recipe: BERT
// tokenizers' model_max_length in transformers (512), or less when the model has fewer positions.
const defaultMaxLength = 512

// maxLength returns the truncation length for eval and predict on the model in dir: flag when set (refused,
// as a usage error, beyond the model's max_position_embeddings), else fallback (a recipe's data.max_length,
// or defaultMaxLength), capped at max_position_embeddings, so that eval and predict see the same tokens.
func maxLength(flag, fallback int, dir string) (int, error) {
	positions := 0
	if hf, err := loaders.ReadBertConfig(dir); err == nil {
		positions = hf.MaxPositionEmbeddings
	}
	switch {
	case flag < 0 || flag == 1 || flag == 2:
		// As the recipe's data.max_length: [CLS], at least one token of text, [SEP] (2 scored every row from
		// [CLS] [SEP] alone, the same logits for all).
		return 0, usagef("--max-length must be at least 3 ([CLS], one token, [SEP]), got %d", flag)
	case flag > 0 && positions > 0 && flag > positions:
		return 0, usagef("--max-length %d exceeds the model's max_position_embeddings %d (%s): give at most %d", flag, positions, filepath.Join(dir, loaders.ConfigName), positions)
	case flag > 0:
		return flag, nil
	case positions > 0 && fallback > positions:
		return positions, nil
	}
	return fallback, nil
}

// resolveHub returns what a flag's value names: the value itself when it exists or cannot be a Hub repository
// id (a missing local path is left for the caller's checks to report), else the id's snapshot in the Hugging
// Face cache at revision (hub.Resolve, as transformers' from_pretrained reads a name that is not a
// directory). An id missing from the cache is a usage error naming flag ("" for a positional argument), the cache
// and tune download.
func resolveHub(flag, value, revision string) (string, error) {
	if value == "" {
		return "", nil
	}
	p, err := hub.Resolve(value, revision)
	what := flag + " " + value // "--model evil/m"; a positional argument ("" flag) is named by its value alone
	if flag == "" {
		what = value
	}
	if nc := (*hub.NotCachedError)(nil); errors.As(err, &nc) && len(nc.Links) > 0 {
		return value, usagef("%s: %v", what, err) // a cache snapshot, by id or by path, lacks blobs
	}
	if hub.IsNotCached(err) {
		if near := nearbyPath(value); near != "" { // a mistyped local folder reads as a Hub id (tester 13)
			return value, usagef("%s: no such file or directory here (did you mean %s?), and %v", what, near, err)
		}
		return value, usagef("%s: no such file or directory here, and %v", what, err)
	}
	var pe *fs.PathError
	if err != nil && !errors.As(err, &pe) {
		// A damaged cache or an impossible --revision: the lookup's own message says what to do.
		return value, usagef("%s: %s", what, errctx.Trim(err.Error()))
	}
	if err != nil {
		return value, nil
	}
	return p, nil
}

// nearbyPath returns the entry of value's parent folder whose name is closest to value's last element (typo.Closest),
// when that folder exists here and value itself does not: "runs/tyni" gives "runs/tiny". "" otherwise.
func nearbyPath(value string) string {
	dir, name := filepath.Split(filepath.Clean(value))
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if c := typo.Closest(name, names); c != "" && c != name {
		return filepath.Join(filepath.Dir(filepath.Clean(value)), c)
	}
	return ""
}

// revisionFlagUsage is the help of the --revision flag of the commands that take Hub ids.
const revisionFlagUsage = "the branch, tag or commit of a Hub id given as a path (default main)"

// hasTokenizerFile reports whether recipes.TokenizerFile finds a tokenizer in dir.
func hasTokenizerFile(dir string) bool {
	_, err := recipes.TokenizerFile(dir)
	return err == nil
}

// checkpointRunDir returns the training run's output_dir when dir is one of its checkpoint folders
// (output_dir/checkpoint-<step>, as trainer.CheckpointPrefix names them), else "".
func checkpointRunDir(dir string) string {
	if dir == "" {
		return ""
	}
	abs, err := filepath.Abs(dir) // "." inside a checkpoint folder is one too
	if err != nil {
		return ""
	}
	step, ok := strings.CutPrefix(filepath.Base(abs), trainer.CheckpointPrefix)
	if !ok || step == "" || strings.Trim(step, "0123456789") != "" {
		return ""
	}
	return filepath.Join(dir, "..")
}

// checkDir reports, as a usage error naming flag, a path that does not exist or is not a directory.
func checkDir(flag, p string) error {
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return usagef("%s %s: %v", flag, p, pathProblem(err))
	case !st.IsDir():
		return usagef("%s %s is a file; it names a directory", flag, p)
	}
	return nil
}

// checkInputFile reports, as a usage error naming flag, a data file that does not exist or is a directory.
func checkInputFile(flag, p string) error {
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return usagef("%s %s: %v", flag, p, pathProblem(err))
	case st.IsDir():
		return usagef("%s %s is a directory; name a TSV, CSV or JSONL file", flag, p)
	}
	return nil
}

// checkDataFile is checkInputFile for a data file read by its format: format (--format, or a recipe's
// data.format) when set, else the extension must name one, or it is a usage error ending in how, what to do.
func checkDataFile(flag, p, format, how string) error {
	if err := checkInputFile(flag, p); err != nil {
		return err
	}
	if _, err := (&recipes.Data{Format: format}).FormatOf(p); err != nil {
		return usagef("%s %s: cannot tell the format from the extension %q; %s", flag, p, filepath.Ext(p), how)
	}
	return nil
}

// pathProblem says briefly why a path could not be used.
func pathProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}

// printNotices prints what loading the model noticed (unused checkpoint tensors, freshly initialised heads,
// adapter adjustments) as warnings on w.
func printNotices(w io.Writer, run *recipes.Run) {
	for _, n := range run.Notices {
		fmt.Fprintf(w, "tune: warning: %s\n", n)
	}
}

// openModel is recipes.OpenModel for eval, predict and debug: a tokenizer that does not fit the model (from
// --tokenizer or an adapter's directory) is bad usage (exit 2), as tune finetune and tune validate report it,
// and so is an adapter_config.json whose r disagrees with the adapter's weights.
func openModel(dir, adapterDir, tokenizerPath string, b tensor.Backend) (*recipes.Run, error) {
	run, err := recipes.OpenModel(dir, adapterDir, tokenizerPath, b)
	if errors.Is(err, recipes.ErrTokenizerMismatch) || errors.Is(err, lora.ErrRankMismatch) {
		return nil, usageError{err}
	}
	return run, err
}

// checkAdapterBase refuses, as bad usage, an adapter whose adapter_config.json names another base model than
// --model (baseMismatch): it would run, whenever the shapes fit, as a wrong model, and eval's metrics or
// predict's and generate's outputs would say nothing of the adapter. With --force-base (force: --model is a
// copy of that base under another name) it only warns on stderr. base is the adapter's
// base_model_name_or_path, as checkAdapterConfig read it.
func checkAdapterBase(stderr io.Writer, model, adapter, base string, force bool) error {
	w := baseMismatch(base, model, adapter)
	switch {
	case w == "":
		return nil
	case force:
		fmt.Fprintf(stderr, "tune: warning: %s (applying it anyway: --force-base)\n", w)
		return nil
	}
	return usagef("%s: an adapter on another base model runs whenever the shapes fit and gives a wrong model; pass "+
		"the base the adapter was trained on as --model, or --force-base if --model is a copy of that base under another name", w)
}

// forceBaseFlag registers --force-base, checkAdapterBase's switch, on the commands that apply an --adapter.
func forceBaseFlag(cmd *cobra.Command, p *bool) {
	cmd.Flags().BoolVar(p, "force-base", false, "apply --adapter even when its base_model_name_or_path names another model than --model (a copy of the base under another name)")
}

// checkAdapterConfig reads the adapter_config.json of the adapter directory dir: one that cannot be parsed or
// used (invalid JSON, named by line and column; another PEFT method) is bad usage (exit 2) naming --adapter, as
// a broken config.json of --model is. It returns the adapter's base_model_name_or_path.
func checkAdapterConfig(dir string) (base string, err error) {
	if _, base, err = lora.ReadAdapterConfig(dir); err != nil {
		return "", usagef("--adapter %s: %s", dir, errctx.Trim(err.Error()))
	}
	return base, nil
}
