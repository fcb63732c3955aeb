package generate

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Decoder is what StreamText needs of a tokenizer.
type Decoder interface {
	// Decode turns ids into text (tokenizers.Tokenizer.Decode).
	Decode(ids []int32, skipSpecial bool) string
}

// tokener is a Decoder that also names its tokens (tokenizers.Tokenizer.Token), which lets StreamText see
// byte-fallback tokens ("<0x2D>").
type tokener interface {
	Token(id int32) (string, bool)
}

// isByteToken reports whether tok is a byte-fallback token, "<0xHH>".
func isByteToken(tok string) bool {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return false
	}
	for _, c := range tok[3:5] {
		if !strings.ContainsRune("0123456789ABCDEFabcdef", c) {
			return false
		}
	}
	return true
}

// StreamText returns an emit function for Generate that writes the text of the generated tokens to w as
// they come: each call decodes all tokens so far and writes what is new, holding back a trailing U+FFFD
// (an incomplete UTF-8 character of a byte-level or byte-fallback token) until the next token completes it.
// Special tokens are left out when skipSpecial. Flush writes what is held back at the end.
//
// The decoding of more tokens need not extend the last one: a Metaspace/Strip decoder drops a first space,
// and byte fallback decodes a run of byte tokens that is not valid UTF-8 yet as one U+FFFD per byte,
// taking back a character of the run already written (transformers' ByteFallback decoder). Text that only
// got shorter is held until the decoding grows past what was written; text that differs is written from the
// first differing character (what is on the terminal cannot be taken back). So that the second case does
// not happen, a decoder that names its tokens (tokenizers.Tokenizer) has a trailing run of byte-fallback
// tokens held back until a token of another kind ends it.
func StreamText(w io.Writer, dec Decoder, skipSpecial bool) (emit func(id int32) error, flush func() error) {
	var ids []int32
	written := ""
	tk, _ := dec.(tokener)
	write := func(final bool) error {
		k := len(ids)
		for !final && tk != nil && k > 0 {
			if tok, ok := tk.Token(ids[k-1]); !ok || !isByteToken(tok) {
				break
			}
			k--
		}
		text := dec.Decode(ids[:k], skipSpecial)
		if !final {
			text = strings.TrimRight(text, "\uFFFD")
		}
		n := 0
		for n < len(text) && n < len(written) && text[n] == written[n] {
			n++
		}
		if n == len(text) {
			return nil // nothing beyond what was written (or only shorter): wait for more tokens
		}
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		if _, err := io.WriteString(w, text[n:]); err != nil {
			return err
		}
		written = text
		return nil
	}
	return func(id int32) error {
			ids = append(ids, id)
			return write(false)
		}, func() error {
			return write(true)
		}
}
