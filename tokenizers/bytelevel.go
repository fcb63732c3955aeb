package tokenizers

import (
	"strings"
	"unicode/utf8"
)

// The GPT-2 byte-to-character table (tokenizers pre_tokenizers/byte_level.rs bytes_char): the printable bytes
// '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68 bytes map, in byte order, to U+0100 and up.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printable(b) {
			r = rune(256 + n)
			n++
		}
		b2r[b] = r
		r2b[r] = byte(b)
	}
	return b2r, r2b
}()

// byteLevelEncode maps every byte of s to its character.
func byteLevelEncode(s string) string {
	out := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = byteToRune[s[i]]
	}
	return string(out)
}

// gpt2Pattern is the ByteLevel pre-tokenizer's regex when use_regex is true (pre_tokenizers/byte_level.rs).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// lossyUTF8 converts b to a string as Rust's String::from_utf8_lossy does: each maximal prefix of a valid
// UTF-8 sequence that is cut short, and each byte that cannot start one, becomes one U+FFFD (the Unicode
// "substitution of maximal subparts" of chapter 3, table 3-7).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			sb.WriteByte(c)
			i++
			continue
		}
		n, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			n = 2
		case c == 0xE0:
			n, lo = 3, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			n = 3
		case c == 0xED:
			n, hi = 3, 0x9F
		case c == 0xF0:
			n, lo = 4, 0x90
		case c >= 0xF1 && c <= 0xF3:
			n = 4
		case c == 0xF4:
			n, hi = 4, 0x8F
		}
		k := 1
		for ; n > 0 && k < n && i+k < len(b); k++ {
			if b[i+k] < lo || b[i+k] > hi {
				break
			}
			lo, hi = 0x80, 0xBF
		}
		if n > 0 && k == n {
			sb.Write(b[i : i+n])
		} else {
			sb.WriteString("\uFFFD")
		}
		i += k
	}
	return sb.String()
}
