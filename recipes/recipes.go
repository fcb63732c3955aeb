package recipes

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tune-ml/tune/hub"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

//go:generate go run ../tools/maketiny -out data/tiny

// embedded holds the recipes and the tiny dataset, so `tune finetune tiny` works from any directory.
//
//go:embed *.yaml data/tiny data/tiny-chat
var embedded embed.FS

// Recipe is one decoded recipe. Its yaml keys are the recipe's sections.
type Recipe struct {
	// Model is what to train.
	Model Model `yaml:"model"`
	// Tokenizer is where the tokenizer comes from; its path defaults to Model.Path.
	Tokenizer Tokenizer `yaml:"tokenizer"`
	// Data is the labelled text and how to read it.
	Data Data `yaml:"data"`
	// LoRA, when the recipe has a lora: section (even an empty one, meaning PEFT's defaults), trains adapters
	// on the targeted Linears and keeps the base weights frozen; nil means full fine-tuning.
	LoRA *lora.Config `yaml:"lora,omitempty"`
	// Training holds Hugging Face's TrainingArguments, under their HF names.
	Training trainer.TrainingArguments `yaml:"training"`
	// Device is auto (CUDA when built with it and a GPU is present, else the CPU), cpu, cuda or cuda:N.
	Device string `yaml:"device"`

	// Source is the recipe's file, or "embedded:NAME" for an embedded recipe.
	Source string `yaml:"-"`
	// Warnings are the adjustments made while loading (lora.Config.Normalize), for the command to print.
	Warnings []string `yaml:"-"`

	// outside maps the input keys of an embedded recipe whose paths, as the recipe writes them, lie outside
	// what tune embeds (../checkpoints/bert-base-uncased) to those paths; overrides are not in it.
	outside map[string]string
	// hubIDs maps model.path and tokenizer.path, when they name a Hub repository found in the Hugging Face
	// cache, to that id (the path is then the snapshot directory); hubMissing, when the id is not cached, to
	// the hub.NotCachedError.
	hubIDs     map[string]string
	hubMissing map[string]error
}

// Model says which model to train: exactly one of Path and Config is set.
type Model struct {
	// Path is a Hugging Face checkpoint directory (config.json and model.safetensors), or a Hub repository id
	// (bert-base-uncased, google-bert/bert-base-uncased) found in the Hugging Face cache (see package hub;
	// tune download fetches one), as transformers' from_pretrained reads pretrained_model_name_or_path: a
	// path that exists is a directory, anything else an id.
	Path string `yaml:"path,omitempty"`
	// Revision is the branch, tag or commit of a Hub id in Path (and in the tokenizer's path), as
	// from_pretrained's revision; empty is "main". It is ignored for a local directory.
	Revision string `yaml:"revision,omitempty"`
	// NumLabels, when > 0, is the number of classes to fine-tune model.path with, as from_pretrained's
	// num_labels: a number other than the checkpoint's re-initialises the classifier (with a notice), as
	// transformers does with ignore_mismatched_sizes. Without it the training file's labels decide, as in
	// transformers' run_glue. For a new model, set model.config.num_labels instead.
	NumLabels int `yaml:"num_labels,omitempty"`
	// AttnImplementation is transformers' attn_implementation: "sdpa" (the default when empty) runs the fused
	// attention op, "eager" the two-pass reference path (see docs/ATTENTION.md). Under sdpa a shape the
	// backend's fused kernel does not cover runs eager, with a warning.
	AttnImplementation string `yaml:"attn_implementation,omitempty"`
	// Config builds a new BERT for sequence classification, initialised from training.seed.
	Config *ModelConfig `yaml:"config,omitempty"`
}

// Tokenizer says where the tokenizer is.
type Tokenizer struct {
	// Path is a directory holding tokenizer.json or vocab.txt, or one of those files, or a Hub repository id
	// in the Hugging Face cache (at model.revision). Empty means Model.Path.
	Path string `yaml:"path,omitempty"`
}

