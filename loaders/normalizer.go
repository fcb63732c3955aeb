package loaders

//go:generate go run normalizer_tables_gen.go

import (
	"sort"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// BertNormalizer is the BERT text normalizer of Hugging Face tokenizers ("type": "BertNormalizer" in
// tokenizer.json, tokenizers/src/normalizers/bert.rs), implemented here rather than taken from
// github.com/sugarme/tokenizer, whose version differs from Hugging Face on whitespace, control characters, the
// CJK ranges and strip_accents null (github.com/sugarme/tokenizer v0.3.0's source). The steps run in Hugging Face's order:
//
//  1. CleanText: drop U+0000, U+FFFD and "other" characters (see hfOther: Cc, Cf and six private-use code
//     points, exactly the unicode_categories crate that tokenizers uses) except \t \n \r; map every Unicode
//     White_Space character to ' '.
//  2. HandleChineseChars: surround each CJK ideograph (isChineseChar) with spaces.
//  3. Strip accents (StripAccents, or Lowercase when StripAccents is nil, as HF's null): canonical
//     decomposition (NFD), then drop nonspacing marks (Mn, from the same crate's table).
//  4. Lowercase: per-character Unicode lowercase as Rust's char::to_lowercase (İ becomes "i̇").
//
// Known residual differences: NFD and lowercase use Go's Unicode 15 tables (plus the Unicode 16/17 lowercase
// pairs in lowerDelta), so only characters assigned after that can differ from a Rust build with newer tables.
type BertNormalizer struct {
	CleanText          bool  // clean_text
	HandleChineseChars bool  // handle_chinese_chars
	StripAccents       *bool // strip_accents; nil (JSON null) means "same as Lowercase"
	Lowercase          bool  // lowercase
}

// DefaultBertNormalizer returns Hugging Face's defaults, those of bert-base-uncased: clean_text true,
// handle_chinese_chars true, strip_accents null, lowercase true.
func DefaultBertNormalizer() BertNormalizer {
	return BertNormalizer{CleanText: true, HandleChineseChars: true, Lowercase: true}
}

// stripsAccents reports whether accents are stripped: StripAccents when set, else Lowercase.
func (n BertNormalizer) stripsAccents() bool {
	if n.StripAccents != nil {
		return *n.StripAccents
	}
	return n.Lowercase
}

// Normalize returns the normalized form of s.
func (n BertNormalizer) Normalize(s string) string {
	return string(n.normalize(newNormalized(s, 0)).runes)
}

// normalized is a text being normalized: its runes, and for each rune the span [start, end) in code points of
// the original input it comes from (Hugging Face's alignments, kept in code points because tune reports
// offsets in code points as HF's Python API does).
type normalized struct {
	runes []rune
	orig  [][2]int
}

// newNormalized wraps s, whose first code point is at position base of the original input.
func newNormalized(s string, base int) normalized {
	rs := []rune(s)
	orig := make([][2]int, len(rs))
	for i := range rs {
		orig[i] = [2]int{base + i, base + i + 1}
	}
	return normalized{runes: rs, orig: orig}
}

// push appends r coming from the original span o.
func (t *normalized) push(r rune, o [2]int) {
	t.runes = append(t.runes, r)
	t.orig = append(t.orig, o)
}

func (n BertNormalizer) normalize(in normalized) normalized {
	if n.CleanText {
		in = cleanText(in)
	}
	if n.HandleChineseChars {
		in = spaceChineseChars(in)
	}
	if n.stripsAccents() {
		in = stripAccents(in)
	}
	if n.Lowercase {
		in = lowercase(in)
	}
	return in
}

// isBertWhitespace is HF's is_whitespace in normalizers/bert.rs: \t \n \r or Rust's char::is_whitespace,
// which is the Unicode White_Space property.
func isBertWhitespace(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.White_Space, r)
}

// isBertControl is HF's is_control: the crate's is_other() (hfOther), except \t \n \r.
func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.Is(hfOther, r)
}

