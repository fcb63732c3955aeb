package tokenizers

import (
	"unicode"
	"unicode/utf8"

	"github.com/tune-ml/tune/internal/trie"
)

// addedToken is one entry of added_tokens.
type addedToken struct {
	id                                              int32
	content                                         string
	singleWord, lstrip, rstrip, normalized, special bool
}

// addedMatcher finds added tokens in text, leftmost-longest as the library's aho-corasick automaton with
// MatchKind::LeftmostLongest does (tokenizer/added_vocabulary.rs find_matches): at each position the longest
// token there, found by a walk of a trie of the patterns, so the cost is the text's length times the longest
// token's (MaxAddedTokenBytes), not the number of tokens: 50,000 added tokens were tried one by one at every
// byte (365 s for a 1 MB row).
type addedMatcher struct {
	trie    *trie.Trie[byte, *addedToken]
	pattern map[*addedToken]string // the text searched for (normalized content for normalized tokens)
}

// MaxAddedTokenBytes bounds an added token's content, and with it the matcher's work per byte of text: real
// added tokens (special tokens, reserved slots, runs of spaces) have at most a few dozen bytes.
const MaxAddedTokenBytes = 256

func newAddedMatcher(toks []*addedToken, text func(*addedToken) string) *addedMatcher {
	m := &addedMatcher{trie: trie.New[byte, *addedToken](), pattern: map[*addedToken]string{}}
	for _, t := range toks {
		p := text(t)
		if p == "" {
			continue
		}
		m.pattern[t] = p
		m.trie.Insert([]byte(p), t) // equal patterns: the first token keeps it, as before
	}
	return m
}

// segment is a piece of text, or an added token found in it (tok != nil).
type segment struct {
	s     string
	start int // byte offset in the text searched
	tok   *addedToken
}

func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// split cuts s at the added tokens it holds.
func (m *addedMatcher) split(s string) []segment {
	if m == nil || len(m.pattern) == 0 {
		return []segment{{s: s}}
	}
	var out []segment
	startOffset := 0 // end of the last emitted token
	for i := 0; i < len(s); {
		at := i
		hit, _, _ := m.trie.Longest(func(k int) (byte, bool) {
			if at+k < len(s) {
				return s[at+k], true
			}
			return 0, false
		})
		if hit == nil {
			i++
			continue
		}
		start, stop := i, i+len(m.pattern[hit])
		i = stop
		if hit.singleWord {
			r1, _ := utf8.DecodeLastRuneInString(s[:start])
			r2, _ := utf8.DecodeRuneInString(s[stop:])
			if (start > 0 && isWordChar(r1)) || (stop < len(s) && isWordChar(r2)) {
				continue
			}
		}
		if hit.lstrip {
			j := start
			for j > 0 {
				r, n := utf8.DecodeLastRuneInString(s[:j])
				if !unicode.IsSpace(r) {
					break
				}
				j -= n
			}
			start = max(j, startOffset)
		}
		if hit.rstrip {
			for stop < len(s) {
				r, n := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += n
			}
		}
		if startOffset < start {
			out = append(out, segment{s: s[startOffset:start], start: startOffset})
		}
		out = append(out, segment{s: s[start:stop], start: start, tok: hit})
		startOffset = stop
		i = max(i, stop)
	}
	if startOffset < len(s) {
		out = append(out, segment{s: s[startOffset:], start: startOffset})
	}
	return out
}
