package loaders

import (
	"unicode"

	"github.com/tune-ml/tune/internal/trie"
)

// AddedToken is one entry of tokenizer.json's "added_tokens": a string matched as a whole in the input before
// the model sees it (tokenizers/src/tokenizer/added_vocabulary.rs). [CLS], [SEP], [PAD], [UNK] and [MASK] are
// added tokens of every BERT tokenizer, so "[MASK]" written in the text becomes id 103 and not "[", "mask", "]".
type AddedToken struct {
	ID         int32  // the token's id in the vocabulary ([CLS] is 101 in bert-base-uncased)
	Content    string // the literal text matched: "[CLS]"
	SingleWord bool   // match only when not preceded or followed by a word character (regex \w)
	LStrip     bool   // the match swallows the whitespace on its left
	RStrip     bool   // the match swallows the whitespace on its right
	Normalized bool   // match in the normalized text (true) or in the raw input (false, the default for special tokens)
	Special    bool   // special token (skipped when decoding)
}

// MaxInputCharsPerWord is the largest max_input_chars_per_word a WordPiece tokenizer.json may set: longer
// words are [UNK] anyway, and the longest-match search costs up to the cube of the word length below it.
const MaxInputCharsPerWord = 200

// MaxAddedTokenBytes bounds an added token's content, and with it the matcher's work per rune of text: real
// added tokens ([CLS], [unused0], special tokens) have at most a few dozen bytes.
const MaxAddedTokenBytes = 256

// addedVocab matches added tokens as HF does: tokens with Normalized false are found in the raw text first,
// leftmost-longest (HF's Aho-Corasick with MatchKind::LeftmostLongest), then every remaining piece is
// normalized and the Normalized tokens are found in it, by their normalized content.
type addedVocab struct {
	raw, norm addedSet
}

// addedSet is the patterns of one kind in a trie: the longest at a position is found in time bounded by the
// longest pattern, not by their number (every pattern was tried at every rune).
type addedSet struct {
	trie *trie.Trie[rune, *addedPattern]
}

type addedPattern struct {
	runes []rune
	tok   AddedToken
}

func newAddedVocab(tokens []AddedToken, n *BertNormalizer) addedVocab {
	v := addedVocab{raw: addedSet{trie.New[rune, *addedPattern]()}, norm: addedSet{trie.New[rune, *addedPattern]()}}
	for _, t := range tokens {
		if t.Content == "" {
			continue
		}
		if !t.Normalized {
			p := &addedPattern{[]rune(t.Content), t}
			v.raw.trie.Insert(p.runes, p) // equal patterns: the first keeps it, as the stable sort did
			continue
		}
		content := t.Content
		if n != nil {
			content = n.Normalize(content)
		}
		if content != "" {
			p := &addedPattern{[]rune(content), t}
			v.norm.trie.Insert(p.runes, p)
		}
	}
	return v
}

// addedSplit is a piece of a text: either an added token (tok != nil) or plain text to normalize and tokenize.
type addedSplit struct {
	text normalized
	tok  *AddedToken
}

// split cuts t around the matches of patterns (HF find_matches): at each position the longest pattern that
// matches wins; a single_word token is dropped when a word character touches it; lstrip/rstrip extend the
// match over adjacent whitespace (lstrip never reaches back into the previous match).
func splitAdded(t normalized, patterns addedSet) []addedSplit {
	if patterns.trie == nil || patterns.trie.Len() == 1 || len(t.runes) == 0 {
		return []addedSplit{{text: t}}
	}
	var out []addedSplit
	cursor := 0
	slice := func(a, b int) normalized { return normalized{runes: t.runes[a:b], orig: t.orig[a:b]} }
	for i := 0; i < len(t.runes); {
		p := longestAt(t.runes, i, patterns)
		if p == nil {
			i++
			continue
		}
		start, stop := i, i+len(p.runes)
		i = stop // the search resumes after the match even when single_word discards it, as in HF
		if p.tok.SingleWord {
			if (start > 0 && isWordRune(t.runes[start-1])) || (stop < len(t.runes) && isWordRune(t.runes[stop])) {
				continue
			}
		}
		if p.tok.LStrip {
			for start > cursor && unicode.Is(unicode.White_Space, t.runes[start-1]) {
				start--
			}
		}
		if p.tok.RStrip {
			for stop < len(t.runes) && unicode.Is(unicode.White_Space, t.runes[stop]) {
				stop++
			}
			i = stop
		}
		if cursor < start {
			out = append(out, addedSplit{text: slice(cursor, start)})
		}
		tok := p.tok
		out = append(out, addedSplit{text: slice(start, stop), tok: &tok})
		cursor = stop
	}
	if cursor < len(t.runes) {
		out = append(out, addedSplit{text: slice(cursor, len(t.runes))})
	}
	return out
}

func longestAt(rs []rune, i int, patterns addedSet) *addedPattern {
	p, _, _ := patterns.trie.Longest(func(k int) (rune, bool) {
		if i+k < len(rs) {
			return rs[i+k], true
		}
		return 0, false
	})
	return p
}

// isWordRune is Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation and
// Join_Control.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Join_Control, r)
}
