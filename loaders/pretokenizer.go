package loaders

import "unicode"

// isBertPunctuation is HF's is_bert_punc (tokenizers/src/pre_tokenizers/bert.rs): ASCII punctuation (codes
// 33–47, 58–64, 91–96, 123–126, whatever their Unicode category, so $ + < = > ^ ` | ~ count) or a character of
// the unicode_categories crate's P* tables (hfPunctuation).
func isBertPunctuation(r rune) bool {
	if r < 0x80 {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.Is(hfPunctuation, r)
}

// bertPreTokenize splits normalized runes into words as HF's BertPreTokenizer does: split on Unicode
// White_Space (removed), then isolate every punctuation character as a word of its own. It appends to words
// the half-open rune ranges [start, end) of the words, in order, and returns the result. This replaces
// github.com/sugarme/tokenizer's BertPreTokenizer, which splits on ASCII whitespace only (github.com/sugarme/tokenizer v0.3.0's source).
func bertPreTokenize(runes []rune, words [][2]int) [][2]int {
	start := -1
	for i, r := range runes {
		switch {
		case unicode.Is(unicode.White_Space, r):
			if start >= 0 {
				words = append(words, [2]int{start, i})
				start = -1
			}
		case isBertPunctuation(r):
			if start >= 0 {
				words = append(words, [2]int{start, i})
				start = -1
			}
			words = append(words, [2]int{i, i + 1})
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		words = append(words, [2]int{start, len(runes)})
	}
	return words
}
