package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/chat"
	"github.com/tune-ml/tune/generate"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tokenizers"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/gpt2"  // registers model_type gpt2
	_ "github.com/tune-ml/tune/transformer/llama" // registers llama, qwen2, qwen3, mistral
)

func init() { register(newGenerateCmd) }

// generateOptions holds `tune generate`'s flags.
type generateOptions struct {
	Model, Adapter, Tokenizer, Revision string
	ForceBase                           bool // --force-base (checkAdapterBase)
	Prompt, System                      string
	Chat                                bool
	Device                              string
	MaxNewTokens                        int
	DoSample                            bool
	Temperature, TopP                   float64
	TopK                                int
	Seed                                uint64
	UseCache                            bool
	FP16, BF16                          bool // generate under FP16 / BF16 autocast (weights stay FP32)
}

func newGenerateCmd() *cobra.Command {
	o := &generateOptions{}
	cmd := &cobra.Command{
		Use:   "generate --model DIR [--adapter DIR] [--chat] [--prompt TEXT] [--max-new-tokens N] [--do-sample ...]",
		Short: "Continue a prompt with a causal language model, streaming the text",
		Long: `generate continues a prompt (--prompt, else all of standard input) with a causal language model and
streams the new text to standard output as it is generated.

With --chat the prompt is the user's message: the model's chat template (tokenizer_config.json or
chat_template.jinja) renders it, after an optional --system message, with the generation prompt, as
transformers' apply_chat_template(add_generation_prompt=True) does. Without --chat the prompt is encoded as
text, with the tokenizer's BOS where it adds one.

Greedy search unless --do-sample; generation stops after --max-new-tokens tokens or at an eos_token_id of the
model's generation_config.json. The defaults of --do-sample, --temperature, --top-k, --top-p and
--max-new-tokens are that file's (transformers' own defaults where it has none: greedy, 20 tokens,
temperature 1, top_k 50, top_p 1); flags given override them. --adapter adds a PEFT LoRA adapter (what a LoRA
run saves) on top of --model. Decoding keeps a key/value cache (use_cache): the prompt runs in one pass,
then each new token alone; --use-cache=false reruns the whole sequence for every token (the same tokens,
slower). --device picks the backend (auto: CUDA when the binary is built with it and a GPU is present);
--fp16 / --bf16 run the model under autocast in that dtype (the cache then holds that dtype).`,
		Example: `  tune generate --model runs/gpt2 --prompt "Once upon a time" --max-new-tokens 40
  tune generate --model Qwen/Qwen3-0.6B --chat --prompt "Name a colour." --do-sample --seed 1
  echo "def fib(n):" | tune generate --model runs/base --adapter runs/lora`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "the model directory (config.json, safetensors) or a Hub id (required)")
	f.StringVar(&o.Adapter, "adapter", "", "a PEFT LoRA adapter directory to apply on top of --model")
	forceBaseFlag(cmd, &o.ForceBase)
	f.StringVar(&o.Tokenizer, "tokenizer", "", "the tokenizer directory or tokenizer.json (default: the adapter's, else the model's)")
	f.StringVar(&o.Revision, "revision", "main", "the revision of Hub ids")
	f.StringVar(&o.Prompt, "prompt", "", "the prompt (default: all of standard input)")
	f.StringVar(&o.System, "system", "", "with --chat, a system message before the prompt")
	f.BoolVar(&o.Chat, "chat", false, "render the prompt as a user message with the chat template")
	f.StringVar(&o.Device, "device", "auto", "cpu, cuda, cuda:N or auto")
	f.IntVar(&o.MaxNewTokens, "max-new-tokens", 20, "the most tokens to generate (max_new_tokens)")
	f.BoolVar(&o.DoSample, "do-sample", false, "sample instead of greedy search")
	f.Float64Var(&o.Temperature, "temperature", 1, "sampling temperature")
	f.IntVar(&o.TopK, "top-k", 50, "sample from the k most likely tokens (0: all)")
	f.Float64Var(&o.TopP, "top-p", 1, "sample from the most likely tokens whose probability reaches p")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the sampling generator")
	f.BoolVar(&o.FP16, "fp16", false, "run under FP16 autocast (weights stay FP32)")
	f.BoolVar(&o.BF16, "bf16", false, "run under BF16 autocast (weights stay FP32)")
	f.BoolVar(&o.UseCache, "use-cache", true, "decode with a key/value cache (use_cache; default: generation_config.json's, else true)")
	return cmd
}

