package tokenizers

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text of one piece (tokenizers/src/normalizers). A step whose result would pass
// limit bytes panics with a *limitError before it builds it (normalizeText recovers it).
type normalizer interface {
	normalize(s string, limit int) string
}

// MaxGrowth bounds what the normalizer may make of a text of n bytes: at most MaxGrowth·n + 1024 bytes (NFKD
// of the widest compatibility character, U+FDFA, gives 18 characters of 3 bytes for its 3; a Prepend of "▁"
// adds 3 bytes). A tokenizer.json whose normalizer grows text beyond it (a Replace of "a" by "aa" 40 times, a
// Prepend of 10 MB) is refused when it does, naming the step, instead of allocating without bound.
const MaxGrowth = 16

// normalizeText runs n on s within MaxGrowth, returning the error of a step that passes it.
func normalizeText(n normalizer, s string) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			le, ok := r.(*limitError)
			if !ok {
				panic(r)
			}
			out, err = "", le
		}
	}()
	return n.normalize(s, MaxGrowth*len(s)+1024), nil
}

// limitError is a limit on what a tokenizer.json may make tune do, passed (panicking) out of the
// normalizers and pre-tokenizers to Encode and Parse.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// overLimit panics with a *limitError when a step named what would make a text of want bytes.
func overLimit(what string, want, limit int) {
	if want > limit || want < 0 {
		panic(&limitError{fmt.Sprintf("the normalizer's %s would make %d bytes of the text, more than %d "+
			"(tune allows %d times the input's bytes + 1024: tokenizer.json's normalizer grows text without bound)", what, want, limit, MaxGrowth)})
	}
}

type normSequence []normalizer

func (q normSequence) normalize(s string, limit int) string {
	for _, n := range q {
		s = n.normalize(s, limit)
	}
	return s
}

type normForm struct{ f norm.Form }

func (n normForm) normalize(s string, limit int) string {
	out := n.f.String(s) // at most 18 characters per character (U+FDFA): bounded by the input
	overLimit("normalization form", len(out), limit)
	overLimit("normalization form", len(out), limit)
	return out
}

type normLowercase struct{}

// normalize lowercases as Rust's str::to_lowercase does; U+0130 becomes "i\u0307" there, unlike Go's ToLower.
func (normLowercase) normalize(s string, limit int) string {
	return strings.Map(unicode.ToLower, strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

type normPrepend struct{ prefix string }

// normalize prepends to non-empty text only (normalizers/prepend.rs).
func (n normPrepend) normalize(s string, limit int) string {
	if s == "" {
		return s
	}
	overLimit("Prepend", len(n.prefix)+len(s), limit)
	return n.prefix + s
}

type normReplace struct {
	literal string
	re      *regexp2.Regexp
	content string
}

func (n normReplace) normalize(s string, limit int) string {
	if n.re == nil {
		if n.literal == "" {
			return s
		}
		overLimit("Replace", len(s)+strings.Count(s, n.literal)*(len(n.content)-len(n.literal)), limit)
		return strings.ReplaceAll(s, n.literal, n.content)
	}
	matches := findAll(n.re, s)
	grow := 0
	for _, m := range matches {
		grow += len(n.content) - (m[1] - m[0])
	}
	overLimit("Replace", len(s)+grow, limit)
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(s[last:m[0]])
		b.WriteString(n.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

type normStrip struct{ left, right bool }

func (n normStrip) normalize(s string, _ int) string {
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

// MatchTimeout bounds one regex match of a tokenizer.json pattern. regexp2 backtracks, so a pattern with
// nested quantifiers ("(a+)+$") takes exponential time on a short line; the library's Oniguruma stops such a
// match at its retry limit (ONIG_DEFAULT_RETRY_LIMIT_IN_MATCH), tune at this time. The patterns of real
// tokenizers match in microseconds.
var MatchTimeout = time.Second

// compileRegex compiles a pattern of tokenizer.json (Oniguruma syntax in the library) with regexp2; where
// names it in errors.
func compileRegex(p, where string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(p, regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return nil, fmt.Errorf("%s.pattern: regex %q does not compile: %v", where, p, err)
	}
	re.MatchTimeout = MatchTimeout
	return re, nil
}

// findAll returns the byte ranges of the successive non-overlapping matches of re in s (valid UTF-8). A match
// that runs past MatchTimeout panics with a *limitError.
func findAll(re *regexp2.Regexp, s string) [][]int {
	m, err := re.FindAllStringIndex(s, -1)
	if err != nil {
		// err quotes the whole text (a row of up to 1 MiB): the length says enough.
		panic(&limitError{fmt.Sprintf("the regex %q takes more than %v on a text of %d bytes: its nested "+
			"quantifiers backtrack without bound; simplify the pattern", re.String(), MatchTimeout, len(s))})
	}
	return m
}
