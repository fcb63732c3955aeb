package tokenizers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"unicode/utf8"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
)

// Tokenizer is a BPE tokenizer read from a tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	source  string
	norm    normalizer
	pre     preTokenizer
	model   *bpe
	post    postProcessor
	dec     decoder
	added   []*addedToken
	raw     *addedMatcher // tokens with "normalized": false, matched on the raw text
	normed  *addedMatcher // tokens with "normalized": true, matched after normalization
	idToTok []string      // "" for ids nothing names
	special map[int32]bool
	byText  map[string]*addedToken
	rebuilt string // what LoadForTransformers changed
}

// ErrInvalidUTF8 is returned (wrapped) by Encode for text that is not valid UTF-8.
var ErrInvalidUTF8 = errors.New("text is not valid UTF-8")

// MaxIDGap is how many ids beyond twice the number of tokens a tokenizer.json may leave unnamed: tune's id
// table has a slot per id up to the largest (16 bytes each), so one token with id 1,000,000,000 among 757
// would take 16 GB.
const MaxIDGap = 1 << 20

// Load reads a tokenizer.json, or the tokenizer.json inside a directory.
func Load(path string) (*Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := smallfile.ReadCapped(path, smallfile.MaxTokenizerBytes, "a tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("tokenizers: %w", err)
	}
	return Parse(data, path)
}

// Parse builds a Tokenizer from the contents of a tokenizer.json; name is used in errors.
func Parse(data []byte, name string) (*Tokenizer, error) {
	t, err := parse(data)
	if err != nil {
		return nil, badinput.Errorf("tokenizers: %s: %w", name, err) // the file must change (exit 2)
	}
	t.source = name
	return t, nil
}