func (o *generateOptions) run(cmd *cobra.Command, stdin io.Reader, stdout io.Writer) error {
	if o.Model == "" {
		return usagef("--model is required")
	}
	if o.FP16 && o.BF16 {
		return usagef("--fp16 and --bf16 are exclusive")
	}
	if o.System != "" && !o.Chat {
		// Without --chat the prompt is plain text and there is no conversation to put a system message in.
		return usagef("--system needs --chat: the system message goes into the chat template's conversation")
	}
	model, err := resolveHub("--model", o.Model, o.Revision)
	if err != nil {
		return err
	}
	if st, err := os.Stat(model); err != nil || !st.IsDir() {
		return usagef("--model %s: not a model directory (config.json and safetensors weights)", o.Model)
	}
	if f, err := transformer.Lookup(model); err == nil && f.Name == "bert" {
		return usagef("--model %s is a BERT encoder (model_type bert in its config.json), not a causal language model: "+
			"generate continues text with a decoder (llama, mistral, qwen2, qwen3, gpt2); score a BERT model with tune predict", o.Model)
	}
	if _, err := transformer.ProjectionPaths(model); err != nil {
		// config.json as the family reads it, matched with the weights' headers (what tune validate checks for
		// model.path): a config tune cannot build is bad input, exit 2, as in finetune, validate and inspect.
		return usagef("%s", errctx.Trim(err.Error()))
	}
	adapter, err := resolveHub("--adapter", o.Adapter, o.Revision)
	if err != nil {
		return err
	}
	if adapter != "" {
		// As eval and merge check it: a missing path, or a directory that is not a PEFT adapter (a full
		// model given as --adapter), is bad usage naming --adapter, before the tokenizer is looked for in it.
		if err := checkDir("--adapter", adapter); err != nil {
			return err
		}
		if !recipes.HasAdapter(adapter) {
			return usagef("--adapter %s has no %s: it is not a PEFT adapter directory (a LoRA run's output_dir holds one)", o.Adapter, lora.AdapterConfigName)
		}
		base, err := checkAdapterConfig(adapter)
		if err != nil {
			return err
		}
		if err := checkAdapterBase(cmd.ErrOrStderr(), model, adapter, base, o.ForceBase); err != nil {
			return err
		}
	}
	tokPath, err := resolveHub("--tokenizer", o.Tokenizer, o.Revision)
	if err != nil {
		return err
	}
	if tokPath == "" {
		tokPath = model
		if adapter != "" {
			if _, err := os.Stat(filepath.Join(adapter, "tokenizer.json")); err == nil {
				tokPath = adapter
			}
		}
		// A checkpoint-N folder holds no tokenizer; its run's output_dir does (as eval and predict find it).
		if !isFile(filepath.Join(tokPath, "tokenizer.json")) {
			for _, d := range []struct{ flag, dir string }{{"--adapter", adapter}, {"--model", model}} {
				if run := checkpointRunDir(d.dir); run != "" && isFile(filepath.Join(run, "tokenizer.json")) {
					fmt.Fprintf(cmd.ErrOrStderr(), "tune: using the tokenizer in %s: %s %s is a checkpoint of that training run, and checkpoints hold none\n", run, d.flag, d.dir)
					tokPath = run
					break
				}
			}
		}
	}
	if typ, err := tokenizers.ModelType(tokPath); err != nil || typ != "BPE" {
		if err == nil {
			err = fmt.Errorf("%s has no byte-pair-encoding tokenizer.json (generate needs a decoder's tokenizer)", tokPath)
		}
		flag := "--tokenizer"
		if o.Tokenizer == "" {
			flag = "the tokenizer (no --tokenizer given)"
		}
		return usagef("%s: %s", flag, errctx.Trim(err.Error()))
	}
	tok, err := tokenizers.LoadForTransformers(tokPath)
	if err != nil {
		return err
	}
	if file, err := recipes.TokenizerFile(tokPath); err == nil {
		// A tokenizer with ids past the model's embedding: refused before the prompt, as finetune refuses it.
		if err := recipes.CheckCausalVocab(file, model); err != nil {
			return usagef("%s", errctx.Trim(err.Error()))
		}
	}
	cfg, err := tokenizers.LoadConfig(tokPath)
	if err != nil {
		return err
	}
	gc, err := generate.ReadConfig(model)
	if err == nil {
		err = gc.CheckVocab(configVocabSize(model))
	}
	if err != nil {
		return err
	}
	if len(gc.Unapplied) > 0 {
		// transformers' generate would apply these; tune's output then differs from it (greedy included).
		fmt.Fprintf(cmd.ErrOrStderr(), "tune: warning: %s sets %s, which tune generate does not apply: the text differs "+
			"from transformers' generate with that file (max_new_tokens, temperature, top_k, top_p, do_sample and "+
			"eos_token_id are applied)\n", gc.Path, strings.Join(gc.Unapplied, ", "))
	}
	opts := gc.Options()
	f := cmd.Flags()
	if f.Changed("max-new-tokens") {
		opts.MaxNewTokens = o.MaxNewTokens
	}
	if f.Changed("do-sample") {
		opts.DoSample = o.DoSample
	}
	if f.Changed("temperature") {
		opts.Temperature = o.Temperature
	}
	if f.Changed("top-k") {
		opts.TopK = o.TopK
	}
	if f.Changed("top-p") {
		opts.TopP = o.TopP
	}
	if f.Changed("use-cache") {
		opts.UseCache = o.UseCache
	}
	opts.Seed = o.Seed
	if err := opts.Check(); err != nil {
		if strings.HasSuffix(gc.Path, "generation_config.json") { // the defaults a flag did not replace come from it
			err = fmt.Errorf("%w (the options not given as flags come from %s; a flag overrides it)", err, gc.Path)
		}
		return usageError{err}
	}
	prompt, source := o.Prompt, "--prompt"
	limit, ctxLen := promptLimit(model)
	if !f.Changed("prompt") {
		b, err := io.ReadAll(io.LimitReader(stdin, limit+1)) // more would not fit the context anyway
		if err != nil {
			return err
		}
		prompt, source = string(b), "standard input"
	}
	if err := checkPromptUTF8(source, prompt); err != nil {
		return err
	}
	if err := checkPromptUTF8("--system", o.System); err != nil {
		return err
	}
	if n := len(prompt) + len(o.System); int64(n) > limit {
		return usagef("the prompt has more than %d bytes, which would not fit the model's context of %d tokens "+
			"(max_position_embeddings in %s) at %d bytes a token: %v; shorten the prompt",
			limit, ctxLen, filepath.Join(model, "config.json"), promptBytesPerToken, generate.ErrTooLong)
	}
	var ids []int32
	if o.Chat {
		tmpl, err := chat.FromConfig(cfg)
		if err != nil {
			return usagef("--chat: %v", err)
		}
		var msgs []chat.Message
		if o.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: o.System})
		}
		text, err := tmpl.Render(chat.Messages(append(msgs, chat.Message{Role: "user", Content: prompt})), chat.Options{AddGenerationPrompt: true})
		if err != nil {
			return err
		}
		if ids, err = tok.Encode(text, false); err != nil {
			return err
		}
	} else if ids, err = tok.Encode(prompt, true); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if len(ids) == 0 {
		return usagef("the prompt is empty")
	}
	b, err := openDevice(o.Device)
	if err != nil {
		return err
	}
	base, _, err := transformer.Open(model, b, transformer.LoadOptions{})
	if err != nil {
		return err
	}
	switch {
	case o.FP16:
		base.SetPolicy(amp.FP16)
	case o.BF16:
		base.SetPolicy(amp.BF16)
	}
	var lm generate.LM = base
	if adapter != "" {
		am, err := lora.LoadAdapter(base, adapter)
		if err != nil {
			return err
		}
		lm = am
	}
	emit, flush := generate.StreamText(stdout, tok, true)
	out, err := generate.Generate(lm, ids, opts, emit)
	if errors.Is(err, generate.ErrTooLong) {
		return usageError{err}
	} else if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if _, err = io.WriteString(stdout, "\n"); err != nil {
		return err
	}
	if len(out) == 1 && slices.Contains(opts.EOS, out[0]) {
		// An empty line alone does not say why: the model ended its answer at once.
		what := "the model"
		if adapter != "" {
			what = "the model with its adapter"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "tune: note: nothing was generated: the first new token was the end-of-sequence "+
			"token (id %d), so %s ends its answer at once; try another prompt%s, or --do-sample\n", out[0], what, chatHint(o.Chat))
	}
	return nil
}

