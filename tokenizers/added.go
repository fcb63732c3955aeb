package tokenizers

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of added_tokens.
type addedToken struct {
	id                                              int32
	content                                         string
	singleWord, lstrip, rstrip, normalized, special bool
}

// addedMatcher finds added tokens in text, leftmost-longest as the library's aho-corasick automaton with
// MatchKind::LeftmostLongest does (tokenizer/added_vocabulary.rs find_matches).
type addedMatcher struct {
	byFirst map[byte][]*addedToken // longest first
	pattern map[*addedToken]string // the text searched for (normalized content for normalized tokens)
}

func newAddedMatcher(toks []*addedToken, text func(*addedToken) string) *addedMatcher {
	m := &addedMatcher{byFirst: map[byte][]*addedToken{}, pattern: map[*addedToken]string{}}
	for _, t := range toks {
		p := text(t)
		if p == "" {
			continue
		}
		m.pattern[t] = p
		m.byFirst[p[0]] = append(m.byFirst[p[0]], t)
	}
	for _, l := range m.byFirst {
		sort.SliceStable(l, func(i, j int) bool { return len(m.pattern[l[i]]) > len(m.pattern[l[j]]) })
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
	if m == nil || len(m.byFirst) == 0 {
		return []segment{{s: s}}
	}
	var out []segment
	startOffset := 0 // end of the last emitted token
	for i := 0; i < len(s); {
		var hit *addedToken
		for _, t := range m.byFirst[s[i]] {
			p := m.pattern[t]
			if len(p) <= len(s)-i && s[i:i+len(p)] == p {
				hit = t
				break
			}
		}
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
