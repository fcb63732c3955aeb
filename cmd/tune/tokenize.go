package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tokenizers"
)

func init() { register(newTokenizeCmd) }

// tokenizeOptions holds `tune tokenize`'s flags and argument.
type tokenizeOptions struct {
	Tokenizer  string // --tokenizer: tokenizer.json, vocab.txt or their directory, or a Hub id in the HF cache
	Revision   string // --revision: the revision of a Hub id in --tokenizer
	MaxLength  int    // --max-length: truncate to this many tokens (0: no truncation)
	Truncation string // --truncation: longest_first, only_first or only_second
	Pair       bool   // --pair: lines are text<TAB>pair
	File       string // input file; "" or "-" reads standard input
}

var truncationStrategies = map[string]loaders.TruncationStrategy{
	"longest_first": loaders.LongestFirst,
	"only_first":    loaders.OnlyFirst,
	"only_second":   loaders.OnlySecond,
}

func newTokenizeCmd() *cobra.Command {
	o := &tokenizeOptions{}
	cmd := &cobra.Command{
		Use:   "tokenize --tokenizer PATH [--max-length N] [--pair] [FILE]",
		Short: "Print the token ids of each input line, as Hugging Face tokenizers would",
		Long: `tokenize reads lines of text from FILE (or standard input when FILE is absent or "-") and prints one JSON
object per line with the ids a BERT-family model receives:

  {"input_ids":[101,7592,2088,102],"token_type_ids":[0,0,0,0],"attention_mask":[1,1,1,1]}

The ids are those of Hugging Face tokenizers for the same tokenizer.json (or vocab.txt), special tokens
included: normalization (lowercasing and accent stripping for uncased models), punctuation splitting,
WordPiece, [CLS] ... [SEP]. With --pair each line is "text<TAB>pair" and the pair is encoded as
[CLS] text [SEP] pair [SEP] with token_type_ids 1 for the second part. --max-length N truncates as
transformers' truncation=True does (longest_first for pairs; see --truncation). No padding is added.

A byte-pair-encoding tokenizer.json (GPT-2, Llama 2/3, Mistral, Qwen2/3, SmolLM2) prints the ids of
Hugging Face tokenizers for it, with what its post-processor adds (Llama 2's <s>, for instance):

  {"input_ids":[9906,1917],"attention_mask":[1,1]}

--max-length N keeps the first N ids (a pair: longest_first, as for BERT); --pair adds token_type_ids.
A line that is not valid UTF-8 is an error naming the file, the line and the byte offset.`,
		Example: `  echo "Hello, world!" | tune tokenize --tokenizer ../bert-base-uncased
  tune tokenize --tokenizer tokenizer.json --max-length 128 sentences.txt
  printf 'A man is eating.\tSomeone eats.\n' | tune tokenize --tokenizer vocab.txt --pair`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("tokenize reads one FILE (or standard input), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.File = args[0]
			}
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer.json, vocab.txt, or a directory holding one (required)")
	f.StringVar(&o.Revision, "revision", "", revisionFlagUsage)
	f.IntVar(&o.MaxLength, "max-length", 0, "truncate each encoding to at most N tokens, special tokens included (0: no truncation)")
	f.StringVar(&o.Truncation, "truncation", "longest_first", "which text of a pair to cut: longest_first, only_first or only_second")
	f.BoolVar(&o.Pair, "pair", false, "each line is text<TAB>pair, encoded as a sentence pair")
	return cmd
}

// encodeOptions validates the flags and returns the loaders options they mean.
func (o *tokenizeOptions) encodeOptions() (loaders.EncodeOptions, error) {
	if o.Tokenizer == "" {
		return loaders.EncodeOptions{}, usagef("--tokenizer is required (a tokenizer.json, vocab.txt or model directory)")
	}
	if o.MaxLength < 0 {
		return loaders.EncodeOptions{}, usagef("--max-length must be >= 0, got %d", o.MaxLength)
	}
	strategy, ok := truncationStrategies[o.Truncation]
	if !ok {
		return loaders.EncodeOptions{}, usagef("--truncation must be longest_first, only_first or only_second, got %q", o.Truncation)
	}
	return loaders.EncodeOptions{MaxLength: o.MaxLength, Truncation: strategy}, nil
}

// tokenizeLine is one output line.
type tokenizeLine struct {
	InputIDs      []int32 `json:"input_ids"`
	TokenTypeIDs  []int32 `json:"token_type_ids"`
	AttentionMask []int32 `json:"attention_mask"`
}

func (o *tokenizeOptions) run(stdin io.Reader, stdout io.Writer) error {
	opts, err := o.encodeOptions()
	if err != nil {
		return err
	}
	in, name := stdin, "standard input"
	if o.File != "" && o.File != "-" {
		// A FILE argument that cannot be opened is bad usage (exit 2), as a missing --tokenizer path is.
		f, err := os.Open(o.File)
		if err != nil {
			return usagef("FILE %s: %s", o.File, pathProblem(err))
		}
		defer f.Close()
		in, name = f, o.File
	}
	path, err := resolveHub("--tokenizer", o.Tokenizer, o.Revision)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return usagef("--tokenizer %s: %s", o.Tokenizer, pathProblem(err)) // as eval's and predict's (exit 2)
	}
	typ, err := tokenizers.ModelType(path)
	if err != nil {
		return err
	}
	var encode func(text string, pair *string) (*loaders.Encoding, error)
	if typ == "BPE" {
		bpe, err := tokenizers.Load(path)
		if err != nil {
			return err
		}
		encode = func(text string, pair *string) (*loaders.Encoding, error) { return encodeBPE(bpe, text, pair, opts) }
	} else {
		tok, err := loaders.LoadTokenizer(path)
		if err != nil {
			return err
		}
		encode = func(text string, pair *string) (*loaders.Encoding, error) {
			if pair != nil {
				return tok.EncodePair(text, *pair, opts)
			}
			return tok.Encode(text, opts)
		}
	}
	lr := loaders.NewLineReader(in, name, 0) // each line at most loaders.DefaultMaxRowBytes
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for {
		b, lineNo, readErr := lr.Next()
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			w.Flush()
			return readErr
		}
		line := string(b)
		var e *loaders.Encoding
		if o.Pair {
			fields := strings.Split(line, "\t")
			if len(fields) != 2 {
				return badinput.Errorf("%s:%d: --pair expects text<TAB>pair, got %d tab-separated fields", name, lineNo, len(fields))
			}
			e, err = encode(fields[0], &fields[1])
		} else {
			e, err = encode(line, nil)
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		var out any = tokenizeLine{nonNil(e.IDs), nonNil(e.TypeIDs), nonNil(e.AttentionMask)}
		if typ == "BPE" && !o.Pair {
			out = decoderLine{nonNil(e.IDs), nonNil(e.AttentionMask)}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return w.Flush()
}

// decoderLine is one output line of a BPE (decoder) tokenizer: transformers' model_input_names for them.
type decoderLine struct {
	InputIDs      []int32 `json:"input_ids"`
	AttentionMask []int32 `json:"attention_mask"`
}

// encodeBPE encodes a line (and its pair) with a BPE tokenizer. With opts.MaxLength the text is truncated
// before the post-processor adds its special tokens, to MaxLength less their number, as the library's
// encode with truncation does (a pair: longest_first, see truncatePair).
func encodeBPE(tok *tokenizers.Tokenizer, text string, pair *string, opts loaders.EncodeOptions) (*loaders.Encoding, error) {
	a, err := tok.Encode(text, false)
	if err != nil {
		return nil, err
	}
	var b []int32
	if pair != nil {
		if b, err = tok.Encode(*pair, false); err != nil {
			return nil, err
		}
	}
	if m := opts.MaxLength; m > 0 {
		budget := m - tok.NumSpecialTokens(pair != nil)
		if budget < 0 {
			return nil, fmt.Errorf("--max-length %d is shorter than the %d special tokens the tokenizer adds", m, m-budget)
		}
		if pair == nil {
			a = a[:min(len(a), budget)]
		} else {
			if opts.Truncation != loaders.LongestFirst {
				return nil, errors.New("--truncation only_first/only_second is implemented for WordPiece tokenizers; BPE pairs use longest_first")
			}
			a, b = truncatePair(a, b, budget)
		}
	}
	ids, types := tok.Process(a, b, pair != nil, true)
	e := &loaders.Encoding{IDs: ids, TypeIDs: types, AttentionMask: make([]int32, len(ids))}
	for i := range e.AttentionMask {
		e.AttentionMask[i] = 1
	}
	return e, nil
}

// truncatePair is the library's longest_first (utils/truncation.rs): with n1 the shorter length, the longer
// side is cut to max(n1, m-n1); if that still overflows both split m/2 and m/2 + m%2, the extra id to the
// longer (the second when equal).
func truncatePair(a, b []int32, m int) ([]int32, []int32) {
	if len(a)+len(b) <= m {
		return a, b
	}
	swap := len(a) > len(b)
	if swap {
		a, b = b, a
	}
	n1 := len(a)
	n2 := max(n1, m-n1)
	if n1+n2 > m {
		n1, n2 = m/2, m/2+m%2
	}
	a, b = a[:min(len(a), n1)], b[:min(len(b), n2)]
	if swap {
		a, b = b, a
	}
	return a, b
}

// nonNil makes an empty encoding print as [] rather than null.
func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}
