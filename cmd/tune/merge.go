package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/hub"
	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

func init() { register(newMergeCmd) }

// mergeOptions holds `tune merge`'s flags.
type mergeOptions struct {
	Model   string // --model: the base checkpoint the adapter was trained on
	Adapter string // --adapter: the PEFT LoRA adapter directory
	Output  string // --output: the directory to create with the merged checkpoint
	// Revision is the revision of Hub ids given to --model and --adapter.
	Revision string
	// Force merges even when the adapter's base_model_name_or_path names another model than --model.
	Force bool
}

func newMergeCmd() *cobra.Command {
	o := &mergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge --model DIR --adapter DIR --output DIR",
		Short: "Merge a LoRA adapter into its base model and write a plain Hugging Face checkpoint",
		Long: `merge folds a PEFT LoRA adapter (adapter_config.json and adapter_model.safetensors, as tune finetune
writes for a LoRA recipe or PEFT's save_pretrained writes) into the base checkpoint it was trained on, as
PEFT's merge_and_unload does: every adapted weight becomes W + scaling·B·A, and the modules the adapter saved
whole (the classifier) replace the base's. Any family tune reads (BERT, Llama/Qwen2/Qwen3/Mistral, GPT-2 with
its fan_in_fan_out c_attn) is merged, chosen by the base's config.json model_type. The result is a full checkpoint in --output: config.json,
model.safetensors with transformers' tensor names, and the tokenizer files (from the adapter directory when it
has them, else from the model directory; merge warns when neither has one), which transformers' from_pretrained
and tune load with no missing or unexpected tensor.

--model and --adapter also take Hub ids of models in the Hugging Face cache (see tune download), at --revision.
--model must be the base the adapter was trained on: merge refuses when the adapter's
base_model_name_or_path names another directory or model (a merge onto another base succeeds whenever the shapes
fit and gives a wrong model; --force merges anyway, for a copy of the base under another name; tune writes the absolute path of the recipe's model.path
there, for an embedded recipe the copy of its data tune unpacked into the user's cache, which PEFT can load;
merging onto another copy of that model, such as the repository's recipes/data/tiny-chat, is no mismatch). The labels come from the config.json tune saves beside an adapter (id2label, label2id), else their
number from the adapter's classifier when it saved one. The merge runs on the CPU in FP32 (one small matrix
product per adapted module). --model and --adapter are only read. merge never overwrites: --output must be a
new or an empty directory; the checkpoint is written into a temporary directory beside it and renamed into
place, so a failed merge leaves nothing behind.`,
		Example: `  tune merge --model ../bert-base-uncased --adapter runs/bert --output runs/bert-merged
  tune eval --model runs/bert-merged --data dev.tsv
  tune merge --model Qwen/Qwen2.5-0.5B --adapter runs/qwen-lora --output runs/qwen-merged`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "the base checkpoint directory the adapter was trained on (required)")
	f.StringVar(&o.Adapter, "adapter", "", "the PEFT LoRA adapter directory (required)")
	f.StringVar(&o.Revision, "revision", "", revisionFlagUsage)
	f.StringVar(&o.Output, "output", "", "the directory to create with the merged checkpoint (required)")
	f.BoolVar(&o.Force, "force", false, "merge even when the adapter's base_model_name_or_path names another model than --model (a copy of the base under another name)")
	f.BoolVar(&o.Force, "force-base", false, "the same as --force (eval's, predict's, generate's and debug's name for it)")
	return cmd
}

// validate checks the flags and that the output may be written.
func (o *mergeOptions) validate() error {
	for _, f := range []struct{ name, v string }{{"--model", o.Model}, {"--adapter", o.Adapter}, {"--output", o.Output}} {
		if f.v == "" {
			return usagef("merge needs %s DIR", f.name)
		}
	}
	var err error
	if o.Model, err = resolveHub("--model", o.Model, o.Revision); err != nil {
		return err
	}
	if o.Adapter, err = resolveHub("--adapter", o.Adapter, o.Revision); err != nil {
		return err
	}
	st, err := os.Stat(o.Output)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return errctx.Wrap("merge", err)
	case !st.IsDir():
		return usagef("--output %s is a file; merge writes a new directory", o.Output)
	}
	ents, err := os.ReadDir(o.Output)
	if err != nil {
		return errctx.Wrap("merge", err)
	}
	if len(ents) > 0 {
		return usagef("--output %s is not empty; merge never overwrites: choose a new directory or remove it", o.Output)
	}
	return nil
}

