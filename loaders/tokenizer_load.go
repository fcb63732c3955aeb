package loaders

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	sugartok "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/model"
	"github.com/sugarme/tokenizer/model/wordpiece"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/jsonerr"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/internal/strictjson"
)

// LoadTokenizer loads a BERT-family WordPiece tokenizer from path, which is one of
//   - a tokenizer.json written by Hugging Face tokenizers/transformers (normalizer BertNormalizer or null,
//     pre_tokenizer BertPreTokenizer or null, model WordPiece, post_processor TemplateProcessing,
//     BertProcessing or null);
//   - a bare vocab.txt (one token per line, the line number is the id), for which the standard BERT pipeline
//     is built: BertNormalizer (lowercase from do_lower_case, default true; strip_accents null),
//     BertPreTokenizer, WordPiece with "##" and 100 characters per word, "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B:1
//     [SEP]:1", and [PAD] [UNK] [CLS] [SEP] [MASK] as special added tokens;
//   - a directory holding either (tokenizer.json preferred).
//
// A tokenizer_config.json beside the file is read for model_max_length and pad_token, and, for vocab.txt only,
// for do_lower_case, strip_accents, tokenize_chinese_chars, the special token names and added_tokens_decoder
// (a tokenizer.json already states its own pipeline, and wins, as in transformers' fast tokenizers).
// The "truncation" and "padding" sections of tokenizer.json are not applied by default, as transformers does
// not apply them either; pass EncodeOptions instead. Errors name the file and the field, and are bad input
// (badinput.Is) unless the operating system's.
func LoadTokenizer(path string) (tok *Tokenizer, err error) {
	defer func() {
		if r := recover(); r != nil {
			tok, err = nil, fmt.Errorf("loaders: %s: tokenizer could not be built (internal error: %v)", path, r)
		}
		err = badinput.Mark(err) // the files' contents are wrong (exit 2); a failed read is not
	}()
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("loaders: tokenizer: %w", err)
	}
	dir, file := filepath.Dir(path), path
	if st.IsDir() {
		dir = path
		file = ""
		for _, name := range []string{"tokenizer.json", "vocab.txt"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				file = filepath.Join(dir, name)
				break
			}
		}
		if file == "" {
			return nil, fmt.Errorf("loaders: %s holds neither tokenizer.json nor vocab.txt; name a Hugging Face model or tokenizer directory, or the file itself", path)
		}
	}
	cfg, err := readTokenizerConfig(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	switch base := filepath.Base(file); {
	case base == "tokenizer_config.json" || base == "config.json":
		return nil, fmt.Errorf("loaders: %s is not a tokenizer; pass tokenizer.json, vocab.txt or their directory", file)
	case strings.HasSuffix(base, ".json"):
		tok, err = loadTokenizerJSON(file, cfg)
	default:
		tok, err = loadVocabTxt(file, cfg)
	}
	if tok != nil {
		tok.configPath = filepath.Join(dir, "tokenizer_config.json")
	}
	return tok, err
}

// tokenizerConfig is the part of transformers' tokenizer_config.json that tune reads.
type tokenizerConfig struct {
	DoLowerCase          *bool                      `json:"do_lower_case"`
	StripAccents         *bool                      `json:"strip_accents"`
	TokenizeChineseChars *bool                      `json:"tokenize_chinese_chars"`
	ModelMaxLength       *float64                   `json:"model_max_length"`
	UnkToken             tokenName                  `json:"unk_token"`
	ClsToken             tokenName                  `json:"cls_token"`
	SepToken             tokenName                  `json:"sep_token"`
	PadToken             tokenName                  `json:"pad_token"`
	MaskToken            tokenName                  `json:"mask_token"`
	AddedTokensDecoder   map[string]addedTokenEntry `json:"added_tokens_decoder"`
}

// tokenName is a special token in tokenizer_config.json: a string, or an AddedToken object with "content".
type tokenName string