// isChineseChar reports whether r is in the CJK ranges of HF's is_chinese_char (normalizers/bert.rs).
func isChineseChar(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF,
		r >= 0x20000 && r <= 0x2A6DF, r >= 0x2A700 && r <= 0x2B73F,
		r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// withCap returns an empty normalized text with room for n runes.
func withCap(n int) normalized {
	return normalized{runes: make([]rune, 0, n), orig: make([][2]int, 0, n)}
}

func cleanText(in normalized) normalized {
	out := withCap(len(in.runes))
	for i, r := range in.runes {
		if r == 0 || r == 0xFFFD || isBertControl(r) {
			continue
		}
		if isBertWhitespace(r) {
			r = ' '
		}
		out.push(r, in.orig[i])
	}
	return out
}

func spaceChineseChars(in normalized) normalized {
	out := withCap(len(in.runes) + 8)
	for i, r := range in.runes {
		if isChineseChar(r) {
			out.push(' ', in.orig[i])
			out.push(r, in.orig[i])
			out.push(' ', in.orig[i])
			continue
		}
		out.push(r, in.orig[i])
	}
	return out
}

// stripAccents applies NFD (each rune decomposed on its own, then canonical ordering of combining marks, each
// mark keeping the span of the rune it came from) and removes nonspacing marks.
func stripAccents(in normalized) normalized {
	dec := withCap(len(in.runes) + 4)
	var buf [64]byte
	for i, r := range in.runes {
		if r < 0x80 {
			dec.push(r, in.orig[i])
			continue
		}
		b := norm.NFD.Append(buf[:0], []byte(string(r))...)
		for _, d := range string(b) {
			dec.push(d, in.orig[i])
		}
	}
	canonicalOrder(dec)
	out := withCap(len(dec.runes))
	for i, r := range dec.runes {
		if unicode.Is(hfNonspacingMark, r) {
			continue
		}
		out.push(r, dec.orig[i])
	}
	return out
}

// canonicalOrder sorts each run of non-starters by canonical combining class, stably (Unicode §3.11), moving
// the spans along with the runes.
func canonicalOrder(t normalized) {
	var ccc []uint8
	for i, r := range t.runes {
		if r < 0x300 {
			continue
		}
		if ccc == nil {
			ccc = make([]uint8, len(t.runes))
		}
		ccc[i] = norm.NFD.PropertiesString(string(r)).CCC()
	}
	if ccc == nil {
		return
	}
	for lo := 0; lo < len(t.runes); lo++ {
		if ccc[lo] == 0 {
			continue
		}
		hi := lo
		for hi < len(t.runes) && ccc[hi] != 0 {
			hi++
		}
		if hi-lo > 1 {
			sort.Stable(markRun{t.runes[lo:hi], t.orig[lo:hi], ccc[lo:hi]})
		}
		lo = hi
	}
}

// markRun sorts a run of combining marks by class, keeping spans and classes in step.
type markRun struct {
	runes []rune
	orig  [][2]int
	ccc   []uint8
}

func (m markRun) Len() int           { return len(m.runes) }
func (m markRun) Less(i, j int) bool { return m.ccc[i] < m.ccc[j] }
func (m markRun) Swap(i, j int) {
	m.runes[i], m.runes[j] = m.runes[j], m.runes[i]
	m.orig[i], m.orig[j] = m.orig[j], m.orig[i]
	m.ccc[i], m.ccc[j] = m.ccc[j], m.ccc[i]
}

func lowercase(in normalized) normalized {
	out := withCap(len(in.runes))
	for i, r := range in.runes {
		if r == 0x130 { // İ: Rust's to_lowercase gives i + U+0307 COMBINING DOT ABOVE (SpecialCasing.txt)
			out.push('i', in.orig[i])
			out.push(0x307, in.orig[i])
			continue
		}
		out.push(toLower(r), in.orig[i])
	}
	return out
}

// lowerDelta holds the lowercase mappings added in Unicode 16 and 17, which Go's Unicode 15 tables lack and
// Rust's char::to_lowercase (Rust ≥ 1.83) has: {lo, hi, delta}.
var lowerDelta = [][3]rune{
	{0x1C89, 0x1C89, 1},
	{0xA7CB, 0xA7CB, 0x0264 - 0xA7CB},
	{0xA7CC, 0xA7CC, 1}, {0xA7CE, 0xA7CE, 1}, {0xA7D2, 0xA7D2, 1}, {0xA7D4, 0xA7D4, 1}, {0xA7DA, 0xA7DA, 1},
	{0xA7DC, 0xA7DC, 0x019B - 0xA7DC},
	{0x10D50, 0x10D65, 0x20},
	{0x16EA0, 0x16EB8, 0x1B},
}

func toLower(r rune) rune {
	if r < 0x80 {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	if r >= 0x1C89 {
		for _, d := range lowerDelta {
			if r >= d[0] && r <= d[1] {
				return r + d[2]
			}
		}
	}
	return unicode.ToLower(r)
}