func (o *mergeOptions) run(stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	if !isFile(filepath.Join(o.Adapter, lora.AdapterConfigName)) {
		return usagef("--adapter %s has no %s: it is not a PEFT adapter directory", o.Adapter, lora.AdapterConfigName)
	}
	if _, err := checkAdapterConfig(o.Adapter); err != nil {
		return err
	}
	var opts transformer.LoadOptions // a BERT's labels: the adapter's config.json's names, else its head's size
	var err error
	// A causal LM has no labels: a tune LoRA run's folder holds the run's config.json too (a Llama's), which
	// read as a BERT config would give the base two labels it cannot take.
	if f, ferr := transformer.Lookup(o.Model); ferr != nil || f.Name == "bert" {
		if opts.Labels, err = lora.SavedLabels(o.Adapter); err == nil && opts.Labels == nil {
			opts.NumLabels, err = lora.SavedNumLabels(o.Adapter)
		}
	}
	if err != nil {
		return errctx.Wrap("merge: --adapter", err)
	}
	bk := cpu.New()
	base, report, err := transformer.Open(o.Model, bk, opts) // the family config.json's model_type names
	if err != nil {
		return errctx.Wrap("merge: --model", err)
	}
	lm, err := lora.LoadAdapter(base, o.Adapter)
	if errors.Is(err, lora.ErrRankMismatch) {
		return usageError{errctx.Wrap("merge: --adapter", err)} // bad input, as a broken adapter_config.json is
	}
	if err != nil {
		return errctx.Wrap("merge: --adapter", err)
	}
	if n := report.UnusedNotice(o.Model); n != "" {
		fmt.Fprintln(stderr, "tune: warning:", n)
	}
	w := baseMismatch(lm.BaseModelNameOrPath, o.Model, o.Adapter)
	if w != "" {
		w += ": merging onto another base model succeeds whenever the shapes fit and gives a wrong model; pass the base the adapter was trained on"
	}
	if w != "" && o.Force {
		fmt.Fprintln(stderr, "tune: warning:", w, "(merging anyway: --force)")
	} else if w != "" {
		return usagef("merge: %s; if --model is a copy of that base under another name, pass --force", w)
	}
	for _, w := range lm.Warnings {
		fmt.Fprintln(stderr, "tune: warning:", w)
	}
	var fresh []string // initialised by LoadPretrained and not replaced by the adapter
	for _, name := range report.Initialized {
		if !strings.HasPrefix(name, "classifier.") || !slices.Contains(lm.SavedModules(), "classifier") {
			fresh = append(fresh, name)
		}
	}
	if len(fresh) > 0 {
		fmt.Fprintf(stderr, "tune: warning: %s lacks %s and the adapter does not provide them: the merged model has freshly initialised values there\n",
			o.Model, strings.Join(fresh, ", "))
	}
	if d := o.tokenizerDir(); d == "" {
		fmt.Fprintf(stderr, "tune: warning: neither %s nor %s holds a tokenizer (tokenizer.json or vocab.txt): the merged checkpoint will have none, and eval and predict will need --tokenizer\n", o.Adapter, o.Model)
	} else if tok, err := recipes.TokenizerFile(d); err == nil {
		// The merged checkpoint gets this tokenizer beside the base's config.json: one with ids past its
		// vocab_size would write a checkpoint that eval and predict refuse (a --force merge onto another base).
		if err := recipes.CheckCausalVocab(tok, o.Model); err != nil {
			return usagef("merge: %s; the merged checkpoint would carry that tokenizer beside --model's config.json: "+
				"merge the adapter onto the base it was trained on", strings.TrimPrefix(err.Error(), "recipes: "))
		}
	}
	cfg, targets := lm.Config(), lm.Targets()
	merged, err := lm.MergeAndUnload()
	if err != nil {
		return errctx.Wrap("merge", err)
	}
	written, err := o.write(merged)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "merged the adapter %s (%d LoRA modules, r %d, lora_alpha %g, scaling %g; saved modules %v) with the base model %s\n",
		o.Adapter, len(targets), cfg.R, cfg.LoraAlpha, cfg.Scaling(), lm.SavedModules(), o.Model)
	fmt.Fprintf(stdout, "wrote the merged checkpoint to %s: %s (%s and %s are unchanged)\n", o.Output, strings.Join(written, ", "), o.Model, o.Adapter)
	return nil
}