// Data describes the labelled text files and how examples become token sequences.
type Data struct {
	// Train, Eval and Test are data files; Eval is evaluated under training.eval_strategy, Test by `tune eval`.
	Train string `yaml:"train"`
	Eval  string `yaml:"eval,omitempty"`
	Test  string `yaml:"test,omitempty"`
	// Format is tsv, csv or jsonl; empty picks it from each file's extension (.tsv, .csv, .jsonl/.json).
	Format string `yaml:"format,omitempty"`
	// TextColumn holds the text (default "sentence", as in GLUE's SST-2); TextPairColumn an optional second
	// segment (token_type_ids 1); LabelColumn the label (default "label").
	TextColumn     string `yaml:"text_column,omitempty"`
	TextPairColumn string `yaml:"text_pair_column,omitempty"`
	LabelColumn    string `yaml:"label_column,omitempty"`
	// MaxLength truncates each example to this many tokens, [CLS] and [SEP] included. Default 128.
	MaxLength int `yaml:"max_length"`
	// PadToMultipleOf rounds each batch's padded length up to a multiple of it (8 suits Tensor Cores); 0 pads
	// to the longest example of the batch.
	PadToMultipleOf int `yaml:"pad_to_multiple_of,omitempty"`
	// GroupByLength batches examples of similar length together (less padding), as HF's group_by_length.
	GroupByLength bool `yaml:"group_by_length,omitempty"`

	// The keys below apply to causal LMs (IsCausalLM), whose data are JSONL in TRL's SFT formats (package sft);
	// the names are TRL SFTConfig's.

	// Packing packs several examples into each row, best-fit decreasing (TRL packing=True, "bfd").
	Packing bool `yaml:"packing,omitempty"`
	// AssistantOnlyLoss supervises only the assistant turns of "messages" data; unset means true here.
	AssistantOnlyLoss *bool `yaml:"assistant_only_loss,omitempty"`
	// CompletionOnlyLoss supervises only the completion of prompt-completion data; unset means true (TRL's).
	CompletionOnlyLoss *bool `yaml:"completion_only_loss,omitempty"`
	// DatasetTextField is the key of the text in {"text"} data ("text").
	DatasetTextField string `yaml:"dataset_text_field,omitempty"`
}

// Info describes one embedded recipe.
type Info struct {
	Name        string // "bert" for bert.yaml
	Description string // the first comment line, without the "# name: " prefix
	// Needs lists the input keys (model.path, tokenizer.path, data.train, data.eval, data.test, in that order)
	// whose files the recipe names outside what tune embeds, so a run must supply them as overrides; empty
	// means the recipe runs from any directory.
	Needs []string
}

// sectionDefaults gives the value an optional section starts from when the recipe has it: PEFT's LoraConfig
// defaults for lora:, BertConfig's defaults for model.config:.
var sectionDefaults = map[reflect.Type]func() reflect.Value{
	reflect.TypeFor[lora.Config](): func() reflect.Value {
		c := lora.DefaultConfig()
		return reflect.ValueOf(&c)
	},
	reflect.TypeFor[ModelConfig](): func() reflect.Value {
		c := DefaultModelConfig()
		return reflect.ValueOf(&c)
	},
}

// Default returns the values a recipe starts from before its file is read: transformers' TrainingArguments
// defaults, text_column "sentence", label_column "label", max_length 128, device auto.
func Default() Recipe {
	return Recipe{
		Data:     Data{TextColumn: "sentence", LabelColumn: "label", MaxLength: 128},
		Training: trainer.DefaultTrainingArguments(),
		Device:   "auto",
	}
}