// UnmarshalJSON accepts "name", {"content": "name", ...} and null.
func (n *tokenName) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var obj struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return err
		}
		*n = tokenName(obj.Content)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("a special token must be a string or an object with \"content\"")
	}
	*n = tokenName(s)
	return nil
}

func (n tokenName) or(def string) string {
	if n == "" {
		return def
	}
	return string(n)
}

// addedTokenEntry is an added token as tokenizer.json and tokenizer_config.json store it.
type addedTokenEntry struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

func readTokenizerConfig(path string) (*tokenizerConfig, error) {
	b, err := smallfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return &tokenizerConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loaders: %w", err)
	}
	var cfg tokenizerConfig
	if err := strictjson.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("loaders: %w; fix the file, or replace it with the tokenizer's own", jsonerr.Wrap(path, b, err))
	}
	return &cfg, nil
}

// modelMaxLength returns model_max_length, or 0 when absent or transformers' "no limit" value (≈1e30).
func (c *tokenizerConfig) modelMaxLength() int {
	if c.ModelMaxLength == nil || *c.ModelMaxLength <= 0 || *c.ModelMaxLength > 1e9 {
		return 0
	}
	return int(*c.ModelMaxLength)
}

// tokenizerJSON is the top level of a tokenizer.json (tokenizers/src/tokenizer/serialization.rs).
type tokenizerJSON struct {
	Version      string                 `json:"version"`
	Truncation   json.RawMessage        `json:"truncation"`
	Padding      *paddingJSON           `json:"padding"`
	AddedTokens  []sugartok.TokenConfig `json:"added_tokens"`
	Normalizer   *normalizerJSON        `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	PostProcessor *postProcessorJSON `json:"post_processor"`
	Model         *wordPieceJSON     `json:"model"`
	Decoder       json.RawMessage    `json:"decoder"` // not needed to encode
}

type paddingJSON struct {
	PadID     *int64  `json:"pad_id"`
	PadTypeID int32   `json:"pad_type_id"`
	PadToken  *string `json:"pad_token"`
}

type normalizerJSON struct {
	Type               string `json:"type"`
	CleanText          *bool  `json:"clean_text"`
	HandleChineseChars *bool  `json:"handle_chinese_chars"`
	StripAccents       *bool  `json:"strip_accents"`
	Lowercase          *bool  `json:"lowercase"`
}

type wordPieceJSON struct {
	Type                    string           `json:"type"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	MaxInputCharsPerWord    *int             `json:"max_input_chars_per_word"`
	Vocab                   map[string]int64 `json:"vocab"`
}

type postProcessorJSON struct {
	Type          string              `json:"type"`
	Single        []templatePieceJSON `json:"single"`
	Pair          []templatePieceJSON `json:"pair"`
	SpecialTokens map[string]struct {
		ID     string   `json:"id"`
		IDs    []int64  `json:"ids"`
		Tokens []string `json:"tokens"`
	} `json:"special_tokens"`
	Sep []json.RawMessage `json:"sep"` // BertProcessing: ["[SEP]", 102]
	Cls []json.RawMessage `json:"cls"`
}