// baseMismatch returns what is wrong when the adapter's base_model_name_or_path (base) names another model than
// --model (model): an adapter applied to, or merged onto, the wrong base runs whenever the shapes fit and
// silently gives a wrong model (merge refuses it unless --force; eval, predict, generate and debug unless
// --force-base: checkAdapterBase).
// A relative base is tried against the working directory and the adapter directory (and its parent, for a
// checkpoint-N inside a run); when it names no existing directory (a Hub id, an embedded recipe's model.path
// as written, data/tiny-chat, or a path from another machine) the last path elements are compared. A path
// inside tune's unpacked copy of the embedded recipes (what such runs record) is taken as the recipe writes
// it (recipes.EmbeddedDataPath). An empty base (null) is not checked.
func baseMismatch(base, model, adapter string) string {
	if base == "" {
		return ""
	}
	if rel, ok := recipes.EmbeddedDataPath(base); ok {
		// An adapter from an embedded recipe names the copy tune unpacked into its cache; compare what the
		// recipe wrote, so that another copy of the same model (the repository's) is no mismatch.
		base = rel
	}
	mst, err := os.Stat(model)
	if err != nil {
		return ""
	}
	candidates := []string{base}
	if snap, err := hub.Resolve(base, ""); err == nil && snap != base { // a Hub id, as PEFT and tune write it
		candidates = append(candidates, snap)
	}
	if !filepath.IsAbs(base) {
		candidates = append(candidates, filepath.Join(adapter, base), filepath.Join(adapter, "..", base))
	}
	found := false
	for _, c := range candidates {
		st, err := os.Stat(c)
		if err != nil || !st.IsDir() {
			continue
		}
		if os.SameFile(st, mst) {
			return ""
		}
		found = true
	}
	abs, _ := filepath.Abs(model)
	if !found && filepath.Base(filepath.Clean(base)) == filepath.Base(abs) {
		return ""
	}
	return fmt.Sprintf("the adapter was trained on base_model_name_or_path %q (in %s), but --model is %s",
		base, filepath.Join(adapter, lora.AdapterConfigName), model)
}

// write saves the merged model and the tokenizer files into a temporary directory beside --output and renames it
// into place (atomicfile.Dir: an empty --output directory is replaced, anything else refused, so nothing a user
// wrote is lost); it returns the file names written.
func (o *mergeOptions) write(m lora.Base) (written []string, err error) {
	out := filepath.Clean(o.Output)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, errctx.Wrap("merge", err)
	}
	err = atomicfile.Dir(out, 0o755, func(tmp string) error {
		if err := m.Save(tmp); err != nil {
			return errctx.Wrap("saving the merged model", err)
		}
		tokDir := o.tokenizerDir()
		if tokDir == "" {
			return nil // run warned
		}
		return errctx.Wrap("saving the tokenizer", copyTokenizer(tokDir, tmp)) // the same files a saved model carries
	})
	if err != nil {
		return nil, errctx.Wrap("merge", err)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return nil, errctx.Wrap("merge", err)
	}
	for _, e := range ents {
		written = append(written, e.Name())
	}
	return written, nil
}

// tokenizerDir returns the directory whose tokenizer the merged checkpoint gets: the adapter's when it holds
// one, else the model's, else "" (the merged checkpoint then has none).
func (o *mergeOptions) tokenizerDir() string {
	for _, d := range []string{o.Adapter, o.Model} {
		if hasTokenizerFile(d) {
			return d
		}
	}
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