// List returns the embedded recipes, sorted by name.
func List() []Info {
	names, _ := fs.Glob(embedded, "*.yaml")
	out := make([]Info, 0, len(names))
	for _, n := range names {
		data, _ := embedded.ReadFile(n)
		name := strings.TrimSuffix(n, ".yaml")
		info := Info{Name: name, Description: describe(data, name)}
		if r, err := Decode(data, "embedded:"+name, ".", nil); err == nil {
			info.Needs = r.outsideKeys()
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// describe returns a recipe's first comment line without "#" and a leading "name:".
func describe(data []byte, name string) string {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	s := strings.TrimSpace(strings.TrimPrefix(string(line), "#"))
	return strings.TrimSpace(strings.TrimPrefix(s, name+":"))
}

// Lookup returns the text of the embedded recipe name ("tiny" or "tiny.yaml").
func Lookup(name string) ([]byte, error) {
	data, err := embedded.ReadFile(strings.TrimSuffix(name, ".yaml") + ".yaml")
	if err != nil {
		names := make([]string, 0)
		for _, i := range List() {
			names = append(names, i.Name)
		}
		msg := fmt.Sprintf("recipes: no embedded recipe named %q (embedded: %s)", name, strings.Join(names, ", "))
		if c := closest(name, names); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		}
		return nil, notEmbeddedError{msg}
	}
	return data, nil
}

// notEmbeddedError is Lookup's error for a name no embedded recipe has: its own message (no "file does not
// exist" from the embedded file system), matching fs.ErrNotExist.
type notEmbeddedError struct{ msg string }

func (e notEmbeddedError) Error() string        { return e.msg }
func (e notEmbeddedError) Is(target error) bool { return target == fs.ErrNotExist }

// IsEmbeddedName reports whether ref names an embedded recipe rather than a file. A ref with a path separator
// is a file. A bare "name.yaml" is a file when it exists, else an embedded recipe when one has that name. A
// bare "name" is an embedded recipe unless only a file of that name exists.
func IsEmbeddedName(ref string) bool {
	if strings.ContainsRune(ref, '/') || strings.ContainsRune(ref, filepath.Separator) {
		return false
	}
	_, err := os.Stat(ref)
	// Something that is there but cannot be read (a symbolic-link loop) is a file, reported as itself.
	exists := err == nil || !errors.Is(err, fs.ErrNotExist)
	if ext := filepath.Ext(ref); ext == ".yaml" || ext == ".yml" {
		return !exists && embeddedExists(ref)
	}
	return embeddedExists(ref) || !exists
}

func embeddedExists(name string) bool {
	_, err := fs.Stat(embedded, strings.TrimSuffix(name, ".yaml")+".yaml")
	return err == nil
}

// Load reads the recipe ref (a file path, or the name of an embedded recipe), applies the key=value overrides,
// resolves relative paths and validates it. Every problem is reported at once, each a *Problem wrapping
// ErrInvalid. An embedded recipe's data files are unpacked into the user's cache directory (once per content),
// so its paths point at real files.
func Load(ref string, overrides []string) (*Recipe, error) {
	if IsEmbeddedName(ref) {
		data, err := Lookup(ref)
		if err != nil {
			return nil, err
		}
		dir, err := unpackEmbedded()
		if err != nil {
			return nil, err
		}
		return Decode(data, "embedded:"+strings.TrimSuffix(ref, ".yaml"), dir, overrides)
	}
	if st, err := os.Stat(ref); err == nil && st.IsDir() {
		return nil, &Problem{Pos: ref, Msg: "is a directory, not a recipe: name a YAML file in it, or an embedded recipe (tune ls)"}
	}
	data, err := readRecipe(ref)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			// A symbolic-link loop or a file that cannot be read: a recipe argument that does not work, as a
			// missing one is.
			reason := err
			var pe *fs.PathError
			if errors.As(err, &pe) {
				reason = pe.Err
			}
			return nil, &Problem{Pos: ref, Msg: "cannot read the recipe: " + reason.Error()}
		}
		return nil, fmt.Errorf("recipes: reading the recipe: %w%s", err, recipeHint(ref))
	}
	if len(data) > MaxRecipeBytes {
		return nil, &Problem{Pos: ref, Msg: fmt.Sprintf("is larger than %d bytes, which is not a recipe (a recipe "+
			"has a few KB): name the recipe's YAML file, or an embedded recipe (tune ls)", MaxRecipeBytes)}
	}
	return Decode(data, ref, filepath.Dir(ref), overrides)
}

// MaxRecipeBytes is the largest recipe file Load reads: 1 MiB, a few hundred times a real recipe. A larger file
// is refused before it is parsed (a 200 MB one, or a data or weights file named by mistake, took 1.1 GB to
// parse): memory follows the recipe, never the file.
const MaxRecipeBytes = 1 << 20

