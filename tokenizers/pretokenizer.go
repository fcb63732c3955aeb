package tokenizers

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// piece is one pre-token. atStart is true when it begins at offset 0 of the original text (Metaspace's
// prepend_scheme "first" looks at that, as offsets_original().0 == 0 does in the library).
type piece struct {
	s       string
	atStart bool
}

// preTokenizer cuts pieces into smaller ones (tokenizers/src/pre_tokenizers).
type preTokenizer interface {
	preTokenize(ps []piece) []piece
}

type preSequence []preTokenizer

func (q preSequence) preTokenize(ps []piece) []piece {
	for _, p := range q {
		ps = p.preTokenize(ps)
	}
	return ps
}

// behavior is a SplitDelimiterBehavior.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{"Removed": removed, "Isolated": isolated,
	"MergedWithPrevious": mergedWithPrevious, "MergedWithNext": mergedWithNext, "Contiguous": contiguous}

// span is a byte range of a piece and whether it is a delimiter match.
type span struct {
	start, end int
	match      bool
}

// spansOf covers s with the matches (sorted, non-overlapping byte ranges) and the gaps between them.
func spansOf(s string, matches [][]int, invert bool) []span {
	var out []span
	prev := 0
	for _, m := range matches {
		if prev < m[0] {
			out = append(out, span{prev, m[0], invert})
		}
		out = append(out, span{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev < len(s) {
		out = append(out, span{prev, len(s), invert})
	}
	return out
}

// applyBehavior merges or drops the spans as normalizer.rs NormalizedString::split does, then drops empty ones.
func applyBehavior(sp []span, b behavior) []span {
	var acc []span
	prevMatch := false
	switch b {
	case isolated:
		acc = sp
	case removed:
		for _, s := range sp {
			if !s.match {
				acc = append(acc, s)
			}
		}
	case mergedWithPrevious:
		for _, s := range sp {
			if s.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1].end = s.end
			} else {
				acc = append(acc, span{s.start, s.end, false})
			}
			prevMatch = s.match
		}
	case mergedWithNext:
		for i := len(sp) - 1; i >= 0; i-- {
			s := sp[i]
			if s.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1].start = s.start
			} else {
				acc = append(acc, span{s.start, s.end, false})
			}
			prevMatch = s.match
		}
		for i, j := 0, len(acc)-1; i < j; i, j = i+1, j-1 {
			acc[i], acc[j] = acc[j], acc[i]
		}
	case contiguous:
		for _, s := range sp {
			if s.match == prevMatch && len(acc) > 0 {
				acc[len(acc)-1].end = s.end
			} else {
				acc = append(acc, span{s.start, s.end, false})
			}
			prevMatch = s.match
		}
	}
	out := acc[:0:0]
	for _, s := range acc {
		if s.end > s.start {
			out = append(out, s)
		}
	}
	return out
}

// splitPieces cuts every piece at the matches find returns, with behaviour b.
func splitPieces(ps []piece, find func(string) [][]int, b behavior, invert bool) []piece {
	var out []piece
	for _, p := range ps {
		for _, s := range applyBehavior(spansOf(p.s, find(p.s), invert), b) {
			out = append(out, piece{p.s[s.start:s.end], p.atStart && s.start == 0})
		}
	}
	return out
}

// preSplit is the Split pre-tokenizer.
type preSplit struct {
	literal string
	re      *regexp2.Regexp
	b       behavior
	invert  bool
}

func (p preSplit) find(s string) [][]int {
	if p.re != nil {
		return findAll(p.re, s)
	}
	if p.literal == "" {
		return nil
	}
	var out [][]int
	for i := 0; ; {
		j := strings.Index(s[i:], p.literal)
		if j < 0 {
			return out
		}
		out = append(out, []int{i + j, i + j + len(p.literal)})
		i += j + len(p.literal)
	}
}

func (p preSplit) preTokenize(ps []piece) []piece { return splitPieces(ps, p.find, p.b, p.invert) }

// charMatches returns one match per character of s for which f is true (the library's char patterns).
func charMatches(s string, f func(rune) bool) [][]int {
	var out [][]int
	for i, r := range s {
		if f(r) {
			out = append(out, []int{i, i + utf8.RuneLen(r)})
		}
	}
	return out
}

// preDigits is the Digits pre-tokenizer: each number character alone, or runs of them (char::is_numeric,
// the Unicode N categories).
type preDigits struct{ individual bool }

func (p preDigits) preTokenize(ps []piece) []piece {
	b := contiguous
	if p.individual {
		b = isolated
	}
	return splitPieces(ps, func(s string) [][]int { return charMatches(s, unicode.IsNumber) }, b, false)
}

// preByteLevel is the ByteLevel pre-tokenizer: an optional space before each piece that lacks one, the GPT-2
// regex split when useRegex, then every byte mapped to its character.
type preByteLevel struct {
	addPrefixSpace bool
	re             *regexp2.Regexp // nil: no regex split
}

