package loaders

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// writeVariant copies testdata/tokenizer/b05_tokenizer.json into a temp dir after edit changed its JSON.
func writeVariant(t *testing.T, edit func(doc map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata(t, "tokenizer", "b05_tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenizerB05StripAccentsFollowsLowercase(t *testing.T) {
	tru, fal := true, false
	cases := []struct {
		lowercase    bool
		stripAccents *bool
		schoen       []int32 // schön
		Schoen       []int32 // Schön
		cafe         []int32 // café
	}{
		{false, nil, ids32(2, 4, 3), ids32(2, 12, 3), ids32(2, 10, 3)},
		{false, &fal, ids32(2, 4, 3), ids32(2, 12, 3), ids32(2, 10, 3)},
		{false, &tru, ids32(2, 11, 3), ids32(2, 1, 3), ids32(2, 9, 3)},
		{true, nil, ids32(2, 11, 3), ids32(2, 11, 3), ids32(2, 9, 3)},
		{true, &fal, ids32(2, 4, 3), ids32(2, 4, 3), ids32(2, 10, 3)},
	}
	for _, c := range cases {
		strip := "null"
		if c.stripAccents != nil {
			strip = map[bool]string{true: "true", false: "false"}[*c.stripAccents]
		}
		name := "lowercase=" + map[bool]string{true: "true", false: "false"}[c.lowercase] + ",strip_accents=" + strip
		t.Run(name, func(t *testing.T) {
			p := writeVariant(t, func(doc map[string]any) {
				n := doc["normalizer"].(map[string]any)
				n["lowercase"] = c.lowercase
				if c.stripAccents == nil {
					n["strip_accents"] = nil
				} else {
					n["strip_accents"] = *c.stripAccents
				}
			})
			tok, err := LoadTokenizer(p)
			if err != nil {
				t.Fatal(err)
			}
			for text, want := range map[string][]int32{"schön": c.schoen, "Schön": c.Schoen, "café": c.cafe} {
				e, err := tok.Encode(text, EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(e.IDs, want) {
					t.Errorf("%s: ids %v, want %v (tokens %q)", text, e.IDs, want, e.Tokens)
				}
			}
		})
	}
}

func TestBertNormalizer(t *testing.T) {
	def := DefaultBertNormalizer()
	keep := false
	cased := BertNormalizer{CleanText: true, HandleChineseChars: true, StripAccents: &keep, Lowercase: true}
	noClean := BertNormalizer{HandleChineseChars: false}
	cases := []struct {
		name string
		n    BertNormalizer
		in   string
		want string
	}{
		{"tokenizers' verified example", def, "Café\u00a0CAFÉ\u3000中文x", "cafe cafe  中  文 x"},
		{"U+0000, U+FFFD, Cf U+200B and BOM are dropped", def, "a\u0000b\ufffdc\u200bd\ufeffe", "abcde"},
		{"\\v \\f and NEL are controls, dropped before the whitespace mapping", def, "a\vb\fc\u0085d", "abcd"},
		{"\\t \\n \\r become spaces", def, "a\tb\nc\rd", "a b c d"},
		{"private-use end point U+E000 is dropped, U+E001 kept (unicode_categories lists end points only)", def, "\ue000\ue001", "\ue001"},
		{"unassigned U+0378 is kept (the crate's is_other has no Cn)", def, "\u0378", "\u0378"},
		{"CJK extension at U+2B920 is spaced, U+2B820 is not (HF range, not sugarme's)", def, "a\U0002B920b\U0002B820c", "a \U0002B920 b\U0002B820c"},
		{"İ with strip_accents: NFD then drop the dot, then lowercase", def, "İstanbul", "istanbul"},
		{"İ lowercased without stripping gives i + U+0307 as Rust", cased, "İ", "i\u0307"},
		{"final sigma is lowercased per character (σ), as Rust's char::to_lowercase", def, "ΟΔΟΣ", "οδοσ"},
		{"decomposed accents are removed too", def, "e\u0301", "e"},
		{"Mn marks of different classes are reordered, then dropped", def, "a\u0323\u0301b", "ab"},
		{"spacing mark Mc is not stripped", def, "क\u093e", "क\u093e"},
		{"spacing marks with combining classes are put in canonical order (226 after 216)", def, "x\U0001D16D\U0001D165", "x\U0001D165\U0001D16D"},
		{"clean_text off keeps controls", noClean, "a\u0000b", "a\u0000b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.n.Normalize(c.in); got != c.want {
				t.Errorf("Normalize(%+q) = %+q, want %+q", c.in, got, c.want)
			}
		})
	}
}

func TestBertNormalizerAlignments(t *testing.T) {
	// Every normalized rune must point back into the original text, in non-decreasing order.
	in := "Ça\u0301 İ 中\u00a0x\u0000y"
	n := DefaultBertNormalizer().normalize(newNormalized(in, 0))
	total := len([]rune(in))
	prev := 0
	for i, o := range n.orig {
		if o[0] < prev || o[1] <= o[0] || o[1] > total {
			t.Fatalf("rune %d (%q) has original span %v (previous start %d, %d runes)", i, n.runes[i], o, prev, total)
		}
		prev = o[0]
	}
}

func TestBertPreTokenize(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Hey friend!     How are you?!?", []string{"Hey", "friend", "!", "How", "are", "you", "?", "!", "?"}},
		{"", nil},
		{"   ", nil},
		{"a\u00a0b\u3000c", []string{"a", "b", "c"}},
		{"x«y»—z", []string{"x", "«", "y", "»", "—", "z"}},
		{"$5+3=8|~", []string{"$", "5", "+", "3", "=", "8", "|", "~"}},
		{"emoji😀here", []string{"emoji😀here"}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			rs := []rune(c.in)
			var got []string
			for _, w := range bertPreTokenize(rs, nil) {
				got = append(got, string(rs[w[0]:w[1]]))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestAddedTokenFlags(t *testing.T) {
	// A tokenizer with extra added tokens exercising lstrip, rstrip, single_word and normalized matching.
	p := writeVariant(t, func(doc map[string]any) {
		vocab := doc["model"].(map[string]any)["vocab"].(map[string]any)
		for i, w := range []string{"a", "b", "x", "hi", "there"} {
			vocab[w] = float64(20 + i)
		}
		add := func(id int, content string, single, l, r, norm bool) {
			doc["added_tokens"] = append(doc["added_tokens"].([]any), map[string]any{"id": id, "content": content,
				"single_word": single, "lstrip": l, "rstrip": r, "normalized": norm, "special": !norm})
		}
		add(30, "<mask>", false, true, true, false)
		add(31, "<w>", true, false, false, false)
		add(32, "Yesterday", false, false, false, true)
	})
	tok, err := LoadTokenizer(p)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		text    string
		want    []int32
		offsets map[int][2]int
	}{
		{"lstrip/rstrip swallow the spaces around the token", "hi <mask> there", ids32(2, 23, 30, 24, 3), map[int][2]int{2: {2, 10}}},
		{"single_word matches a free-standing token", "a <w> b", ids32(2, 20, 31, 21, 3), nil},
		{"single_word does not match inside a word", "x<w>", ids32(2, 22, 1, 1, 1, 3), nil},
		{"a normalized token matches after lowercasing", "a YESTERDAY b", ids32(2, 20, 32, 21, 3), map[int][2]int{2: {2, 11}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := tok.Encode(c.text, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.IDs, c.want) {
				t.Fatalf("ids %v, want %v (tokens %q)", e.IDs, c.want, e.Tokens)
			}
			for pos, off := range c.offsets {
				if e.Offsets[pos] != off {
					t.Errorf("offsets[%d] = %v, want %v", pos, e.Offsets[pos], off)
				}
			}
		})
	}
}

func TestLoadTokenizerErrors(t *testing.T) {
	good, err := os.ReadFile(testutil.Testdata(t, "tokenizer", "b05_tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		content string
		want    string // substring of the error
	}{
		{"not JSON", "{", "not a valid tokenizer.json"},
		{"BPE model", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, `model type "BPE" is not supported here: a BERT model takes a WordPiece tokenizer`},
		// Before, a Unigram tokenizer (T5, ALBERT) was told "tune reads WordPiece (BERT-family) tokenizers", also
		// from tune tokenize, which reads BPE too.
		{"Unigram model", `{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}`, `model type "Unigram" is not supported: tune reads WordPiece (BERT) and byte-pair-encoding`},
		{"empty vocab", `{"model": {"type": "WordPiece", "vocab": {}}}`, "model.vocab is empty"},
		{"negative id", `{"model": {"type": "WordPiece", "unk_token": "a", "vocab": {"a": -1}}}`, "not a valid id"},
		{"missing unk", `{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`, `unk_token "[UNK]" is not in model.vocab`},
		{"max_input_chars_per_word 0", `{"model": {"type": "WordPiece", "max_input_chars_per_word": 0, "vocab": {"[UNK]": 0}}}`, "must be at least 1"},
		{"max_input_chars_per_word 10^8 (findings5 #29: cubic time per word)", `{"model": {"type": "WordPiece", "max_input_chars_per_word": 100000000, "vocab": {"[UNK]": 0}}}`, "is more than tune's 200"},
		{"vocab id of the wrong type", `{"model": {"type": "WordPiece", "vocab": {"[UNK]": "zero"}}}`, "not a valid tokenizer.json"},
		{"unsupported normalizer", `{"normalizer": {"type": "NFKC"}, "model": {"vocab": {"[UNK]": 0}}}`, `normalizer type "NFKC"`},
		{"unsupported pre-tokenizer", `{"pre_tokenizer": {"type": "ByteLevel"}, "model": {"vocab": {"[UNK]": 0}}}`, `pre_tokenizer type "ByteLevel"`},
		{"template names an unknown special token",
			`{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}], "pair": [], "special_tokens": {}}, "model": {"vocab": {"[UNK]": 0}}}`,
			`special token "[X]" is not in special_tokens`},
		{"BertProcessing without ids", `{"post_processor": {"type": "BertProcessing", "sep": ["[SEP]"], "cls": ["[CLS]", 1]}, "model": {"vocab": {"[UNK]": 0}}}`, "sep must be [token, id]"},
		// Keys are case-sensitive, as serde reads them; encoding/json alone accepted these.
		{"a key in another case", `{"model": {"type": "WordPiece", "voCAB": {"[UNK]": 0}}}`, `model: key "voCAB" is not spelled as "vocab"`},
		{"type in another case", `{"pre_tokenizer": {"tYpe": "BertPreTokenizer"}, "model": {"vocab": {"[UNK]": 0}}}`, `pre_tokenizer: key "tYpe" is not spelled as "type"`},
		{"an unknown post-processor is named", `{"post_processor": {"type": "RobertaProcessing"}, "model": {"vocab": {"[UNK]": 0}}}`, `type "RobertaProcessing" is not supported`},
		// A special token adding nothing made max_length count tokens that were not there (a pair truncated to 3
		// came out with 5 tokens).
		{"an empty special token", `{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"[X]": {"id": "[X]", "ids": [], "tokens": []}}}, "model": {"vocab": {"[UNK]": 0}}}`,
			`special_tokens["[X]"] has no ids`},
		{"a special token with an empty name", `{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"[X]": {"id": "[X]", "ids": [0], "tokens": [""]}}}, "model": {"vocab": {"[UNK]": 0}}}`,
			`special_tokens["[X]"] has an empty token`},
		{"a special token outside the vocabulary", `{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [7], "tokens": ["[CLS]"]}}}, "model": {"vocab": {"[UNK]": 0}}}`,
			`special_tokens["[CLS]"]: "[CLS]" is not in the vocabulary`},
		{"a special token's id is not its vocabulary id", `{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]}}}, "model": {"vocab": {"[UNK]": 0, "[CLS]": 1}}}`,
			`gives "[CLS]" the id 0, but the vocabulary gives it 1`},
		{"BertProcessing's sep outside the vocabulary", `{"post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[UNK]", 0]}, "model": {"vocab": {"[UNK]": 0}}}`, `sep: "[SEP]" is not in the vocabulary`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadTokenizer(p)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, p, c.want)
			}
		})
	}
	t.Run("directory without tokenizer files", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := LoadTokenizer(dir); err == nil || !strings.Contains(err.Error(), "neither tokenizer.json nor vocab.txt") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("directory prefers tokenizer.json and reads tokenizer_config.json", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), good, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte("[UNK]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"model_max_length": 256, "pad_token": {"content": "[PAD]"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := LoadTokenizer(dir)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Source() != filepath.Join(dir, "tokenizer.json") || tok.ModelMaxLength() != 256 || tok.VocabSize() != 13 {
			t.Errorf("source %s, model_max_length %d, vocab size %d", tok.Source(), tok.ModelMaxLength(), tok.VocabSize())
		}
		if id, ok := tok.PadID(); !ok || id != 0 {
			t.Errorf("PadID = %d, %v", id, ok)
		}
	})
}

func TestLoadTokenizerVocabTxtConfig(t *testing.T) {
	dir := t.TempDir()
	vocab := "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nSchön\nschon\nschön\n"
	if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(vocab), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		config string
		want   []int32
	}{
		{``, ids32(2, 6, 3)},                                                // do_lower_case defaults to true: lowercase and strip accents
		{`{"do_lower_case": false}`, ids32(2, 5, 3)},                        // cased: keeps the capital and the accent
		{`{"strip_accents": false}`, ids32(2, 7, 3)},                        // lowercase but keep accents
		{`{"do_lower_case": false, "strip_accents": true}`, ids32(2, 1, 3)}, // "Schon" is not in the vocabulary
	}
	for _, c := range cases {
		t.Run("config "+c.config, func(t *testing.T) {
			cfg := filepath.Join(dir, "tokenizer_config.json")
			os.Remove(cfg)
			if c.config != "" {
				if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := LoadTokenizer(dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := tok.Encode("Schön", EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.IDs, c.want) {
				t.Errorf("ids %v, want %v", e.IDs, c.want)
			}
		})
	}
}
