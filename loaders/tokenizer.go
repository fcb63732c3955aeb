package loaders

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	sugartok "github.com/sugarme/tokenizer"

	"github.com/tune-ml/tune/internal/badinput"
)

// Tokenizer turns text into token ids exactly as Hugging Face tokenizers 0.23 does for BERT-family WordPiece
// tokenizers (bert-base-uncased and its cased, multilingual and domain variants). Load one with LoadTokenizer.
//
// Where each step comes from:
//   - tokenizer.json / vocab.txt reading and the WordPiece model (greedy longest-match-first with "##"
//     continuation, max_input_chars_per_word counted in characters): github.com/sugarme/tokenizer
//     (model/wordpiece), built with validated parameters so that it never calls log.Fatal or panics;
//   - added-token matching (tokenizer_added.go), the BERT normalizer (normalizer.go), the BERT pre-tokenizer
//     (pretokenizer.go), truncation, the template post-processor and padding (this file): tune's own code,
//     because sugarme v0.3.0 differs from Hugging Face there (github.com/sugarme/tokenizer v0.3.0's source lists the differences).
//
// A Tokenizer is safe for concurrent use: encoding reads it and never writes it.
type Tokenizer struct {
	normalizer   *BertNormalizer // nil: no normalizer
	preTokenize  bool            // BertPreTokenizer; false: each normalized piece is one word
	model        wordPiece
	added        addedVocab
	post         *postProcessor // nil: no special tokens are added
	vocabSize    int
	padID        int32
	padTypeID    int32
	padToken     string
	padKnown     bool   // padID/padToken name a real token
	padFrom      string // where padToken was set ("tokenizer_config.json's pad_token"); "" for the default [PAD]
	configPath   string // the tokenizer_config.json beside the tokenizer file, which may not exist
	maxModelLen  int    // tokenizer_config.json model_max_length; 0 when unknown
	source       string
	tokenToID    map[string]int32
	addedByToken map[string]AddedToken
	// chunkable: a long text may be tokenized in pieces cut at whitespace (encodeBounded), because the
	// pre-tokenizer splits there and no added token holds or strips whitespace.
	chunkable bool
}

// wordPiece is the part of sugarme's wordpiece.WordPiece that Tokenizer uses.
type wordPiece interface {
	Tokenize(word string) ([]sugartok.Token, error)
}

// TruncationStrategy says which sequence of a pair loses tokens; the names are HF's.
type TruncationStrategy int

const (
	// LongestFirst (HF "longest_first", transformers' truncation=True) cuts the longer sequence of a pair down
	// to max(n_short, M-n_short) and, if that is not enough, both to M/2 (the extra token of an odd M goes to
	// the longer one, to the second when equal); M is max_length less the special tokens.
	LongestFirst TruncationStrategy = iota
	// OnlyFirst cuts only the first sequence; an error when that is not enough.
	OnlyFirst
	// OnlySecond cuts only the second sequence of a pair; an error when that is not enough or there is no pair.
	OnlySecond
)

// Side is the side where tokens are removed (truncation) or pads are added (padding).
type Side int

const (
	// Right cuts or pads at the end (HF's default, and BERT's).
	Right Side = iota
	// Left cuts or pads at the start.
	Left
)

// PaddingStrategy chooses the padded length.
type PaddingStrategy int

const (
	// NoPadding leaves every encoding at its own length.
	NoPadding PaddingStrategy = iota
	// PadLongest pads to the longest encoding of the batch (HF padding=True / "longest").
	PadLongest
	// PadMaxLength pads to EncodeOptions.MaxLength (HF padding="max_length"); it never truncates.
	PadMaxLength
)

// EncodeOptions are the per-call settings of Encode, EncodePair and EncodeBatch. The zero value is HF's
// default call: special tokens added, no truncation, no padding.
type EncodeOptions struct {
	// NoSpecialTokens leaves out [CLS]/[SEP] (HF add_special_tokens=False).
	NoSpecialTokens bool
	// MaxLength truncates each encoding to at most this many tokens, special tokens included; 0 means no
	// truncation. It is also the target of PadMaxLength.
	MaxLength int
	// Truncation is the strategy for pairs (single sequences are simply cut); LongestFirst by default.
	Truncation TruncationStrategy
	// TruncationSide is where tokens are removed; Right by default.
	TruncationSide Side
	// Padding chooses the padded length; NoPadding by default.
	Padding PaddingStrategy
	// PadToMultipleOf rounds the padded length up to a multiple of this (e.g. 8 for Tensor Cores); 0 or 1: off.
	// It applies only when Padding is not NoPadding, as in HF.
	PadToMultipleOf int
	// PaddingSide is where pads go; Right by default.
	PaddingSide Side
}