type templatePieceJSON struct {
	SpecialToken *struct {
		ID     string `json:"id"`
		TypeID int32  `json:"type_id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID     string `json:"id"`
		TypeID int32  `json:"type_id"`
	} `json:"Sequence"`
}

func loadTokenizerJSON(path string, cfg *tokenizerConfig) (*Tokenizer, error) {
	b, err := smallfile.ReadCapped(path, smallfile.MaxTokenizerBytes, "a tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("loaders: %w", err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("loaders: %s: %s", path, fmt.Sprintf(format, a...))
	}
	// The model type first: another model's sections (a Unigram vocab is a list of [piece, score]) would
	// otherwise fail the WordPiece decoding below with a Go type error instead of naming the type.
	var peek struct {
		Model struct {
			Type string `json:"type"`
		} `json:"model"`
	}
	if json.Unmarshal(b, &peek) == nil {
		switch peek.Model.Type {
		case "WordPiece", "":
		case "BPE":
			// Byte-pair encoding is read by package tokenizers, for decoders; this loader is BERT's.
			return nil, bad("model type %q is not supported here: a BERT model takes a WordPiece tokenizer (tune reads "+
				"BPE tokenizers for decoders: GPT-2, Llama, Qwen, Mistral)", peek.Model.Type)
		default:
			return nil, bad("model type %q is not supported: tune reads WordPiece (BERT) and byte-pair-encoding (BPE: "+
				"GPT-2, Llama, Qwen, Mistral) tokenizers", peek.Model.Type)
		}
	}
	var tj tokenizerJSON
	// Keys are matched exactly, as the tokenizers library (serde) matches them; encoding/json alone would take
	// "voCAB" for "vocab".
	if err := strictjson.Unmarshal(b, &tj); err != nil {
		return nil, fmt.Errorf("loaders: %s: not a valid tokenizer.json: %w", path, jsonerr.Describe(b, err))
	}
	m := tj.Model
	if m == nil {
		return nil, bad(`no "model" section`)
	}
	if m.Type != "WordPiece" && m.Type != "" {
		return nil, bad("model type %q is not supported: tune reads WordPiece (BERT) and byte-pair-encoding (BPE: GPT-2, "+
			"Llama, Qwen, Mistral) tokenizers", m.Type)
	}
	if len(m.Vocab) == 0 {
		return nil, bad("model.vocab is empty or missing")
	}
	vocab := make(model.Vocab, len(m.Vocab))
	for tokStr, id := range m.Vocab {
		if id < 0 || id > 1<<31-1 {
			return nil, bad("model.vocab[%q] = %d is not a valid id", tokStr, id)
		}
		vocab[tokStr] = int(id)
	}
	unk, prefix, maxChars := "[UNK]", "##", 100
	if m.UnkToken != nil {
		unk = *m.UnkToken
	}
	if m.ContinuingSubwordPrefix != nil {
		prefix = *m.ContinuingSubwordPrefix
	}
	if m.MaxInputCharsPerWord != nil {
		maxChars = *m.MaxInputCharsPerWord
	}
	if maxChars < 1 {
		return nil, bad("model.max_input_chars_per_word = %d must be at least 1", maxChars)
	}
	if maxChars > MaxInputCharsPerWord {
		// WordPiece's greedy longest match tries every end for every start of a word: its time grows with the
		// cube of the word's length up to this limit (10^8 made one 2000-letter word take 9 s).
		return nil, bad("model.max_input_chars_per_word = %d is more than tune's %d (transformers' default is 100; "+
			"published BERT tokenizers use 100 or 200): set it to 100", maxChars, MaxInputCharsPerWord)
	}
	if _, ok := vocab[unk]; !ok {
		return nil, bad("model.unk_token %q is not in model.vocab", unk)
	}
	t := &Tokenizer{
		source: path,
		model: wordpiece.NewWordPieceBuilder().Vocab(&vocab).UnkToken(unk).
			ContinuingSubwordPrefix(prefix).MaxInputCharsPerWord(maxChars).Build(),
		maxModelLen: cfg.modelMaxLength(),
	}

	if n := tj.Normalizer; n != nil {
		if n.Type != "BertNormalizer" {
			return nil, bad("normalizer type %q is not supported; tune reads BERT tokenizers (BertNormalizer or null)", n.Type)
		}
		bn := DefaultBertNormalizer()
		bn.StripAccents = n.StripAccents
		setBool(&bn.CleanText, n.CleanText)
		setBool(&bn.HandleChineseChars, n.HandleChineseChars)
		setBool(&bn.Lowercase, n.Lowercase)
		t.normalizer = &bn
	}
	if p := tj.PreTokenizer; p != nil {
		if p.Type != "BertPreTokenizer" {
			return nil, bad("pre_tokenizer type %q is not supported; tune reads BERT tokenizers (BertPreTokenizer or null)", p.Type)
		}
		t.preTokenize = true
	}

	added := make([]AddedToken, 0, len(tj.AddedTokens))
	for i, a := range tj.AddedTokens {
		if a.Content == "" {
			continue
		}
		if len(a.Content) > MaxAddedTokenBytes {
			return nil, bad("added_tokens[%d] has %d bytes, more than the %d tune matches (real added tokens have a few dozen)", i, len(a.Content), MaxAddedTokenBytes)
		}
		id := int32(a.Id)
		if v, ok := vocab[a.Content]; ok {
			id = int32(v)
		} else if a.Id < 0 || a.Id > 1<<31-1 {
			return nil, bad("added_tokens[%d] (%q) has invalid id %d", i, a.Content, a.Id)
		}
		added = append(added, AddedToken{ID: id, Content: a.Content, SingleWord: a.SingleWord,
			LStrip: a.Lstrip, RStrip: a.Rstrip, Normalized: a.Normalized, Special: a.Special})
	}
	t.setVocab(vocab, added)

	if p := tj.PostProcessor; p != nil {
		pp, err := parsePostProcessor(p, t)
		if err != nil {
			return nil, bad("post_processor: %v", err)
		}
		t.post = pp
	}

	padToken := cfg.PadToken.or("[PAD]")
	if cfg.PadToken != "" {
		t.padFrom = "tokenizer_config.json's pad_token"
	}
	if p := tj.Padding; p != nil {
		t.padTypeID = p.PadTypeID
		if p.PadToken != nil {
			padToken, t.padFrom = *p.PadToken, "tokenizer.json's padding.pad_token"
		}
	}
	t.setPad(padToken)
	if p := tj.Padding; p != nil && p.PadID != nil {
		t.padID, t.padKnown = int32(*p.PadID), true
	}
	return t, nil
}

func setBool(dst *bool, v *bool) {
	if v != nil {
		*dst = *v
	}
}

// setVocab records the vocabulary and the added tokens (and builds their matchers, which need the normalizer).
func (t *Tokenizer) setVocab(vocab model.Vocab, added []AddedToken) {
	t.tokenToID = make(map[string]int32, len(vocab))
	maxID := -1
	for s, id := range vocab {
		t.tokenToID[s] = int32(id)
		maxID = max(maxID, id)
	}
	t.addedByToken = make(map[string]AddedToken, len(added))
	for _, a := range added {
		t.addedByToken[a.Content] = a
		maxID = max(maxID, int(a.ID))
	}
	t.vocabSize = maxID + 1
	t.added = newAddedVocab(added, t.normalizer)
	t.chunkable = t.preTokenize
	for _, a := range added {
		if a.LStrip || a.RStrip || strings.ContainsFunc(a.Content, unicode.IsSpace) {
			t.chunkable = false
		}
	}
}

func (t *Tokenizer) setPad(padToken string) {
	t.padToken = padToken
	t.padID, t.padKnown = t.TokenToID(padToken)
}

func parsePostProcessor(p *postProcessorJSON, t *Tokenizer) (*postProcessor, error) {
	switch p.Type {
	case "TemplateProcessing":
		pp := &postProcessor{specials: map[string]specialToken{}}
		for name, st := range p.SpecialTokens {
			if len(st.IDs) == 0 {
				return nil, fmt.Errorf("special_tokens[%q] has no ids: a special token adds at least one token (an empty one "+
					"would make max_length count tokens that are not there)", name)
			}
			if len(st.IDs) != len(st.Tokens) {
				return nil, fmt.Errorf("special_tokens[%q] has %d ids and %d tokens", name, len(st.IDs), len(st.Tokens))
			}
			var s specialToken
			for i, id := range st.IDs {
				if err := checkSpecial(t, fmt.Sprintf("special_tokens[%q]", name), st.Tokens[i], id); err != nil {
					return nil, err
				}
				s.ids = append(s.ids, int32(id))
				s.tokens = append(s.tokens, st.Tokens[i])
			}
			pp.specials[name] = s
		}
		var err error
		if pp.single, err = parseTemplate(p.Single, pp.specials, "single"); err != nil {
			return nil, err
		}
		if pp.pair, err = parseTemplate(p.Pair, pp.specials, "pair"); err != nil {
			return nil, err
		}
		return pp, nil
	case "BertProcessing":
		cls, clsID, err := bertSpecial(p.Cls, "cls")
		if err != nil {
			return nil, err
		}
		sep, sepID, err := bertSpecial(p.Sep, "sep")
		if err != nil {
			return nil, err
		}
		if err := checkSpecial(t, "cls", cls, int64(clsID)); err != nil {
			return nil, err
		}
		if err := checkSpecial(t, "sep", sep, int64(sepID)); err != nil {
			return nil, err
		}
		pp := bertPostProcessor(cls, sep, clsID, sepID)
		pp.bertProcessing = true
		return pp, nil
	}
	return nil, fmt.Errorf("type %q is not supported; tune reads BERT tokenizers (TemplateProcessing, BertProcessing or null)", p.Type)
}

// checkSpecial checks a special token of the post-processor: a non-empty token of the vocabulary (or an added
// token) whose id is the one given.
func checkSpecial(t *Tokenizer, where, token string, id int64) error {
	if token == "" {
		return fmt.Errorf("%s has an empty token; name the vocabulary token it adds ([CLS], [SEP])", where)
	}
	known, ok := t.TokenToID(token)
	if !ok {
		return fmt.Errorf("%s: %q is not in the vocabulary (model.vocab or added_tokens)", where, token)
	}
	if int64(known) != id {
		return fmt.Errorf("%s gives %q the id %d, but the vocabulary gives it %d", where, token, id, known)
	}
	return nil
}

func parseTemplate(pieces []templatePieceJSON, specials map[string]specialToken, which string) ([]templatePiece, error) {
	if len(pieces) == 0 {
		return nil, fmt.Errorf("the %q template is empty", which)
	}
	out := make([]templatePiece, 0, len(pieces))
	for i, pc := range pieces {
		switch {
		case pc.SpecialToken != nil:
			if _, ok := specials[pc.SpecialToken.ID]; !ok {
				return nil, fmt.Errorf("%s[%d]: special token %q is not in special_tokens", which, i, pc.SpecialToken.ID)
			}
			out = append(out, templatePiece{special: pc.SpecialToken.ID, typeID: pc.SpecialToken.TypeID})
		case pc.Sequence != nil && (pc.Sequence.ID == "A" || pc.Sequence.ID == "B"):
			seq := 0
			if pc.Sequence.ID == "B" {
				seq = 1
			}
			out = append(out, templatePiece{seq: seq, typeID: pc.Sequence.TypeID})
		default:
			return nil, fmt.Errorf("%s[%d]: expected {\"SpecialToken\": ...} or {\"Sequence\": {\"id\": \"A\"|\"B\"}}", which, i)
		}
	}
	return out, nil
}

// bertSpecial decodes BertProcessing's ["[SEP]", 102].
func bertSpecial(raw []json.RawMessage, field string) (string, int32, error) {
	if len(raw) != 2 {
		return "", 0, fmt.Errorf("%s must be [token, id]", field)
	}
	var name string
	if err := json.Unmarshal(raw[0], &name); err != nil {
		return "", 0, fmt.Errorf("%s[0] must be a string", field)
	}
	id, err := strconv.ParseInt(string(bytes.TrimSpace(raw[1])), 10, 32)
	if err != nil || id < 0 {
		return "", 0, fmt.Errorf("%s[1] must be a token id", field)
	}
	return name, int32(id), nil
}

// MaxVocabLineBytes is the longest line of a vocab.txt tune reads: 64 KiB, bufio.MaxScanTokenSize, the longest
// line the WordPiece reader of github.com/sugarme/tokenizer (bufio.Scanner) took before tune read the file itself.
// A line is one token, a word piece of a few bytes in real vocabularies.
const MaxVocabLineBytes = bufio.MaxScanTokenSize

// readVocabTxt reads a vocab.txt, one token a line, the 0-based line number its id, as
// github.com/sugarme/tokenizer's wordpiece.NewWordPieceFromFile does (bufio.ScanLines: a "\r" before the "\n" is
// dropped, a last line without "\n" counts, a token repeated takes its last line's id) and transformers'
// load_vocab (models/bert/tokenization_bert.py), but with the file's size and each line's length bounded.
func readVocabTxt(path string) (model.Vocab, error) {
	data, err := smallfile.ReadCapped(path, smallfile.MaxTokenizerBytes, "a vocab.txt")
	if err != nil {
		return nil, err
	}
	vocab := model.Vocab{}
	for n := 0; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > MaxVocabLineBytes {
			return nil, badinput.Errorf("%s line %d is longer than %d bytes, the most tune reads for a token of a "+
				"vocab.txt (one token a line, a few bytes each in a real one): is it the right file? Replace it with "+
				"the model's own", path, n+1, MaxVocabLineBytes)
		}
		vocab[string(line)] = n
	}
	return vocab, nil
}

// loadVocabTxt builds the standard BERT tokenizer around a vocab.txt, as transformers' BertTokenizer does.
func loadVocabTxt(path string, cfg *tokenizerConfig) (*Tokenizer, error) {
	unk := cfg.UnkToken.or("[UNK]")
	vocab, err := readVocabTxt(path)
	if err != nil {
		return nil, fmt.Errorf("loaders: %w", err)
	}
	wp := wordpiece.NewWordPieceBuilder().Vocab(&vocab).UnkToken(unk).MaxInputCharsPerWord(100).Build()
	if len(vocab) == 0 {
		return nil, fmt.Errorf("loaders: %s: the vocabulary is empty", path)
	}
	if _, ok := vocab[unk]; !ok {
		return nil, fmt.Errorf("loaders: %s: the unknown token %q is not in the vocabulary", path, unk)
	}
	bn := DefaultBertNormalizer()
	setBool(&bn.Lowercase, cfg.DoLowerCase)
	setBool(&bn.HandleChineseChars, cfg.TokenizeChineseChars)
	bn.StripAccents = cfg.StripAccents
	t := &Tokenizer{source: path, model: wp, normalizer: &bn, preTokenize: true, maxModelLen: cfg.modelMaxLength()}

	cls, sep := cfg.ClsToken.or("[CLS]"), cfg.SepToken.or("[SEP]")
	var added []AddedToken
	for _, name := range []string{cfg.PadToken.or("[PAD]"), unk, cls, sep, cfg.MaskToken.or("[MASK]")} {
		if id, ok := vocab[name]; ok {
			added = append(added, AddedToken{ID: int32(id), Content: name, Special: true})
		}
	}
	for key, a := range cfg.AddedTokensDecoder {
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil || id < 0 || a.Content == "" {
			return nil, fmt.Errorf("loaders: tokenizer_config.json: added_tokens_decoder[%q] is not an id with a content", key)
		}
		if len(a.Content) > MaxAddedTokenBytes {
			return nil, fmt.Errorf("loaders: tokenizer_config.json: added_tokens_decoder[%q] has %d bytes, more than the %d tune matches", key, len(a.Content), MaxAddedTokenBytes)
		}
		if v, ok := vocab[a.Content]; ok {
			id = int64(v)
		}
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		added = append(added, AddedToken{ID: int32(id), Content: a.Content, SingleWord: a.SingleWord,
			LStrip: a.LStrip, RStrip: a.RStrip, Normalized: normalized, Special: a.Special})
	}
	t.setVocab(vocab, added)
	clsID, ok1 := t.TokenToID(cls)
	sepID, ok2 := t.TokenToID(sep)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("loaders: %s: %q or %q is not in the vocabulary; a BERT vocab.txt needs both", path, cls, sep)
	}
	t.post = bertPostProcessor(cls, sep, clsID, sepID)
	if cfg.PadToken != "" {
		t.padFrom = "tokenizer_config.json's pad_token"
	}
	t.setPad(cfg.PadToken.or("[PAD]"))
	return t, nil
}