// promptBytesPerToken bounds the bytes of prompt text one token of the context may hold, for promptLimit: the
// longest tokens of real vocabularies (runs of spaces or dashes) have a few dozen bytes.
const promptBytesPerToken = 64

// promptLimit is the most bytes of prompt generate reads and tokenizes for the model in dir, and the model's
// context (max_position_embeddings, or GPT-2's n_positions; 0 when config.json names none): promptBytesPerToken
// a position, at least the 1 MiB a data row may hold and at most 64 MiB. A longer prompt cannot fit the
// context; it was read whole and tokenized first (100 MB of stdin: 26 s and 5.7 GB, then out of memory).
func promptLimit(dir string) (int64, int) {
	var c struct {
		MaxPositionEmbeddings int `json:"max_position_embeddings"`
		NPositions            int `json:"n_positions"`
	}
	// Bounded, as every config.json read: the loaders have refused a larger one by the time this runs.
	if data, err := smallfile.Read(filepath.Join(dir, "config.json")); err == nil {
		_ = json.Unmarshal(data, &c)
	}
	ctx := max(c.MaxPositionEmbeddings, c.NPositions, 0)
	return min(max(int64(loaders.DefaultMaxRowBytes), int64(ctx)*promptBytesPerToken), 64<<20), ctx
}

// configVocabSize is config.json's vocab_size in dir, 0 when it names none (the family's loader has read and
// checked the file by the time it is asked).
func configVocabSize(dir string) int {
	var c struct {
		VocabSize int `json:"vocab_size"`
	}
	if data, err := smallfile.Read(filepath.Join(dir, "config.json")); err == nil {
		_ = json.Unmarshal(data, &c)
	}
	return c.VocabSize
}

// checkPromptUTF8 refuses text that is not valid UTF-8 (exit 2), naming where it came from (--prompt, --system
// or standard input) and the byte offset of the first bad byte in that text, before a chat template
// renders it (an offset into the rendered conversation would mean nothing to the user) or the tokenizer
// reads it.
func checkPromptUTF8(source, text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size <= 1 {
			return usagef("%s: invalid UTF-8 (byte 0x%02x at byte offset %d); the prompt must be UTF-8 "+
				"(convert with iconv -f WINDOWS-1252 -t UTF-8, or the text's encoding)", source, text[i], i)
		}
		i += size
	}
	return nil
}

// chatHint suggests --chat to a generate call without it (a chat model may answer only inside its template).
func chatHint(chat bool) string {
	if chat {
		return ""
	}
	return ", --chat for a chat model"
}
