package tokenizers

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text of one piece (tokenizers/src/normalizers).
type normalizer interface {
	normalize(s string) string
}

type normSequence []normalizer

func (q normSequence) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

type normForm struct{ f norm.Form }

func (n normForm) normalize(s string) string { return n.f.String(s) }

type normLowercase struct{}

// normalize lowercases as Rust's str::to_lowercase does; U+0130 becomes "i\u0307" there, unlike Go's ToLower.
func (normLowercase) normalize(s string) string {
	return strings.Map(unicode.ToLower, strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

type normPrepend struct{ prefix string }

// normalize prepends to non-empty text only (normalizers/prepend.rs).
func (n normPrepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prefix + s
}

type normReplace struct {
	literal string
	re      *regexp2.Regexp
	content string
}

func (n normReplace) normalize(s string) string {
	if n.re == nil {
		if n.literal == "" {
			return s
		}
		return strings.ReplaceAll(s, n.literal, n.content)
	}
	var b strings.Builder
	last := 0
	for _, m := range findAll(n.re, s) {
		b.WriteString(s[last:m[0]])
		b.WriteString(n.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

type normStrip struct{ left, right bool }

func (n normStrip) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// parseNormalizer builds the normalizer of raw (nil for JSON null).
func parseNormalizer(raw json.RawMessage, where string) (normalizer, error) {
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
			Type        string            `json:"type"`
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		q, err := parseEach(j.Normalizers, where+".normalizers", parseNormalizer)
		if err != nil {
			return nil, err
		}
		return normSequence(q), nil
	case "NFC", "NFD", "NFKC", "NFKD", "Lowercase":
		var j struct {
			Type string `json:"type"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		forms := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}
		if typ == "Lowercase" {
			return normLowercase{}, nil
		}
		return normForm{forms[typ]}, nil
	case "Prepend":
		var j struct {
			Type    string `json:"type"`
			Prepend string `json:"prepend"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		return normPrepend{j.Prepend}, nil
	case "Replace":
		var j struct {
			Type    string      `json:"type"`
			Pattern patternJSON `json:"pattern"`
			Content string      `json:"content"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		p, isRe, err := patternOf(j.Pattern, where)
		if err != nil {
			return nil, err
		}
		n := normReplace{literal: p, content: j.Content}
		if isRe {
			if n.re, err = compileRegex(p, where); err != nil {
				return nil, err
			}
		}
		return n, nil
	case "Strip":
		var j struct {
			Type  string `json:"type"`
			Left  bool   `json:"strip_left"`
			Right bool   `json:"strip_right"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		return normStrip{j.Left, j.Right}, nil
	}
	return nil, unsupported(where, "normalizer", typ, "Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip")
}

// compileRegex compiles a pattern of tokenizer.json (Oniguruma syntax in the library) with regexp2.
func compileRegex(p, where string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(p, regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return nil, fmt.Errorf("%s.pattern: regex %q does not compile: %v", where, p, err)
	}
	return re, nil
}

// findAll returns the byte ranges of the successive non-overlapping matches of re in s (valid UTF-8).
func findAll(re *regexp2.Regexp, s string) [][]int {
	m, err := re.FindAllStringIndex(s, -1)
	if err != nil {
		// regexp2 fails only on a timeout, and none is set.
		panic(fmt.Sprintf("tokenizers: regex %q: %v", re.String(), err))
	}
	return m
}