func parse(data []byte) (*Tokenizer, error) {
	var j fileJSON
	if err := strict(data, &j, "top level"); err != nil {
		return nil, err
	}
	if isNull(j.Model) {
		return nil, errors.New("no \"model\"")
	}
	t := &Tokenizer{special: map[int32]bool{}, byText: map[string]*addedToken{}}
	var err error
	if t.model, err = parseBPE(j.Model, "model"); err != nil {
		return nil, err
	}
	if t.norm, err = parseNormalizer(j.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(j.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	if t.post, err = parsePostProcessor(j.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	if t.dec, err = parseDecoder(j.Decoder, "decoder"); err != nil {
		return nil, err
	}
	size := 0
	for _, id := range t.model.vocab {
		size = max(size, int(id)+1)
	}
	for i, a := range j.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("added_tokens[%d]: negative id %d", i, a.ID)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		if len(a.Content) > MaxAddedTokenBytes {
			return nil, fmt.Errorf("added_tokens[%d]: the content has %d bytes, more than the %d tune matches "+
				"(real added tokens have a few dozen)", i, len(a.Content), MaxAddedTokenBytes)
		}
		tok := &addedToken{id: a.ID, content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip,
			rstrip: a.RStrip, normalized: a.Normalized, special: a.Special}
		t.added = append(t.added, tok)
		t.byText[a.Content] = tok
		size = max(size, int(a.ID)+1)
		if a.Special {
			t.special[a.ID] = true
		}
	}
	if entries := len(t.model.vocab) + len(t.added); size > 2*entries+MaxIDGap {
		return nil, fmt.Errorf("the largest token id is %d but model.vocab and added_tokens hold %d tokens: tune keeps a "+
			"table of every id up to the largest, and refuses ids that leave more than %d of it empty (a real "+
			"tokenizer's ids are dense); renumber the tokens 0..%d", size-1, entries, entries+MaxIDGap, entries-1)
	}
	t.idToTok = make([]string, size)
	for s, id := range t.model.vocab {
		if id < 0 {
			return nil, fmt.Errorf("model.vocab: token %q has negative id %d", s, id)
		}
		t.idToTok[id] = s
	}
	for _, a := range t.added {
		t.idToTok[a.id] = a.content
	}
	if err := t.checkTemplates(t.post); err != nil {
		return nil, err
	}
	var rawToks, normToks []*addedToken
	for _, a := range t.added {
		if a.normalized {
			normToks = append(normToks, a)
		} else {
			rawToks = append(rawToks, a)
		}
	}
	t.raw = newAddedMatcher(rawToks, func(a *addedToken) string { return a.content })
	var normErr error
	t.normed = newAddedMatcher(normToks, func(a *addedToken) string {
		if t.norm == nil {
			return a.content
		}
		s, err := normalizeText(t.norm, a.content)
		if err != nil && normErr == nil {
			normErr = fmt.Errorf("added token %q: %w", a.content, err)
		}
		return s
	})
	if normErr != nil {
		return nil, normErr
	}
	return t, nil
}

// checkTemplates checks that every special token a TemplateProcessing adds is in the vocabulary with its id.
func (t *Tokenizer) checkTemplates(p postProcessor) error {
	var pieces []templatePiece
	switch p := p.(type) {
	case postTemplate:
		pieces = append(append(pieces, p.single...), p.pair...)
	case postSequence:
		for _, q := range p {
			if err := t.checkTemplates(q); err != nil {
				return err
			}
		}
	}
	for _, pc := range pieces {
		for i, id := range pc.special {
			tok, ok := t.Token(id)
			if !ok {
				return fmt.Errorf("%s: id %d is not in the vocabulary (model.vocab or added_tokens)", pc.where, id)
			}
			if tok != pc.tokens[i] {
				return fmt.Errorf("%s: id %d is %q in the vocabulary, not %q", pc.where, id, tok, pc.tokens[i])
			}
		}
	}
	return nil
}

// Source is the path (or name) the tokenizer was read from.
func (t *Tokenizer) Source() string { return t.source }

// VocabSize is one more than the largest id of the vocabulary and the added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.idToTok) }

// TokenID returns the id of a token string (an added token or a vocabulary entry).
func (t *Tokenizer) TokenID(tok string) (int32, bool) {
	if a, ok := t.byText[tok]; ok {
		return a.id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// Token returns the string of an id ("" and false for an id nothing names).
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.idToTok) || t.idToTok[id] == "" {
		return "", false
	}
	return t.idToTok[id], true
}

// IsSpecial reports whether id is an added token marked "special" (what skip_special_tokens leaves out).
func (t *Tokenizer) IsSpecial(id int32) bool { return t.special[id] }

// SpecialTokens lists the special added tokens, by id.
func (t *Tokenizer) SpecialTokens() []string {
	var out []*addedToken
	for _, a := range t.added {
		if a.special {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	s := make([]string, len(out))
	for i, a := range out {
		s[i] = a.content
	}
	return s
}

// Encode returns the ids of text; addSpecial adds what the post-processor adds (BOS/EOS), as the library's
// add_special_tokens=True does.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int32, error) {
	a, err := t.encodeSequence(text)
	if err != nil {
		return nil, err
	}
	ids, _ := t.process(a, nil, false, addSpecial)
	return ids, nil
}

// EncodePair encodes a sentence pair and returns the ids and type ids.
func (t *Tokenizer) EncodePair(text, pair string, addSpecial bool) (ids, typeIDs []int32, err error) {
	a, err := t.encodeSequence(text)
	if err != nil {
		return nil, nil, err
	}
	b, err := t.encodeSequence(pair)
	if err != nil {
		return nil, nil, fmt.Errorf("pair: %w", err)
	}
	ids, typeIDs = t.process(a, b, true, addSpecial)
	return ids, typeIDs, nil
}

// Process is the post-processor alone: it joins the ids of a text (and of its pair) as Encode and EncodePair
// do, adding special tokens when addSpecial, and returns the ids and type ids. Callers that truncate encode
// without special tokens, cut, and then call Process.
func (t *Tokenizer) Process(a, b []int32, pair, addSpecial bool) (ids, typeIDs []int32) {
	return t.process(a, b, pair, addSpecial)
}

// NumSpecialTokens is how many ids the post-processor adds to a single sequence (or a pair).
func (t *Tokenizer) NumSpecialTokens(pair bool) int {
	ids, _ := t.process(nil, nil, pair, true)
	return len(ids)
}

func (t *Tokenizer) process(a, b []int32, pair, addSpecial bool) ([]int32, []int32) {
	if t.post == nil {
		return defaultProcess(a, b, pair)
	}
	return t.post.process(a, b, pair, addSpecial)
}

// encodeSequence is encode_single_sequence without the post-processor. A limit a normalizer or a regex passes
// (limitError) is an error naming the tokenizer file, bad input.
func (t *Tokenizer) encodeSequence(text string) (ids []int32, err error) {
	defer func() {
		if r := recover(); r != nil {
			le, ok := r.(*limitError)
			if !ok {
				panic(r)
			}
			ids, err = nil, badinput.Errorf("tokenizers: %s: %w", t.source, le)
		}
	}()
	if !utf8.ValidString(text) {
		for i, r := range text {
			if r == utf8.RuneError {
				if _, n := utf8.DecodeRuneInString(text[i:]); n == 1 {
					return nil, fmt.Errorf("tokenizers: %w (invalid byte 0x%02x at byte offset %d)", ErrInvalidUTF8, text[i], i)
				}
			}
		}
	}
	var pieces []piece
	flush := func() {
		if len(pieces) == 0 {
			return
		}
		if t.pre != nil {
			pieces = t.pre.preTokenize(pieces)
		}
		for _, p := range pieces {
			ids = append(ids, t.model.tokenize(p.s)...)
		}
		pieces = pieces[:0]
	}
	for _, seg := range t.raw.split(text) {
		if seg.tok != nil {
			flush()
			ids = append(ids, seg.tok.id)
			continue
		}
		s := seg.s
		if t.norm != nil {
			s = t.norm.normalize(s, MaxGrowth*len(s)+1024)
		}
		for _, sub := range t.normed.split(s) {
			if sub.tok != nil {
				flush()
				ids = append(ids, sub.tok.id)
				continue
			}
			pieces = append(pieces, piece{sub.s, seg.start == 0 && sub.start == 0})
		}
		flush()
	}
	return ids, nil
}

// Tokens returns the token strings of ids ("" for an id nothing names).
func (t *Tokenizer) Tokens(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i], _ = t.Token(id)
	}
	return out
}

// Decode turns ids back into text as the library's decode does: ids nothing names are dropped, special
// tokens too when skipSpecial, and the decoder chain joins the rest (with spaces when there is no decoder).
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		s, ok := t.Token(id)
		if !ok || skipSpecial && t.special[id] {
			continue
		}
		toks = append(toks, s)
	}
	if t.dec == nil {
		out := ""
		for i, s := range toks {
			if i > 0 {
				out += " "
			}
			out += s
		}
		return out
	}
	out := ""
	for _, s := range t.dec.decodeChain(toks) {
		out += s
	}
	return out
}