// Encoding is one encoded input, all slices of the same length T (tokens, special tokens and padding).
type Encoding struct {
	IDs               []int32  // token ids
	TypeIDs           []int32  // segment ids: 0 for [CLS] A [SEP], 1 for B [SEP] of a pair, pad_type_id for pads
	AttentionMask     []int32  // 1 for real tokens, 0 for padding
	SpecialTokensMask []int32  // 1 for tokens added by the post-processor and for padding, 0 for text tokens
	Offsets           [][2]int // [start, end) in Unicode code points of the input it came from; (0,0) for added specials and pads
	Tokens            []string // the vocabulary strings ("##ing", "[UNK]", "[CLS]", ...)
}

// Len returns the number of positions T.
func (e *Encoding) Len() int { return len(e.IDs) }

func (e *Encoding) appendToken(id, typeID, special int32, off [2]int, tok string) {
	e.IDs = append(e.IDs, id)
	e.TypeIDs = append(e.TypeIDs, typeID)
	e.AttentionMask = append(e.AttentionMask, 1)
	e.SpecialTokensMask = append(e.SpecialTokensMask, special)
	e.Offsets = append(e.Offsets, off)
	e.Tokens = append(e.Tokens, tok)
}

// Input is one element of a batch: a text and, for sentence-pair tasks, its second text.
type Input struct {
	Text string  // the first (or only) sequence, raw: the tokenizer normalizes it
	Pair *string // nil for a single sequence; a pointer to "" is an empty second sequence
}

// ErrTruncation is returned (wrapped) when the requested truncation cannot be satisfied.
var ErrTruncation = errors.New("loaders: truncation impossible")

// Encode encodes one text.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) (*Encoding, error) {
	encs, err := t.EncodeBatch([]Input{{Text: text}}, opts)
	if err != nil {
		return nil, err
	}
	return encs[0], nil
}

// EncodePair encodes a sentence pair (text, pair): [CLS] text [SEP] pair [SEP] for BERT.
func (t *Tokenizer) EncodePair(text, pair string, opts EncodeOptions) (*Encoding, error) {
	encs, err := t.EncodeBatch([]Input{{Text: text, Pair: &pair}}, opts)
	if err != nil {
		return nil, err
	}
	return encs[0], nil
}

// EncodeBatch encodes every input with opts; with PadLongest all encodings are padded to the longest one.
// Errors name the index of the input. A panic inside a dependency is recovered and returned as an error.
func (t *Tokenizer) EncodeBatch(inputs []Input, opts EncodeOptions) (encs []*Encoding, err error) {
	defer func() {
		if r := recover(); r != nil {
			encs, err = nil, fmt.Errorf("loaders: tokenizer %s: internal error while encoding: %v", t.source, r)
		}
	}()
	if err := t.checkOptions(opts); err != nil {
		return nil, err
	}
	encs = make([]*Encoding, len(inputs))
	longest := 0
	for i, in := range inputs {
		e, err := t.encodeOne(in, opts)
		if err != nil {
			if len(inputs) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("loaders: batch input %d: %w", i, err)
		}
		encs[i] = e
		longest = max(longest, e.Len())
	}
	if opts.Padding != NoPadding {
		target := longest
		if opts.Padding == PadMaxLength {
			target = opts.MaxLength
		}
		if m := opts.PadToMultipleOf; m > 1 && target%m != 0 {
			target += m - target%m
		}
		for _, e := range encs {
			t.pad(e, target, opts.PaddingSide)
		}
	}
	return encs, nil
}

func (t *Tokenizer) checkOptions(opts EncodeOptions) error {
	switch {
	case opts.MaxLength < 0:
		return fmt.Errorf("loaders: max_length %d is negative; use 0 for no truncation", opts.MaxLength)
	case opts.PadToMultipleOf < 0:
		return fmt.Errorf("loaders: pad_to_multiple_of %d is negative", opts.PadToMultipleOf)
	case opts.Padding == PadMaxLength && opts.MaxLength == 0:
		return errors.New(`loaders: padding "max_length" needs max_length > 0`)
	case opts.Padding != NoPadding && !t.padKnown:
		return t.noPadError()
	case opts.Truncation < LongestFirst || opts.Truncation > OnlySecond:
		return fmt.Errorf("loaders: unknown truncation strategy %d", opts.Truncation)
	}
	return nil
}

