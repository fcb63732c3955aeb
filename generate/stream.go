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

// StreamText returns an emit function for Generate that writes the text of the generated tokens to w as
// they come: each call decodes all tokens so far and writes what is new, holding back a trailing U+FFFD
// (an incomplete UTF-8 character of a byte-level or byte-fallback token) until the next token completes it.
// Special tokens are left out when skipSpecial. Flush writes what is held back at the end.
func StreamText(w io.Writer, dec Decoder, skipSpecial bool) (emit func(id int32) error, flush func() error) {
	var ids []int32
	written := ""
	write := func(final bool) error {
		text := dec.Decode(ids, skipSpecial)
		if !final {
			text = strings.TrimRight(text, "\uFFFD")
		}
		if !strings.HasPrefix(text, written) {
			// A decoder changed earlier text (a Metaspace/Strip decoder drops the first space): write from
			// the first differing character.
			n := 0
			for n < len(text) && n < len(written) && text[n] == written[n] {
				n++
			}
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
			written = text[:n]
		}
		if _, err := io.WriteString(w, text[len(written):]); err != nil {
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
