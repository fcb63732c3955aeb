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

	"github.com/tune-ml/tune/loaders"
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
transformers' truncation=True does (longest_first for pairs; see --truncation). No padding is added.`,
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
	path, err := resolveHub("--tokenizer", o.Tokenizer, o.Revision)
	if err != nil {
		return err
	}
	tok, err := loaders.LoadTokenizer(path)
	if err != nil {
		return err
	}
	in, name := stdin, "standard input"
	if o.File != "" && o.File != "-" {
		f, err := os.Open(o.File)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, o.File
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
				return fmt.Errorf("%s:%d: --pair expects text<TAB>pair, got %d tab-separated fields", name, lineNo, len(fields))
			}
			e, err = tok.EncodePair(fields[0], fields[1], opts)
		} else {
			e, err = tok.Encode(line, opts)
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		out := tokenizeLine{nonNil(e.IDs), nonNil(e.TypeIDs), nonNil(e.AttentionMask)}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return w.Flush()
}

// nonNil makes an empty encoding print as [] rather than null.
func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}