// encodeOne runs the pipeline for one input: added tokens, normalizer, pre-tokenizer and model on each
// sequence, then truncation, then the post-processor (HF tokenizer/mod.rs encode + post_process). With
// MaxLength, a long sequence is tokenized in pieces and only the tokens truncation can keep are held
// (encodeBounded), so memory follows max_length, not the length of the text; the ids are the same.
func (t *Tokenizer) encodeOne(in Input, opts EncodeOptions) (*Encoding, error) {
	addSpecial := !opts.NoSpecialTokens && t.post != nil
	keep := -1 // tokens of each sequence to hold; -1: all
	if opts.MaxLength > 0 {
		keep = opts.MaxLength
		if addSpecial {
			n := t.post.numSpecial(in.Pair != nil)
			if keep < n {
				return nil, fmt.Errorf("%w: max_length %d is smaller than the %d special tokens", ErrTruncation, opts.MaxLength, n)
			}
			keep -= n
		}
	}
	a, na, err := t.encodeBounded(in.Text, keep, opts.TruncationSide, in.Pair == nil)
	if err != nil {
		return nil, err
	}
	var b *Encoding
	nb := 0
	if in.Pair != nil {
		if b, nb, err = t.encodeBounded(*in.Pair, keep, opts.TruncationSide, false); err != nil {
			return nil, err
		}
	}
	if keep >= 0 {
		if err := truncatePair(a, b, na, nb, keep, opts.Truncation, opts.TruncationSide); err != nil {
			return nil, err
		}
	}
	return t.postProcess(a, b, addSpecial), nil
}

// chunkBytes is the size of the pieces encodeBounded tokenizes a long text in.
const chunkBytes = 8 << 10

// encodeBounded tokenizes text like encodeSequence but holds at most keep tokens (keep < 0: all): the first
// ones for side Right, the last ones for Left. It returns them with the number of tokens of the whole text,
// except that with single (a sequence without a pair, cut from the Right) it stops once keep+1 tokens are seen:
// truncation then only needs to know that there are more than keep. Only a tokenizer whose pipeline is
// local between whitespace (t.chunkable) is cut into pieces; a piece ends before a run of ASCII whitespace, where
// the BERT normalizer and pre-tokenizer split words anyway, so the tokens and offsets are those of the whole
// text.
func (t *Tokenizer) encodeBounded(text string, keep int, side Side, single bool) (*Encoding, int, error) {
	if keep < 0 || !t.chunkable || len(text) <= chunkBytes {
		e, err := t.encodeSequence(text, 0)
		if err != nil {
			return nil, 0, err
		}
		return e, e.Len(), nil
	}
	e := &Encoding{}
	count, base := 0, 0
	for len(text) > 0 {
		cut := chunkEnd(text, chunkBytes)
		piece := text[:cut]
		text = text[cut:]
		if side == Right && e.Len() >= keep && !single {
			c, err := t.encodeSequence(piece, base) // counted only
			if err != nil {
				return nil, 0, err
			}
			count += c.Len()
			base += utf8.RuneCountInString(piece)
			continue
		}
		c, err := t.encodeSequence(piece, base)
		if err != nil {
			return nil, 0, err
		}
		base += utf8.RuneCountInString(piece)
		count += c.Len()
		*e = concatEncodings(e, c)
		if e.Len() > keep {
			if side == Right && single {
				e.truncate(keep+1, Right)
				return e, keep + 1, nil
			}
			e.truncate(keep, side)
		}
	}
	return e, count, nil
}

