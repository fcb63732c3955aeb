package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Special tokens, first in the vocabulary in this order: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4.
var specials = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}

// vocabSize is the size the vocabulary is padded to with [unusedN] entries (as BERT's vocab has), a multiple
// of 64 so the embedding and output GEMMs have aligned shapes. recipes/tiny.yaml's vocab_size must equal it.
const vocabSize = 256

// splitWords are the words left out of the vocabulary on purpose, so WordPiece splits them into a stem and a
// "##" piece, as real vocabularies do for rarer inflections.
var splitWords = map[string][]string{
	"actors": {"actor", "##s"}, "jokes": {"joke", "##s"}, "scenes": {"scene", "##s"},
	"characters": {"character", "##s"}, "effects": {"effect", "##s"}, "tickets": {"ticket", "##s"},
	"reviews": {"review", "##s"}, "hours": {"hour", "##s"},
	"extremely": {"extreme", "##ly"}, "completely": {"complete", "##ly"}, "surprisingly": {"surprising", "##ly"},
}

// pieces are the multi-letter continuation pieces ("##s" is among the "##" letters).
var pieces = []string{"##ly", "##ed", "##ing", "##er", "##est"}

// punctuation is every punctuation character the vocabulary holds as a token.
const punctuation = `.,!?;:'"-()`

// buildVocab returns the vocabulary for the sentences: the specials, punctuation, digits, single letters and
// "##" letters (so no lowercase ASCII word is ever [UNK]), the continuation pieces, then every word of the
// sentences (the split words replaced by their stems) in sorted order, padded with [unusedN] to vocabSize.
func buildVocab(sentences []string) ([]string, error) {
	vocab := slices.Clone(specials)
	for _, p := range punctuation {
		vocab = append(vocab, string(p))
	}
	for c := '0'; c <= '9'; c++ {
		vocab = append(vocab, string(c))
	}
	for c := 'a'; c <= 'z'; c++ {
		vocab = append(vocab, string(c))
	}
	for c := 'a'; c <= 'z'; c++ {
		vocab = append(vocab, "##"+string(c))
	}
	vocab = append(vocab, pieces...)
	seen := map[string]bool{}
	for _, v := range vocab {
		seen[v] = true
	}
	var words []string
	for _, s := range sentences {
		for _, w := range preTokenize(s) {
			if parts, ok := splitWords[w]; ok {
				w = parts[0]
			}
			if !seen[w] {
				seen[w] = true
				words = append(words, w)
			}
		}
	}
	slices.Sort(words)
	vocab = append(vocab, words...)
	if len(vocab) > vocabSize {
		return nil, fmt.Errorf("maketiny: the vocabulary has %d entries, more than vocabSize %d", len(vocab), vocabSize)
	}
	for i := 0; len(vocab) < vocabSize; i++ {
		vocab = append(vocab, fmt.Sprintf("[unused%d]", i))
	}
	return vocab, nil
}

// preTokenize lowercases s and splits it on whitespace and around each punctuation character, as BERT's
// normalizer and pre-tokenizer do for ASCII text.
func preTokenize(s string) []string {
	var out []string
	for _, f := range strings.Fields(strings.ToLower(s)) {
		start := 0
		for i, r := range f {
			if unicode.IsPunct(r) {
				if i > start {
					out = append(out, f[start:i])
				}
				out = append(out, string(r))
				start = i + len(string(r))
			}
		}
		if start < len(f) {
			out = append(out, f[start:])
		}
	}
	return out
}

// wordPiece splits one pre-token greedily, longest match first, "##" on non-initial pieces; a word with no
// full split becomes [UNK] (HF tokenizers' WordPiece, tokenizers/src/models/wordpiece).
func wordPiece(w string, ids map[string]int) []string {
	var out []string
	for start := 0; start < len(w); {
		end := len(w)
		for ; end > start; end-- {
			p := w[start:end]
			if start > 0 {
				p = "##" + p
			}
			if _, ok := ids[p]; ok {
				out = append(out, p)
				break
			}
		}
		if end == start {
			return []string{"[UNK]"}
		}
		start = end
	}
	return out
}

// tokenizerJSON returns an HF tokenizers tokenizer.json for vocab with BERT's pipeline (tokenizers/src/normalizers/bert.rs, pre_tokenizers/bert.rs, models/wordpiece): BertNormalizer
// (lowercase), BertPreTokenizer, WordPiece, the [CLS] $A [SEP] template and the WordPiece decoder.
func tokenizerJSON(vocab []string) ([]byte, error) {
	ids := make(map[string]int, len(vocab))
	for i, v := range vocab {
		ids[v] = i
	}
	type special struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	added := make([]special, len(specials))
	for i, s := range specials {
		added[i] = special{ID: ids[s], Content: s, Special: true}
	}
	tok := func(id string, typ int) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": typ}}
	}
	seq := func(id string, typ int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
	}
	doc := struct {
		Version       string         `json:"version"`
		Truncation    any            `json:"truncation"`
		Padding       any            `json:"padding"`
		AddedTokens   []special      `json:"added_tokens"`
		Normalizer    map[string]any `json:"normalizer"`
		PreTokenizer  map[string]any `json:"pre_tokenizer"`
		PostProcessor map[string]any `json:"post_processor"`
		Decoder       map[string]any `json:"decoder"`
		Model         map[string]any `json:"model"`
	}{
		Version:     "1.0",
		AddedTokens: added,
		Normalizer: map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
			"strip_accents": nil, "lowercase": true},
		PreTokenizer: map[string]any{"type": "BertPreTokenizer"},
		PostProcessor: map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0)},
			"pair":   []any{tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0), seq("B", 1), tok("[SEP]", 1)},
			"special_tokens": map[string]any{
				"[CLS]": map[string]any{"id": "[CLS]", "ids": []int{ids["[CLS]"]}, "tokens": []string{"[CLS]"}},
				"[SEP]": map[string]any{"id": "[SEP]", "ids": []int{ids["[SEP]"]}, "tokens": []string{"[SEP]"}},
			},
		},
		Decoder: map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		Model: map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": ids},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// tokenizerConfigJSON is the tokenizer_config.json transformers needs to know the special tokens.
func tokenizerConfigJSON(maxLength int) ([]byte, error) {
	b, err := json.MarshalIndent(map[string]any{
		"tokenizer_class": "BertTokenizer", "do_lower_case": true, "model_max_length": maxLength,
		"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
		"mask_token": "[MASK]", "model_input_names": []string{"input_ids", "token_type_ids", "attention_mask"},
	}, "", "  ")
	return append(b, '\n'), err
}