// readRecipe returns the content of the file at path, up to MaxRecipeBytes+1 bytes (more means too large).
func readRecipe(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxRecipeBytes+1))
}

// recipeHint suggests, for a recipe file ref that does not exist, the closest recipe file in its directory
// or the embedded recipe of its name: "; did you mean recipes/tiny.yaml?". "" when nothing is close.
func recipeHint(ref string) string {
	dir, base := filepath.Split(ref)
	var names []string
	if ents, err := os.ReadDir(filepath.Clean(dir + ".")); err == nil {
		for _, e := range ents {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
				names = append(names, e.Name())
			}
		}
	}
	if c := closest(base, names); c != "" {
		return fmt.Sprintf("; did you mean %s?", dir+c)
	}
	var embedded []string
	for _, i := range List() {
		embedded = append(embedded, i.Name+".yaml")
	}
	if c := closest(base, embedded); c != "" {
		return fmt.Sprintf("; did you mean the embedded recipe %s (tune ls)?", strings.TrimSuffix(c, ".yaml"))
	}
	return ""
}

// yamlProblem reports text that is not YAML, with yaml.v3's reason and, for a tab that indents a line (YAML
// allows only spaces there), what to do.
func yamlProblem(source string, data []byte, err error) *Problem {
	msg := "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil && line > 0 {
		if lines := strings.Split(string(data), "\n"); line <= len(lines) {
			if indent := lines[line-1][:len(lines[line-1])-len(strings.TrimLeft(lines[line-1], " \t"))]; strings.Contains(indent, "\t") {
				msg += "; line " + strconv.Itoa(line) + " is indented with a tab, and YAML indents with spaces only: replace the tab with spaces"
			}
		}
	}
	return &Problem{Pos: source, Msg: msg}
}