// chunkEnd returns where the first piece of text of about n bytes ends: at the start of the last run of ASCII
// whitespace that begins inside text[:n], else at the first run after it, else at the end of text.
func chunkEnd(text string, n int) int {
	if len(text) <= n {
		return len(text)
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for i := n; i > 0; i-- {
		if isSpace(text[i]) && !isSpace(text[i-1]) {
			return i
		}
	}
	for i := n + 1; i < len(text); i++ {
		if isSpace(text[i]) && !isSpace(text[i-1]) {
			return i
		}
	}
	return len(text)
}

// encodeSequence tokenizes one text, whose first code point is at position base of the input, without special
// tokens; every type id is 0.
func (t *Tokenizer) encodeSequence(text string, base int) (*Encoding, error) {
	e := &Encoding{}
	for _, piece := range splitAdded(newNormalized(text, base), t.added.raw) {
		if piece.tok != nil {
			t.appendAdded(e, piece)
			continue
		}
		n := piece.text
		if t.normalizer != nil {
			n = t.normalizer.normalize(n)
		}
		for _, sub := range splitAdded(n, t.added.norm) {
			if sub.tok != nil {
				t.appendAdded(e, sub)
				continue
			}
			if err := t.appendWords(e, sub.text); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

func (t *Tokenizer) appendAdded(e *Encoding, s addedSplit) {
	off := [2]int{}
	if len(s.text.orig) > 0 {
		off = [2]int{s.text.orig[0][0], s.text.orig[len(s.text.orig)-1][1]}
	}
	e.appendToken(s.tok.ID, 0, 0, off, string(s.text.runes))
}

// appendWords pre-tokenizes n and runs WordPiece on every word; token offsets are mapped back to the original
// text through n's alignments (first character's start, last character's end, as HF's convert_offsets).
func (t *Tokenizer) appendWords(e *Encoding, n normalized) error {
	var words [][2]int
	if t.preTokenize {
		words = bertPreTokenize(n.runes, nil)
	} else if len(n.runes) > 0 {
		words = [][2]int{{0, len(n.runes)}}
	}
	for _, w := range words {
		toks, err := t.model.Tokenize(string(n.runes[w[0]:w[1]]))
		if err != nil {
			return fmt.Errorf("loaders: tokenizer %s: WordPiece: %w", t.source, err)
		}
		for _, tk := range toks {
			if len(tk.Offsets) != 2 || tk.Offsets[0] < 0 || tk.Offsets[0] >= tk.Offsets[1] || w[0]+tk.Offsets[1] > w[1] {
				return fmt.Errorf("loaders: tokenizer %s: WordPiece returned offsets %v for a word of %d characters", t.source, tk.Offsets, w[1]-w[0])
			}
			s, end := w[0]+tk.Offsets[0], w[0]+tk.Offsets[1]
			e.appendToken(int32(tk.Id), 0, 0, [2]int{n.orig[s][0], n.orig[end-1][1]}, tk.Value)
		}
	}
	return nil
}

// truncatePair applies HF's truncate_encodings (tokenizers/src/utils/truncation.rs) with max tokens for the
// text sequences (special tokens already subtracted). b is nil for a single sequence. na and nb are the
// sequences' token counts, which may exceed what a and b hold (encodeBounded keeps only the tokens that can
// survive).
func truncatePair(a, b *Encoding, na, nb, max int, strategy TruncationStrategy, side Side) error {
	total := na
	if b != nil {
		total += nb
	}
	if total <= max {
		return nil
	}
	if max == 0 { // HF special-cases max_length 0: everything goes, whatever the strategy
		a.truncate(0, side)
		if b != nil {
			b.truncate(0, side)
		}
		return nil
	}
	toRemove := total - max
	switch {
	case strategy == LongestFirst && b != nil:
		n1, n2 := na, nb
		swap := n1 > n2
		if swap {
			n1, n2 = n2, n1
		}
		if n1 > max {
			n2 = n1
		} else {
			n2 = maxInt(n1, max-n1)
		}
		if n1+n2 > max {
			n1 = max / 2
			n2 = n1 + max%2
		}
		if swap {
			n1, n2 = n2, n1
		}
		a.truncate(n1, side)
		b.truncate(n2, side)
	case strategy == LongestFirst:
		a.truncate(max, side)
	case strategy == OnlyFirst:
		if na <= toRemove {
			return fmt.Errorf("%w: the first sequence has %d tokens and %d must go (only_first)", ErrTruncation, na, toRemove)
		}
		a.truncate(na-toRemove, side)
	default: // OnlySecond
		if b == nil {
			return fmt.Errorf("%w: only_second needs a sentence pair", ErrTruncation)
		}
		if nb <= toRemove {
			return fmt.Errorf("%w: the second sequence has %d tokens and %d must go (only_second)", ErrTruncation, nb, toRemove)
		}
		b.truncate(nb-toRemove, side)
	}
	return nil
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// truncate keeps n positions, dropping from the end (Right) or the start (Left).
func (e *Encoding) truncate(n int, side Side) {
	if n >= e.Len() {
		return
	}
	lo, hi := 0, n
	if side == Left {
		lo, hi = e.Len()-n, e.Len()
	}
	e.IDs = e.IDs[lo:hi:hi]
	e.TypeIDs = e.TypeIDs[lo:hi:hi]
	e.AttentionMask = e.AttentionMask[lo:hi:hi]
	e.SpecialTokensMask = e.SpecialTokensMask[lo:hi:hi]
	e.Offsets = e.Offsets[lo:hi:hi]
	e.Tokens = e.Tokens[lo:hi:hi]
}

// pad extends e to length target with the pad token (HF utils/padding.rs): id pad_id, type pad_type_id,
// attention 0, special_tokens_mask 1, offsets (0,0). It never truncates.
func (t *Tokenizer) pad(e *Encoding, target int, side Side) {
	n := target - e.Len()
	if n <= 0 {
		return
	}
	p := &Encoding{}
	for range n {
		p.appendToken(t.padID, t.padTypeID, 1, [2]int{}, t.padToken)
	}
	for i := range p.AttentionMask {
		p.AttentionMask[i] = 0
	}
	if side == Left {
		*e = concatEncodings(p, e)
		return
	}
	*e = concatEncodings(e, p)
}

func concatEncodings(a, b *Encoding) Encoding {
	return Encoding{
		IDs:               append(append([]int32{}, a.IDs...), b.IDs...),
		TypeIDs:           append(append([]int32{}, a.TypeIDs...), b.TypeIDs...),
		AttentionMask:     append(append([]int32{}, a.AttentionMask...), b.AttentionMask...),
		SpecialTokensMask: append(append([]int32{}, a.SpecialTokensMask...), b.SpecialTokensMask...),
		Offsets:           append(append([][2]int{}, a.Offsets...), b.Offsets...),
		Tokens:            append(append([]string{}, a.Tokens...), b.Tokens...),
	}
}

// VocabSize returns the number of ids: the model vocabulary plus added tokens outside it (HF get_vocab_size
// with added tokens).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenToID returns the id of a vocabulary or added token.
func (t *Tokenizer) TokenToID(token string) (int32, bool) {
	if a, ok := t.addedByToken[token]; ok {
		return a.ID, true
	}
	id, ok := t.tokenToID[token]
	return id, ok
}

// PadError returns nil when the tokenizer has a padding token (PadID's ok), else a bad-input error naming the
// pad token, the file that set it (tokenizer_config.json's pad_token, tokenizer.json's padding.pad_token, or
// neither: the default "[PAD]") and the file to change.
func (t *Tokenizer) PadError() error {
	if t.padKnown {
		return nil
	}
	return t.noPadError()
}

// noPadError is PadError's error.
func (t *Tokenizer) noPadError() error {
	if t.padFrom == "" {
		return badinput.Errorf("loaders: tokenizer %s has no padding token: it sets no pad_token, and the default %q is "+
			"not in its vocabulary; set \"pad_token\" in %s to a token of the vocabulary (BERT's is %q), or use the "+
			"model's own tokenizer", t.source, t.padToken, t.padFile(), "[PAD]")
	}
	return badinput.Errorf("loaders: tokenizer %s has no padding token: pad_token %q (%s) is not in its "+
		"vocabulary; set it in %s to a token of the vocabulary (BERT's is %q), or use the model's own tokenizer",
		t.source, t.padToken, t.padFrom, t.padFile(), "[PAD]")
}

// padFile is the file that set the pad token: tokenizer.json (its padding section) or tokenizer_config.json.
func (t *Tokenizer) padFile() string {
	switch {
	case strings.HasPrefix(t.padFrom, "tokenizer.json"):
		return t.source
	case t.configPath == "":
		return "the tokenizer_config.json beside it"
	}
	return t.configPath
}

// PadID returns the id used for padding (tokenizer.json padding.pad_id, else the pad_token of
// tokenizer_config.json, else [PAD]); ok is false when the tokenizer has no padding token.
func (t *Tokenizer) PadID() (id int32, ok bool) { return t.padID, t.padKnown }

// ModelMaxLength returns tokenizer_config.json's model_max_length (512 for BERT), or 0 when it is absent or
// is transformers' "no limit" sentinel.
func (t *Tokenizer) ModelMaxLength() int { return t.maxModelLen }

// AddedTokens returns the added tokens (special tokens such as [CLS] and [MASK] included), sorted by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, 0, len(t.addedByToken))
	for _, a := range t.addedByToken {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Source returns the file the tokenizer was loaded from.
func (t *Tokenizer) Source() string { return t.source }
