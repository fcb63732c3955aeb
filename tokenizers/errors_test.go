package tokenizers

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// minimal is a valid byte-level tokenizer.json with two merges; tests edit it.
const minimal = `{"version":"1.0","truncation":null,"padding":null,
"added_tokens":[{"id":5,"content":"<|eos|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
"normalizer":null,
"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},
"post_processor":null,
"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},
"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,
 "fuse_unk":false,"byte_fallback":false,"vocab":{"a":0,"b":1,"ab":2,"Ġ":3,"Ġab":4},"merges":["a b","Ġ ab"]}}`

func TestMinimal(t *testing.T) {
	tok, err := Parse([]byte(minimal), "minimal")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode("ab ab<|eos|>", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{2, 4, 5}; !equal(ids, want) {
		t.Fatalf("got %v, want %v", ids, want)
	}
	if got := tok.Decode(ids, false); got != "ab ab<|eos|>" {
		t.Fatalf("decode: %q", got)
	}
	if got := tok.Decode(ids, true); got != "ab ab" {
		t.Fatalf("decode skipping specials: %q", got)
	}
	// A character outside the vocabulary with no unk_token and no byte fallback is dropped, as in the library.
	if ids, _ := tok.Encode("c", false); len(ids) != 0 {
		t.Fatalf("unknown character: %v", ids)
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStrictErrors: unknown keys and unsupported components are refused with their place in the file.
func TestStrictErrors(t *testing.T) {
	cases := []struct{ old, new, want string }{
		{`"use_regex":true},
"post`, `"use_regex":true,"colour":1},
"post`, `pre_tokenizer: unknown key "colour"`},
		{`{"type":"ByteLevel","add_prefix_space":false`, `{"type":"Sequence","pretokenizers":[{"type":"Punctuation","behavior":"Isolated"}]},"x":{"type":"ByteLevel","add_prefix_space":false`, `top level: unknown key "x"`},
		{`"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`, `"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"Punctuation","behavior":"Isolated"}]}`, `pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type "Punctuation"`},
		{`"normalizer":null`, `"normalizer":{"type":"BertNormalizer"}`, `normalizer: unsupported normalizer type "BertNormalizer"`},
		{`"post_processor":null`, `"post_processor":{"type":"RobertaProcessing"}`, `post_processor: unsupported post-processor type "RobertaProcessing"`},
		{`"decoder":{"type":"ByteLevel"`, `"decoder":{"type":"CTC"`, `decoder: unsupported decoder type "CTC"`},
		{`"model":{"type":"BPE"`, `"model":{"type":"Unigram"`, `model: unsupported model type "Unigram"`},
		{`"dropout":null`, `"dropout":0.1`, `dropout 0.1 is not supported`},
		{`"merges":["a b","Ġ ab"]`, `"merges":["a b","Ġ zz"]`, `model.merges[1]: "Ġ" "zz": a token of the pair is not in the vocab`},
		{`"merges":["a b","Ġ ab"]`, `"merges":["a b c"]`, `is not two tokens separated by one space`},
		{`"unk_token":null`, `"unk_token":"<unk>"`, `unk_token "<unk>" is not in the vocab`},
		{`"post_processor":null`, `"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[],"special_tokens":{"<s>":{"id":"<s>","ids":[9],"tokens":["<s>"]}}}`, `post_processor.special_tokens["<s>"]: id 9 is not in the vocabulary`},
		{`"post_processor":null`, `"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}}],"pair":[],"special_tokens":{"<s>":{"id":"<s>","ids":[5],"tokens":["<s>"]}}}`, `id 5 is "<|eos|>" in the vocabulary, not "<s>"`},
		{`{"type":"ByteLevel","add_prefix_space":false`, `{"type":"ByteLevel","Add_prefix_space":false`, `Add_prefix_space`},
		{`"use_regex":true},
"post`, `"use_regex":"yes"},
"post`, `pre_tokenizer: key "use_regex" holds a JSON string`},
	}
	for _, c := range cases {
		src := strings.Replace(minimal, c.old, c.new, 1)
		if src == minimal {
			t.Fatalf("edit %q not applied", c.old)
		}
		_, err := Parse([]byte(src), "x/tokenizer.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "x/tokenizer.json") {
			t.Errorf("edit %q: got %v, want an error containing %q and the file name", c.new, err, c.want)
		}
	}
}

// TestInvalidUTF8: text that is not UTF-8 is an error naming the byte.
func TestInvalidUTF8(t *testing.T) {
	tok, err := Parse([]byte(minimal), "minimal")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tok.Encode("ab\xffab", false)
	if !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), "0xff at byte offset 2") {
		t.Fatalf("got %v", err)
	}
}

// TestLossyUTF8 checks the maximal-subpart replacement of Rust's from_utf8_lossy.
func TestLossyUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"a\xF0\x9F\x98b":      "a\uFFFDb",           // a 4-byte sequence cut short: one U+FFFD
		"\xE1\x9A":            "\uFFFD",             // cut short at the end
		"\x80\x80":            "\uFFFD\uFFFD",       // lone continuation bytes: one each
		"\xED\xA0\x80":        "\uFFFD\uFFFD\uFFFD", // a surrogate: ED is not followed by A0..BF
		"\xC0\xAF":            "\uFFFD\uFFFD",       // overlong
		"ok \xF0\x9F\x98\x80": "ok 😀",
	} {
		if got := lossyUTF8([]byte(in)); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// TestRoundTrip: decode(encode(x)) == x for the real and tiny tokenizers on every golden text the library
// round-trips (its decoded_plain equals the text).
func TestRoundTrip(t *testing.T) {
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(tokenizerPath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range readGolden(t, name).Cases {
				if c.DecodedPlain != c.Text {
					continue
				}
				ids, _ := tok.Encode(c.Text, false)
				if got := tok.Decode(ids, false); got != c.Text {
					t.Errorf("%q: decoded %q", c.Text, got)
				}
				n++
			}
			if n < 5 {
				t.Fatalf("only %d texts round-trip in the library's goldens", n)
			}
		})
	}
}

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil || tok.VocabSize() != 6 {
		t.Fatalf("%v %v", tok, err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file loaded")
	}
}
