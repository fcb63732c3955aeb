package tokenizers

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// decoder turns tokens back into text pieces (tokenizers/src/decoders, decode_chain).
type decoder interface {
	decodeChain(toks []string) []string
}

type decSequence []decoder

func (q decSequence) decodeChain(toks []string) []string {
	for _, d := range q {
		toks = d.decodeChain(toks)
	}
	return toks
}

// decByteLevel maps characters back to bytes; a token with a character outside the table keeps its own
// bytes. The bytes of all tokens are joined and invalid UTF-8 becomes U+FFFD (String::from_utf8_lossy).
type decByteLevel struct{}

func (decByteLevel) decodeChain(toks []string) []string {
	var b []byte
	for _, t := range toks {
		start := len(b)
		ok := true
		for _, r := range t {
			c, in := runeToByte[r]
			if !in {
				ok = false
				break
			}
			b = append(b, c)
		}
		if !ok {
			b = append(b[:start], t...)
		}
	}
	return []string{lossyUTF8(b)}
}

// decMetaspace turns the replacement character into spaces and drops the space it put before the first token.
type decMetaspace struct {
	replacement string
	scheme      string
}

func (d decMetaspace) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		t = strings.ReplaceAll(t, d.replacement, " ")
		if i == 0 && d.scheme != prependNever {
			t = strings.TrimPrefix(t, " ")
		}
		out[i] = t
	}
	return out
}

type decReplace struct{ pattern, content string }

func (d decReplace) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = strings.ReplaceAll(t, d.pattern, d.content)
	}
	return out
}

// decByteFallback turns runs of <0xXX> tokens into the text they spell, or one U+FFFD per token of a run
// that is not valid UTF-8.
type decByteFallback struct{}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range t[3:5] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | byte(c-'0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | byte(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

func (decByteFallback) decodeChain(toks []string) []string {
	var out []string
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type decFuse struct{}

func (decFuse) decodeChain(toks []string) []string { return []string{strings.Join(toks, "")} }

// decStrip removes up to start leading and stop trailing copies of content from each token.
type decStrip struct {
	content     rune
	start, stop int
}

func (d decStrip) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		a, b := 0, len(rs)
		for k := 0; k < d.start && a < b && rs[a] == d.content; k++ {
			a++
		}
		for k := 0; k < d.stop && b > a && rs[b-1] == d.content; k++ {
			b--
		}
		out[i] = string(rs[a:b])
	}
	return out
}

// parseDecoder builds the decoder of raw (nil for JSON null).
func parseDecoder(raw json.RawMessage, where string) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw, where)
	if err != nil {
		return nil, err
	}
	var plain struct {
		Type string `json:"type"`
	}
	switch typ {
	case "Sequence":
		var j struct {
			Type     string            `json:"type"`
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		q, err := parseEach(j.Decoders, where+".decoders", parseDecoder)
		if err != nil {
			return nil, err
		}
		return decSequence(q), nil
	case "ByteLevel":
		var j byteLevelJSON
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		return decByteLevel{}, nil
	case "Metaspace":
		var j metaspaceJSON
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		p, err := j.build(where)
		if err != nil {
			return nil, err
		}
		return decMetaspace{p.replacement, p.scheme}, nil
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
		if isRe {
			return nil, fmt.Errorf("%s: a Regex pattern in the Replace decoder is not supported", where)
		}
		return decReplace{p, j.Content}, nil
	case "ByteFallback", "Fuse":
		if err := strict(raw, &plain, where); err != nil {
			return nil, err
		}
		if typ == "Fuse" {
			return decFuse{}, nil
		}
		return decByteFallback{}, nil
	case "Strip":
		var j struct {
			Type    string `json:"type"`
			Content string `json:"content"`
			Start   int    `json:"start"`
			Stop    int    `json:"stop"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(j.Content) != 1 {
			return nil, fmt.Errorf("%s: content %q must be one character", where, j.Content)
		}
		r, _ := utf8.DecodeRuneInString(j.Content)
		return decStrip{r, j.Start, j.Stop}, nil
	}
	return nil, unsupported(where, "decoder", typ, "Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip")
}