func (p preByteLevel) preTokenize(ps []piece) []piece {
	if p.addPrefixSpace {
		for i := range ps {
			if !strings.HasPrefix(ps[i].s, " ") {
				ps[i].s = " " + ps[i].s
			}
		}
	}
	if p.re != nil {
		ps = splitPieces(ps, func(s string) [][]int { return findAll(p.re, s) }, isolated, false)
	}
	for i := range ps {
		ps[i].s = byteLevelEncode(ps[i].s)
	}
	return ps
}

// prepend schemes of Metaspace.
const (
	prependAlways = "always"
	prependFirst  = "first"
	prependNever  = "never"
)

// preMetaspace is the Metaspace pre-tokenizer: spaces become the replacement character, which is also
// prepended (always, or only to the piece at the start of the text), and with split the text is cut before
// each replacement character.
type preMetaspace struct {
	replacement string
	scheme      string
	split       bool
}

func (p preMetaspace) preTokenize(ps []piece) []piece {
	for i := range ps {
		s := strings.ReplaceAll(ps[i].s, " ", p.replacement)
		if !strings.HasPrefix(s, p.replacement) && (p.scheme == prependAlways || p.scheme == prependFirst && ps[i].atStart) {
			s = p.replacement + s
		}
		ps[i].s = s
	}
	if p.split {
		r, _ := utf8.DecodeRuneInString(p.replacement)
		ps = splitPieces(ps, func(s string) [][]int { return charMatches(s, func(c rune) bool { return c == r }) }, mergedWithNext, false)
	}
	return ps
}

// metaspaceJSON is the shape of the Metaspace pre-tokenizer and decoder; add_prefix_space and str_rep are the
// keys of files written before tokenizers 0.14 (add_prefix_space true meant prepend_scheme "always").
type metaspaceJSON struct {
	Type           string  `json:"type"`
	Replacement    string  `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	Split          *bool   `json:"split"`
	AddPrefixSpace *bool   `json:"add_prefix_space"`
	StrRep         *string `json:"str_rep"`
}

func (j metaspaceJSON) build(where string) (preMetaspace, error) {
	p := preMetaspace{replacement: j.Replacement, scheme: prependAlways, split: true}
	if utf8.RuneCountInString(j.Replacement) != 1 {
		return p, fmt.Errorf("%s: replacement %q must be one character", where, j.Replacement)
	}
	if j.AddPrefixSpace != nil && !*j.AddPrefixSpace {
		p.scheme = prependNever
	}
	if j.PrependScheme != nil {
		switch *j.PrependScheme {
		case prependAlways, prependFirst, prependNever:
			p.scheme = *j.PrependScheme
		default:
			return p, fmt.Errorf("%s: prepend_scheme %q is not always, first or never", where, *j.PrependScheme)
		}
	}
	if j.Split != nil {
		p.split = *j.Split
	}
	return p, nil
}

// byteLevelJSON is the shape of the ByteLevel pre-tokenizer, post-processor and decoder.
type byteLevelJSON struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	TrimOffsets    bool   `json:"trim_offsets"`
	UseRegex       *bool  `json:"use_regex"`
}

// parsePreTokenizer builds the pre-tokenizer of raw (nil for JSON null).
func parsePreTokenizer(raw json.RawMessage, where string) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw, where)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var j struct {
			Type          string            `json:"type"`
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		q, err := parseEach(j.PreTokenizers, where+".pretokenizers", parsePreTokenizer)
		if err != nil {
			return nil, err
		}
		return preSequence(q), nil
	case "Split":
		var j struct {
			Type     string      `json:"type"`
			Pattern  patternJSON `json:"pattern"`
			Behavior string      `json:"behavior"`
			Invert   bool        `json:"invert"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		p, isRe, err := patternOf(j.Pattern, where)
		if err != nil {
			return nil, err
		}
		b, ok := behaviors[j.Behavior]
		if !ok {
			return nil, fmt.Errorf("%s: behavior %q is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", where, j.Behavior)
		}
		s := preSplit{literal: p, b: b, invert: j.Invert}
		if isRe {
			if s.re, err = compileRegex(p, where); err != nil {
				return nil, err
			}
		}
		return s, nil
	case "ByteLevel":
		var j byteLevelJSON
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		p := preByteLevel{addPrefixSpace: j.AddPrefixSpace}
		if j.UseRegex == nil || *j.UseRegex {
			if p.re, err = compileRegex(gpt2Pattern, where); err != nil {
				return nil, err
			}
		}
		return p, nil
	case "Metaspace":
		var j metaspaceJSON
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		return j.build(where)
	case "Digits":
		var j struct {
			Type       string `json:"type"`
			Individual bool   `json:"individual_digits"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		return preDigits{j.Individual}, nil
	}
	return nil, unsupported(where, "pre-tokenizer", typ, "Sequence, Split, ByteLevel, Metaspace, Digits")
}