// Decode decodes recipe text: source names it in messages, dir is where its relative paths resolve. See Load.
func Decode(data []byte, source, dir string, overrides []string) (*Recipe, error) {
	d := newDecoder(source)
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlProblem(source, data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlProblem(source, data, err)
	case len(next.Content) > 0 && next.Content[0].ShortTag() != "!!null":
		return nil, &Problem{Pos: fmt.Sprintf("%s:%d", source, next.Content[0].Line),
			Msg: "a second YAML document starts here (after ---); a recipe is one document: merge it into the first or remove it"}
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if len(doc.Content) > 0 && doc.Content[0].ShortTag() != "!!null" {
		root = doc.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Problem{Pos: fmt.Sprintf("%s:%d", source, root.Line),
			Msg: "a recipe is a mapping of sections (model, tokenizer, data, lora, training, device)"}
	}
	for _, o := range overrides {
		d.applyOverride(root, o)
	}
	r := Default()
	r.Source = source
	d.decode(root, reflect.ValueOf(&r).Elem(), "")
	if len(d.problems) > 0 {
		return nil, errors.Join(d.problems...)
	}
	r.resolvePaths(dir, d.fromArgs)
	// An eval_strategy other than no implies do_eval, as TrainingArguments.__post_init__ sets it, so the
	// resolved recipe says what the run does (tester 13 read do_eval: false beside eval_strategy: epoch).
	r.Training.DoEval = r.Training.EvaluatesAtEnd()
	if r.LoRA != nil {
		// PEFT's adjustments for the model's module kind: GPT-2's projections are Conv1D, where fan_in_fan_out
		// must be true (warning and resetting it as for a Linear contradicted lora.Apply's note after it).
		r.Warnings = r.LoRA.NormalizeFor(r.conv1DModel())
	}
	if err := r.validate(d); err != nil {
		return nil, err
	}
	return &r, nil
}

// conv1DModel reports whether model.path is a checkpoint of a family whose projections are transformers'
// Conv1D modules (GPT-2), as lora.Apply tells from the model; false when config.json cannot tell yet.
func (r *Recipe) conv1DModel() bool {
	if r.Model.Path == "" {
		return false
	}
	f, err := transformer.Lookup(r.Model.Path)
	return err == nil && f.Name == "gpt2"
}

// resolvePaths joins dir to the relative input paths the recipe file wrote; paths from overrides stay relative
// to the working directory. Output paths (training.output_dir, resume_from_checkpoint) always are relative to
// the working directory, as in transformers.
// An embedded recipe's paths that leave the embedded tree are recorded in r.outside.
func (r *Recipe) resolvePaths(dir string, fromArgs map[string]bool) {
	r.Training.OutputDir = expandUser(r.Training.OutputDir)
	embedded := strings.HasPrefix(r.Source, "embedded:")
	written := map[string]string{}
	for _, in := range r.inputs() {
		p := in.path
		written[in.key] = *p
		if *p == "" || fromArgs[in.key] {
			continue
		}
		if clean := path.Clean(filepath.ToSlash(*p)); embedded && (filepath.IsAbs(*p) || clean == ".." || strings.HasPrefix(clean, "../")) {
			if r.outside == nil {
				r.outside = map[string]string{}
			}
			r.outside[in.key] = *p
		}
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	r.resolveHubIDs(written)
	if r.Tokenizer.Path == "" {
		r.Tokenizer.Path = r.Model.Path
	}
}

// expandUser replaces a leading "~" or "~/" of p by the home directory, as transformers' TrainingArguments
// expands output_dir (os.path.expanduser in __post_init__, transformers issue #10628): a shell leaves the "~" of
// training.output_dir=~/runs/x alone (it is not at the start of the word), and the run would otherwise write
// into a folder named "~" in the working directory, which a later rm -rf ~ removes with the home directory.
func expandUser(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	return filepath.Join(home, p[1:])
}

// resolveHubIDs replaces a model.path or tokenizer.path that is not on disk but is a Hub repository id by
// its snapshot in the Hugging Face cache (hub.Snapshot at model.revision), as transformers' from_pretrained
// does; written holds the values as given, before the recipe's directory was joined to them. An id missing
// from the cache keeps its path and is recorded for CheckFiles to report.
func (r *Recipe) resolveHubIDs(written map[string]string) {
	for _, in := range r.inputs()[:2] {
		id := written[in.key]
		if id == "" {
			continue
		}
		if _, err := os.Stat(*in.path); err == nil || !hub.LooksLikeRepoID(id) {
			continue
		}
		snap, err := hub.Snapshot(hub.CacheDir(), id, r.Model.Revision)
		if err != nil {
			if r.hubMissing == nil {
				r.hubMissing = map[string]error{}
			}
			r.hubMissing[in.key] = err
			continue
		}
		if r.hubIDs == nil {
			r.hubIDs = map[string]string{}
		}
		r.hubIDs[in.key] = id
		*in.path = snap
	}
}

// HubID returns the Hub repository id that key ("model.path" or "tokenizer.path") named, when it was
// resolved in the Hugging Face cache, else "".
func (r *Recipe) HubID(key string) string { return r.hubIDs[key] }

// BaseModelNameOrPath is the name a LoRA run records as its adapter's base_model_name_or_path, what PEFT's
// from_pretrained needs to load the base: the Hub id when model.path named one (HubID), as PEFT records it;
// otherwise model.path made absolute, so that the adapter names its base wherever it is used from. For an
// embedded recipe that is the copy of its data tune unpacked into the user's cache
// (<cache>/tune/recipes-<hash>/data/tiny-chat): the recipe's own "data/tiny-chat" would be resolved against
// the working directory by PEFT and name nothing. tune merge compares --model with it, taking a path inside
// the unpacked copy as the recipe writes it (EmbeddedDataPath), so merging onto the repository's copy of the
// same model is not a mismatch.
func (r *Recipe) BaseModelNameOrPath() (string, error) {
	if id := r.HubID("model.path"); id != "" {
		return id, nil
	}
	return absPath(r.Model.Path)
}

// EmbeddedDataPath reports whether p lies in a copy of the embedded recipes' data that tune unpacked into the
// user's cache (unpackEmbedded: <cache>/tune/recipes-<hash>/), and returns its path relative to that copy as
// the embedded recipes write it ("data/tiny-chat"), for comparing such an adapter's base with --model.
func EmbeddedDataPath(p string) (string, bool) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	if !filepath.IsAbs(p) {
		return "", false
	}
	rel, err := filepath.Rel(filepath.Join(base, "tune"), filepath.Clean(p))
	if err != nil {
		return "", false
	}
	first, rest, ok := strings.Cut(filepath.ToSlash(rel), "/")
	if !ok || rest == "" || !strings.HasPrefix(first, "recipes-") {
		return "", false
	}
	return rest, true
}

// inputs lists the recipe's input path fields with their keys, in a fixed order.
func (r *Recipe) inputs() []struct {
	key  string
	path *string
} {
	return []struct {
		key  string
		path *string
	}{
		{"model.path", &r.Model.Path}, {"tokenizer.path", &r.Tokenizer.Path},
		{"data.train", &r.Data.Train}, {"data.eval", &r.Data.Eval}, {"data.test", &r.Data.Test},
	}
}

// outsideKeys returns the keys of r.outside in the order of inputs.
func (r *Recipe) outsideKeys() []string {
	var keys []string
	for _, in := range r.inputs() {
		if _, ok := r.outside[in.key]; ok {
			keys = append(keys, in.key)
		}
	}
	return keys
}

// Marshal returns the resolved recipe as YAML (what `tune validate` prints). An embedded recipe's paths that
// lie outside what tune embeds are written as the recipe writes them: resolved against the hidden copy of the
// embedded data they named folders that never exist (tune validate --no-files bert printed
// /root/.cache/shared/data/sst2/train.tsv). A causal LM's recipe (printsAsCausalLM) is written without the
// sequence-classification keys data.text_column and data.label_column, which its data do not have: printed
// with their defaults (sentence, label), they looked like settings of the run, and the printed recipe failed
// validation ("does not apply to causal-LM (SFT) data").
func (r *Recipe) Marshal() ([]byte, error) {
	c := *r
	if r.printsAsCausalLM() {
		c.Data.TextColumn, c.Data.LabelColumn = "", ""
	}
	for _, in := range c.inputs() {
		if written, ok := r.outside[in.key]; ok {
			if in.key == "model.path" && c.Tokenizer.Path == r.Model.Path {
				c.Tokenizer.Path = written // tokenizer.path defaults to model.path
			}
			*in.path = written
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("recipes: encoding the recipe: %w", err)
	}
	return b.Bytes(), enc.Close()
}

// printsAsCausalLM reports whether Marshal writes r as a causal LM's recipe: model.path's config.json names a
// decoder (IsCausalLM), or, when it cannot be read (the checkpoint is not there yet: validate --no-files
// llama-lora), the recipe says so itself: lora.task_type CAUSAL_LM, or a key only causal-LM (SFT) data have.
func (r *Recipe) printsAsCausalLM() bool {
	if r.IsCausalLM() {
		return true
	}
	if r.Model.Path == "" {
		return false // model.config: a new BERT
	}
	if _, err := transformer.Lookup(r.Model.Path); err == nil {
		return false // a BERT checkpoint
	}
	d := r.Data
	return (r.LoRA != nil && r.LoRA.TaskType == "CAUSAL_LM") || d.Packing || d.AssistantOnlyLoss != nil ||
		d.CompletionOnlyLoss != nil || d.DatasetTextField != ""
}

// EmbeddedFiles returns the embedded files (slash paths relative to the recipes directory, e.g.
// "data/tiny/train.tsv") that recipe name's relative input paths point at, for `tune cp` to copy beside it.
func EmbeddedFiles(name string) ([]string, error) {
	data, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	r, err := Decode(data, "embedded:"+name, ".", nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range []string{r.Model.Path, r.Tokenizer.Path, r.Data.Train, r.Data.Eval, r.Data.Test} {
		p = path.Clean(filepath.ToSlash(p))
		if p == "." || strings.HasPrefix(p, "../") {
			continue
		}
		_ = fs.WalkDir(embedded, p, func(f string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && !slices.Contains(out, f) {
				out = append(out, f)
			}
			return nil
		})
	}
	slices.Sort(out)
	return out, nil
}

// ReadEmbedded returns the content of an embedded file named by EmbeddedFiles.
func ReadEmbedded(name string) ([]byte, error) { return embedded.ReadFile(name) }
