package main

import (
	"errors"
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/gpt2"
	"github.com/tune-ml/tune/transformer/llama"
)

func init() { register(newInspectCmd) }

// inspectOptions holds `tune inspect`'s argument.
type inspectOptions struct {
	Path     string // a checkpoint directory, a .safetensors file, a shard index or a config.json, or a Hub id
	Revision string // --revision: the revision of a Hub id in Path
}

func newInspectCmd() *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show the tensors and config of a safetensors checkpoint or a LoRA adapter",
		Long: `inspect lists what a Hugging Face checkpoint holds without loading it: every tensor with its dtype,
shape and size in bytes, the totals (tensors, parameters, bytes), the safetensors __metadata__, and, when
a config.json is beside the weights, a summary of the model (type, hidden size, layers, heads, vocabulary,
labels) and a check of the tensor names against that config (missing, unexpected and mis-shaped tensors, and
weights not stored as F32, F16 or BF16,
with the renames tune applies: the bert. prefix, LayerNorm gamma/beta). A causal LM's config (model_type
llama, qwen2, qwen3, mistral or gpt2) is summarised with its own keys (heads and key/value heads, positions
and RoPE) and checked the same way; an unknown model_type is an error listing the supported ones. Weights
the config does not describe (more layers than the checkpoint holds, a missing or mis-shaped tensor other
than a classifier head tune initialises, a weight of an integer dtype) are reported after the tensors with the error eval, finetune or
generate would give, and inspect exits 2 (bad input), as they do; the layer count is compared first, so nothing is
listed or allocated by the config's sizes.

PATH is a checkpoint directory (model.safetensors or model.safetensors.index.json, plus config.json), a
single .safetensors file, a model.safetensors.index.json, or a config.json; or a Hub id (bert-base-uncased)
of a model in the Hugging Face cache (see tune download), at --revision. A directory with a config but no
weights (a tokenizer-and-config download) shows the config alone. A PEFT LoRA adapter directory (what a
LoRA run writes into its output_dir and checkpoint-N/: adapter_config.json and adapter_model.safetensors)
shows the adapter's tensors, a summary of adapter_config.json (r, lora_alpha, scaling, targets, saved
modules, base model) with the modules it adapts, and the base config saved beside it, if any. Every file
is validated as it is opened: a truncated or corrupt file is reported with its name and what is wrong. Only
the headers are read. A config.json tune cannot build a model from is bad input (exit 2), as in eval.`,
		Example: `  tune inspect ../bert-base-uncased
  tune inspect out/checkpoint-500/model.safetensors
  tune inspect runs/bert-lora/checkpoint-500
  tune inspect ~/models/bert-large/model.safetensors.index.json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("inspect takes one PATH (a checkpoint directory, .safetensors file or index), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Path = args[0]
			return o.run(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.Revision, "revision", "", revisionFlagUsage)
	return cmd
}

func (o *inspectOptions) run(w io.Writer) error {
	var err error
	if o.Path, err = resolveHub("", o.Path, o.Revision); err != nil {
		return err
	}
	st, err := os.Stat(o.Path)
	if err != nil {
		// A path that is not there is bad usage, as eval's and predict's (exit 2).
		return usagef("inspect %s: %s", o.Path, pathProblem(err))
	}
	weights, dir := o.Path, o.Path
	if !st.IsDir() {
		dir = filepath.Dir(o.Path)
	}
	if !st.IsDir() && filepath.Base(o.Path) == loaders.ConfigName {
		weights = dir
	}
	if recipes.HasAdapter(dir) && (st.IsDir() || filepath.Base(o.Path) == lora.AdapterConfigName ||
		filepath.Base(o.Path) == lora.AdapterWeightsName) {
		return inspectAdapter(w, dir)
	}
	configPath := filepath.Join(dir, loaders.ConfigName)
	var cfg *modelConfig
	var cfgErr error // reported after the tensors, which are worth seeing even with a broken config
	if _, err := os.Stat(configPath); err == nil {
		if cfg, cfgErr = readModelConfig(configPath); cfgErr != nil {
			cfgErr = usageError{cfgErr} // bad input, as a broken config.json given to eval is (exit 2)
		}
	}
	ck, err := loaders.OpenCheckpoint(weights)
	switch {
	case errors.Is(err, loaders.ErrNoWeights) && cfgErr != nil:
		return cfgErr
	case errors.Is(err, loaders.ErrNoWeights) && cfg != nil:
		fmt.Fprintf(w, "no weights: %s holds neither %s nor %s\n", dir, loaders.SafetensorsWeightsName, loaders.SafetensorsIndexName)
		if h := loaders.OtherWeightsHint(dir); h != "" {
			fmt.Fprintf(w, "  %s\n", h)
		}
	case err != nil:
		return err
	default:
		defer ck.Close()
		printTensors(w, ck)
		if f := ck.Metadata()["format"]; f == "tune-adamw" {
			// A checkpoint's optimizer.safetensors (AdamW's moments, by parameter): not model weights, so the
			// config.json beside it does not describe it.
			fmt.Fprintf(w, "\n%s holds a training run's optimizer state (format %s), not model weights: the config.json beside it is not checked against it\n", ck.Path, f)
			return nil
		}
	}
	if cfg != nil {
		fmt.Fprintln(w)
		if err := printConfig(w, configPath, cfg, ck); err != nil {
			return err
		}
	}
	return cfgErr
}

// inspectAdapter shows a PEFT LoRA adapter directory: its tensors, adapter_config.json and the modules it
// adapts, then the base config tune saves beside it (lora.Model.Save), without the name check against a full
// model, which the adapter's PEFT keys would fail. An adapter_config.json tune cannot use (another PEFT
// variant) is reported after the tensors, as a broken config.json is.
func inspectAdapter(w io.Writer, dir string) error {
	ck, err := loaders.OpenCheckpoint(filepath.Join(dir, lora.AdapterWeightsName))
	if err != nil {
		return fmt.Errorf("inspect: the adapter's weights: %w", err)
	}
	defer ck.Close()
	printTensors(w, ck)
	fmt.Fprintln(w)
	cfg, base, err := lora.ReadAdapterConfig(dir)
	if err != nil {
		return usageError{err} // as a broken config.json given to eval is (exit 2)
	}
	cfg.Normalize()
	adapted, kinds := 0, map[string]int{} // adapted modules, counted by their last name (query, value, ...)
	for _, name := range ck.Names() {
		if m, ok := strings.CutSuffix(name, ".lora_A.weight"); ok {
			adapted++
			kinds[m[strings.LastIndex(m, ".")+1:]]++
		}
	}
	if base == "" {
		base = "(not set)"
	}
	saved := "-"
	if len(cfg.ModulesToSave) > 0 {
		saved = strings.Join(cfg.ModulesToSave, ", ")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "adapter:\t%s (LoRA, %s)\n", filepath.Join(dir, lora.AdapterConfigName), orDash(cfg.TaskType))
	fmt.Fprintf(tw, "base model:\t%s\n", base)
	rs := ""
	if cfg.UseRSLoRA {
		rs = " (use_rslora: lora_alpha/√r)"
	}
	fmt.Fprintf(tw, "r:\t%d, lora_alpha %g, scaling %g%s, lora_dropout %g\n", cfg.R, cfg.LoraAlpha, cfg.Scaling(), rs, cfg.LoraDropout)
	fmt.Fprintf(tw, "target_modules:\t%s\n", cfg.Targets())
	fmt.Fprintf(tw, "adapted:\t%d modules (%s)\n", adapted, formatCounts(kinds))
	fmt.Fprintf(tw, "modules_to_save:\t%s\n", saved)
	fmt.Fprintf(tw, "bias:\t%s\n", cfg.Bias)
	tw.Flush()
	if err := lora.CheckWeightsRank(dir, cfg.R); err != nil { // what merge, eval and predict refuse
		fmt.Fprintf(w, "warning: %s\n", strings.TrimPrefix(err.Error(), "lora: "))
	}
	configPath := filepath.Join(dir, loaders.ConfigName)
	if _, err := os.Stat(configPath); err != nil {
		return nil
	}
	c, err := readModelConfig(configPath)
	if err != nil {
		return usageError{err}
	}
	fmt.Fprintln(w, "\nbase config saved with the adapter (its labels are the ones the adapter was trained with):")
	return printConfig(w, configPath, c, nil)
}

// modelConfig is a checkpoint's config.json as inspect shows it: a BERT config (with the tensor-name check
// against it), or the summary rows of another registered family's (a causal LM's).
type modelConfig struct {
	bert    *loaders.BertConfig
	summary [][2]string // rows of a non-BERT config: label, value
}

// readModelConfig reads the config.json at path as tune builds a model from it: the family its model_type
// names (transformer.Lookup; an unknown model_type is an error listing the supported ones), then that family's
// reader, whose error names the key and its value after the file. A BERT config is parsed by loaders and
// checked by BertConfigFromHF; printConfig relies on the check (it divides by num_attention_heads and lists
// num_hidden_layers layers of tensors).
func readModelConfig(path string) (*modelConfig, error) {
	dir := filepath.Dir(path)
	f, err := transformer.Lookup(dir)
	if err != nil {
		return nil, err
	}
	if f.Name != "bert" {
		rows, err := decoderSummary(dir, f.Name)
		if err != nil {
			return nil, err
		}
		return &modelConfig{summary: rows}, nil
	}
	c, err := loaders.ReadBertConfig(path)
	if err != nil {
		return nil, err
	}
	if _, err := bert.BertConfigFromHF(c); err != nil {
		return nil, &bert.ConfigFileError{Path: path, Err: err}
	}
	return &modelConfig{bert: c}, nil
}

// decoderSummary returns the summary rows of the config.json in dir of family name (llama: llama, qwen2,
// qwen3 and mistral; gpt2), read by the family's own ReadConfig. A family inspect has no summary for shows its
// name alone.
func decoderSummary(dir, name string) ([][2]string, error) {
	switch name {
	case "llama":
		c, err := llama.ReadConfig(dir)
		if err != nil {
			return nil, err
		}
		rope := c.Rope.Type
		if c.Rope.Type == llama.RopeLlama3 {
			rope = fmt.Sprintf("llama3 (factor %g over %d positions)", c.Rope.Factor, c.Rope.OriginalMaxPositionEmbeddings)
		}
		tied := ""
		if c.TieWordEmbeddings {
			tied = ", lm_head tied to embed_tokens"
		}
		return [][2]string{
			{"model_type", fmt.Sprintf("%s (%s, a causal LM)", c.ModelType, c.Architecture)},
			{"hidden", fmt.Sprintf("%d (%d query heads of %d, %d key/value heads), intermediate %d, silu", c.HiddenSize,
				c.NumAttentionHeads, c.HeadDim, c.NumKeyValueHeads, c.IntermediateSize)},
			{"layers", strconv.Itoa(c.NumHiddenLayers)},
			{"vocab", fmt.Sprintf("%d%s", c.VocabSize, tied)},
			{"positions", fmt.Sprintf("%d (max_position_embeddings), rope %s, rope_theta %g", c.MaxPositionEmbeddings, rope, c.RopeTheta)},
			{"parameters", commas(c.NumParameters())},
		}, nil
	case "gpt2":
		c, err := gpt2.ReadConfig(dir)
		if err != nil {
			return nil, err
		}
		tied := ""
		if c.TieWordEmbeddings {
			tied = ", lm_head tied to wte"
		}
		return [][2]string{
			{"model_type", "gpt2 (GPT2LMHeadModel, a causal LM)"},
			{"hidden", fmt.Sprintf("%d (%d heads of %d), inner %d, %s", c.NEmbd, c.NHead, c.HeadDim(), c.Inner(), c.ActivationFunc)},
			{"layers", strconv.Itoa(c.NLayer)},
			{"vocab", fmt.Sprintf("%d%s", c.VocabSize, tied)},
			{"positions", fmt.Sprintf("%d (n_positions, a learned table)", c.NPositions)},
		}, nil
	}
	return [][2]string{{"family", name}}, nil
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printTensors writes the checkpoint's files, metadata, tensor table and totals.
func printTensors(w io.Writer, ck *loaders.Checkpoint) {
	infos := ck.Infos()
	var fileBytes int64
	for _, f := range ck.Files() {
		if st, err := os.Stat(f); err == nil {
			fileBytes += st.Size()
		}
	}
	fmt.Fprintf(w, "checkpoint: %s\n", ck.Path)
	if ck.Index != nil {
		fmt.Fprintf(w, "shards:     %d files, %s bytes\n", len(ck.Files()), commas(fileBytes))
	} else {
		fmt.Fprintf(w, "file size:  %s bytes\n", commas(fileBytes))
	}
	fmt.Fprintf(w, "metadata:   %s\n\n", formatMetadata(ck.Metadata()))

	rows := [][4]string{{"NAME", "DTYPE", "SHAPE", "BYTES"}}
	var params, bytes int64
	dtypes := map[string]int{}
	for _, ti := range infos {
		rows = append(rows, [4]string{printable(ti.Name), printable(ti.DType), formatShape(ti.Shape), commas(ti.Bytes)})
		bytes += ti.Bytes
		dtypes[ti.DType]++
		if isFloatDType(ti.DType) {
			params += ti.NumElements()
		}
	}
	var width [4]int
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	for _, r := range rows { // text columns left-aligned, bytes right-aligned
		fmt.Fprintf(w, "%-*s  %-*s  %-*s  %*s\n", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3])
	}
	fmt.Fprintf(w, "\ntotal: %d tensors, %s parameters, %s bytes (%s)\n", len(infos), commas(params), commas(bytes), humanBytes(bytes))
	fmt.Fprintf(w, "dtypes: %s\n", formatCounts(dtypes))
	if ix := ck.Index; ix != nil && ix.TotalSize != 0 && ix.TotalSize != bytes {
		fmt.Fprintf(w, "note: the index's total_size is %s bytes, the shards hold %s\n", commas(ix.TotalSize), commas(bytes))
	}
}

// printConfig writes the model summary and, when ck is not nil, the check of the checkpoint's tensor names and
// shapes against the config, as the family's loader matches them before it builds the model
// (transformer.Check): a config.json that does not describe the weights (more layers than the checkpoint
// holds, a missing or mis-shaped tensor) is the loader's error, so inspect exits non-zero where eval,
// finetune or generate would refuse the checkpoint. The layer count is compared first: nothing is listed by
// the config's sizes.
func printConfig(w io.Writer, path string, mc *modelConfig, ck *loaders.Checkpoint) error {
	var report *transformer.LoadReport
	var checkErr error
	if ck != nil {
		report, checkErr = transformer.Check(filepath.Dir(path), ck)
	}
	if mc.bert == nil {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "config:\t%s\n", path)
		for _, r := range mc.summary {
			fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
		}
		tw.Flush()
		if report != nil {
			fmt.Fprintf(w, "\nnames checked against %s from config.json: %s\n", report.Architecture,
				strings.ReplaceAll(report.String(), "\n", "\n  "))
		}
		return checkErr
	}
	c := mc.bert
	arch := "-"
	if len(c.Architectures) > 0 {
		arch = strings.Join(c.Architectures, ", ")
	}
	labels := make([]string, c.NumLabels())
	for i := range labels {
		labels[i] = c.ID2Label[i]
	}
	problem := c.ProblemType
	if problem == "" {
		problem = "(not set: chosen from the labels on the first batch)"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "config:\t%s\n", path)
	fmt.Fprintf(tw, "model_type:\t%s (%s)\n", c.ModelType, arch)
	fmt.Fprintf(tw, "hidden:\t%d (%d heads of %d), intermediate %d, %s\n", c.HiddenSize, c.NumAttentionHeads, c.HiddenSize/c.NumAttentionHeads, c.IntermediateSize, c.HiddenAct)
	fmt.Fprintf(tw, "layers:\t%d\n", c.NumHiddenLayers)
	fmt.Fprintf(tw, "heads:\t%d\n", c.NumAttentionHeads)
	fmt.Fprintf(tw, "vocab:\t%d, %d positions, %d token types\n", c.VocabSize, c.MaxPositionEmbeddings, c.TypeVocabSize)
	fmt.Fprintf(tw, "labels:\t%d: %s\n", c.NumLabels(), strings.Join(labels, ", "))
	fmt.Fprintf(tw, "problem_type:\t%s\n", problem)
	tw.Flush()
	if ck == nil || report == nil || (c.ModelType != "bert" && c.ModelType != "") {
		return checkErr // no checkpoint, or one refused before its names were listed (the layer count)
	}
	expected, model := loaders.BertSequenceClassificationTensors(c), "BertForSequenceClassification"
	if slices.Contains(c.Architectures, "BertForMaskedLM") {
		expected, model = loaders.BertMaskedLMTensors(c), "BertForMaskedLM"
	}
	_, names := loaders.MapBertCheckpoint(expected, ck.Infos(), c)
	fmt.Fprintf(w, "\nnames checked against %s from config.json: %s\n", model, strings.ReplaceAll(names.String(), "\n", "\n  "))
	return checkErr
}

func isFloatDType(dt string) bool {
	return strings.HasPrefix(dt, "F") || dt == "BF16"
}

func formatShape(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// The most of a safetensors __metadata__ that inspect prints: a header may hold megabytes in one value (a
// 50 MB string was printed whole), while real metadata is a few short values ("format": "pt").
const (
	maxMetadataKeys     = 32  // keys shown; the rest are counted
	maxMetadataKeyBytes = 64  // bytes of a key shown
	maxMetadataValBytes = 200 // bytes of a value shown
)

// formatMetadata returns the metadata as sorted key="value" pairs, each key and value cut to a few hundred bytes
// with a note of its length, and at most maxMetadataKeys pairs with a count of the others.
func formatMetadata(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	shown := keys[:min(len(keys), maxMetadataKeys)]
	parts := make([]string, 0, len(shown)+1)
	for _, k := range shown {
		parts = append(parts, printable(clip(k, maxMetadataKeyBytes, false))+"="+clip(m[k], maxMetadataValBytes, true))
	}
	if more := len(keys) - len(shown); more > 0 {
		parts = append(parts, fmt.Sprintf("(and %d more keys)", more))
	}
	return strings.Join(parts, " ")
}

// printable returns s as it is when every character of it prints, else quoted as a Go string: a file's
// tensor names and metadata keys are the file's to choose, and one with a newline or a terminal escape
// ("\x1b[31m…") would break the table or recolour the user's terminal.
func printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// clip returns s, quoted when quote is true, cut to its first max bytes (at a character boundary) with a note
// of its length when it is longer: "xxxx…" (50,000,000 bytes, the first 200 shown).
func clip(s string, max int, quote bool) string {
	show := func(v string) string {
		if quote {
			return strconv.Quote(v)
		}
		return v
	}
	if len(s) <= max {
		return show(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%s bytes, the first %d shown)", show(s[:cut]), commas(int64(len(s))), cut)
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(keys, ", ")
}

// commas formats n with thousands separators (8,230,664).
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// humanBytes formats n in binary units (7.8 MiB).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", f, []string{"B", "KiB", "MiB", "GiB", "TiB"}[i])
}
