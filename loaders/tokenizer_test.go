package loaders

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// bertTokenizers loads shared/data/bert-base-uncased twice: from tokenizer.json and from the bare vocab.txt.
// Both must give the same ids everywhere (the probe's vocab is byte-identical to vocab.txt).
func bertTokenizers(t *testing.T) map[string]*Tokenizer {
	t.Helper()
	out := map[string]*Tokenizer{}
	for _, name := range []string{"tokenizer.json", "vocab.txt"} {
		tok, err := LoadTokenizer(testutil.SharedData(t, "bert-base-uncased", name))
		if err != nil {
			t.Fatalf("LoadTokenizer(%s): %v", name, err)
		}
		out[name] = tok
	}
	return out
}

func ids32(v ...int32) []int32 { return v }

func repeat(s string, n int) string { return strings.Repeat(s, n) }

func TestTokenizerCasesB01B03(t *testing.T) {
	hello20 := []int32{101, 7592}
	for range 9 {
		hello20 = append(hello20, 18223, 11631, 15350)
	}
	hello20 = append(hello20, 18223, 2080, 102)
	privet9 := []int32{101, 1194, 16856, 10325, 25529, 15290, 22919}
	for range 8 {
		privet9 = append(privet9, 29746, 16856, 10325, 25529, 15290, 22919)
	}
	privet9 = append(privet9, 102)

	cases := []struct {
		name    string
		text    string
		want    []int32
		offsets map[int][2]int // position -> offsets in code points, where the case states them
		length  int            // expected length when want is nil
	}{
		{"B01a accents, double space, tab and NUL", "Héllo  wörld\t\u0000",
			ids32(101, 7592, 2088, 102), map[int][2]int{1: {0, 5}, 2: {7, 12}}, 0},
		{"B01b C1 control U+0097 is deleted", "shoot\u0097 TOO much fun",
			ids32(101, 5607, 2205, 2172, 4569, 102), map[int][2]int{2: {7, 10}}, 0},
		{"B01c NBSP, ideographic space and U+2028 are whitespace", "\u00a0x\u3000y\u2028z",
			ids32(101, 1060, 1061, 1062, 102), nil, 0},
		{"B01d strip_accents null follows lowercase", "naïve café", ids32(101, 15743, 7668, 102), nil, 0},
		{"B01e $ ^ ` are BERT punctuation", "$100^2`", ids32(101, 1002, 2531, 1034, 1016, 1036, 102), nil, 0},
		{"B03 100 characters is still split into pieces", repeat("hello", 20), hello20, nil, 0},
		{"B03 101 characters is one [UNK] covering the word", repeat("hello", 20) + "s",
			ids32(101, 100, 102), map[int][2]int{1: {0, 101}}, 0},
		{"B03 54 Cyrillic characters (108 bytes) count as 54", repeat("привет", 9), privet9, nil, 0},
		{"B03 100 Cyrillic characters (200 bytes) are not [UNK]", repeat("привет", 16) + "прив", nil, nil, 102},
		{"B03 101 Cyrillic characters are one [UNK]", repeat("привет", 16) + "приве", ids32(101, 100, 102), nil, 0},
	}
	for name, tok := range bertTokenizers(t) {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				e, err := tok.Encode(c.text, EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if c.want != nil && !reflect.DeepEqual(e.IDs, c.want) {
					t.Fatalf("ids %v, want %v (tokens %q)", e.IDs, c.want, e.Tokens)
				}
				if c.want == nil && (e.Len() != c.length || containsID(e.IDs, 100)) {
					t.Fatalf("got %d ids %v, want %d pieces and no [UNK]", e.Len(), e.IDs, c.length)
				}
				for pos, off := range c.offsets {
					if e.Offsets[pos] != off {
						t.Errorf("offsets[%d] = %v, want %v", pos, e.Offsets[pos], off)
					}
				}
				checkParallel(t, e)
			})
		}
	}
}

func containsID(ids []int32, id int32) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// checkParallel checks that every field of e has the same length and the masks are consistent.
func checkParallel(t *testing.T, e *Encoding) {
	t.Helper()
	n := e.Len()
	if len(e.TypeIDs) != n || len(e.AttentionMask) != n || len(e.SpecialTokensMask) != n || len(e.Offsets) != n || len(e.Tokens) != n {
		t.Fatalf("field lengths differ: ids %d type %d mask %d special %d offsets %d tokens %d", n,
			len(e.TypeIDs), len(e.AttentionMask), len(e.SpecialTokensMask), len(e.Offsets), len(e.Tokens))
	}
}

func TestTokenizerB04EmptyInput(t *testing.T) {
	for name, tok := range bertTokenizers(t) {
		for _, text := range []string{"", "   ", "\u0000\ufffd"} {
			t.Run(name+"/"+strings.ToValidUTF8(text, "?"), func(t *testing.T) {
				e, err := tok.Encode(text, EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(e.IDs, ids32(101, 102)) || !reflect.DeepEqual(e.AttentionMask, ids32(1, 1)) ||
					!reflect.DeepEqual(e.TypeIDs, ids32(0, 0)) {
					t.Errorf("with special tokens: ids %v mask %v types %v, want [101 102] [1 1] [0 0]", e.IDs, e.AttentionMask, e.TypeIDs)
				}
				e, err = tok.Encode(text, EncodeOptions{NoSpecialTokens: true})
				if err != nil {
					t.Fatal(err)
				}
				if e.Len() != 0 {
					t.Errorf("without special tokens: %v, want none", e.IDs)
				}
			})
		}
		t.Run(name+"/padded batch of an empty and a one-word text", func(t *testing.T) {
			encs, err := tok.EncodeBatch([]Input{{Text: ""}, {Text: "hello"}}, EncodeOptions{Padding: PadLongest})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(encs[0].IDs, ids32(101, 102, 0)) || !reflect.DeepEqual(encs[0].AttentionMask, ids32(1, 1, 0)) {
				t.Errorf("row 0: ids %v mask %v, want [101 102 0] [1 1 0]", encs[0].IDs, encs[0].AttentionMask)
			}
			if !reflect.DeepEqual(encs[1].IDs, ids32(101, 7592, 102)) || !reflect.DeepEqual(encs[1].AttentionMask, ids32(1, 1, 1)) {
				t.Errorf("row 1: ids %v mask %v, want [101 7592 102] [1 1 1]", encs[1].IDs, encs[1].AttentionMask)
			}
			if !reflect.DeepEqual(encs[0].SpecialTokensMask, ids32(1, 1, 1)) {
				t.Errorf("row 0 special_tokens_mask %v, want [1 1 1] (pads count as special)", encs[0].SpecialTokensMask)
			}
		})
	}
}

func TestTokenizerAddedTokensList(t *testing.T) {
	for name, tok := range bertTokenizers(t) {
		var got []string
		for _, a := range tok.AddedTokens() {
			if !a.Special || a.Normalized {
				t.Errorf("%s: %+v should be special and not normalized", name, a)
			}
			got = append(got, fmt.Sprintf("%d:%s", a.ID, a.Content))
		}
		if want := []string{"0:[PAD]", "100:[UNK]", "101:[CLS]", "102:[SEP]", "103:[MASK]"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: added tokens %q, want %q", name, got, want)
		}
	}
}

func TestTokenizerAddedTokensInText(t *testing.T) {
	cases := []struct {
		name string
		text string
		want []int32
	}{
		{"[MASK] in a sentence is one token", "the [MASK] sat", ids32(101, 1996, 103, 2938, 102)},
		{"special tokens match inside words, before normalization", "a[SEP]b", ids32(101, 1037, 102, 1038, 102)},
		{"matching is case-sensitive: [mask] is plain text", "[mask]", ids32(101, 1031, 7308, 1033, 102)},
		{"[CLS] and [PAD] written in the text", "[CLS] x [PAD]", ids32(101, 101, 1060, 0, 102)},
	}
	for name, tok := range bertTokenizers(t) {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				e, err := tok.Encode(c.text, EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(e.IDs, c.want) {
					t.Fatalf("ids %v, want %v (tokens %q)", e.IDs, c.want, e.Tokens)
				}
			})
		}
	}
}

func TestTokenizerPairTruncationLongestFirst(t *testing.T) {
	tok := bertTokenizers(t)["tokenizer.json"]
	// Six and two content tokens; M = 8 leaves 5 for text: the short side keeps 2, the long one max(2, 5-2) = 3.
	a, b := "one two three four five six", "seven eight"
	e, err := tok.EncodePair(a, b, EncodeOptions{MaxLength: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := ids32(101, 2028, 2048, 2093, 102, 2698, 2809, 102)
	if !reflect.DeepEqual(e.IDs, want) {
		t.Fatalf("tokenizers' verified example: ids %v, want [CLS] 3 [SEP] 2 [SEP] = %v", e.IDs, want)
	}
	if !reflect.DeepEqual(e.TypeIDs, ids32(0, 0, 0, 0, 0, 1, 1, 1)) || !reflect.DeepEqual(e.SpecialTokensMask, ids32(1, 0, 0, 0, 1, 0, 0, 1)) {
		t.Errorf("type ids %v special mask %v", e.TypeIDs, e.SpecialTokensMask)
	}

	// Derived from truncate_encodings with budget M-3 (n_a, n_b -> kept).
	words := strings.Fields("one two three four five six seven eight nine ten")
	text := func(n int) string { return strings.Join(words[:n], " ") }
	cases := []struct {
		na, nb, maxLen, ka, kb int
		why                    string
	}{
		{6, 2, 8, 3, 2, "short side fits: long side gets M-n_short"},
		{2, 6, 8, 2, 3, "same with the long side second"},
		{4, 4, 10, 3, 4, "equal lengths, odd budget 7: the extra token goes to the second"},
		{8, 4, 10, 4, 3, "both cut: the extra token of budget 7 goes to the longer (first)"},
		{4, 8, 10, 3, 4, "both cut: the extra token goes to the longer (second)"},
		{10, 10, 9, 3, 3, "even budget 6 split 3/3"},
		{5, 1, 5, 1, 1, "budget 2 with a 1-token side: n2 = max(1, 1) = 1"},
		{3, 3, 3, 0, 0, "budget 0: both emptied"},
		{2, 2, 20, 2, 2, "no truncation needed"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			e, err := tok.EncodePair(text(c.na), text(c.nb), EncodeOptions{MaxLength: c.maxLen})
			if err != nil {
				t.Fatal(err)
			}
			gotA, gotB := segmentLengths(e)
			if gotA != c.ka || gotB != c.kb {
				t.Errorf("(%d, %d) with max_length %d kept (%d, %d), want (%d, %d)", c.na, c.nb, c.maxLen, gotA, gotB, c.ka, c.kb)
			}
		})
	}
}

// segmentLengths counts the non-special tokens of type 0 and type 1.
func segmentLengths(e *Encoding) (a, b int) {
	for i := range e.IDs {
		if e.SpecialTokensMask[i] == 1 {
			continue
		}
		if e.TypeIDs[i] == 0 {
			a++
		} else {
			b++
		}
	}
	return a, b
}

func TestTokenizerTruncationAndPadding(t *testing.T) {
	tok := bertTokenizers(t)["tokenizer.json"]
	cases := []struct {
		name string
		opts EncodeOptions
		pair bool
		want []int32
		mask []int32
		err  error
	}{
		{"single cut at the right", EncodeOptions{MaxLength: 4}, false, ids32(101, 2028, 2048, 102), nil, nil},
		{"single cut at the left", EncodeOptions{MaxLength: 4, TruncationSide: Left}, false, ids32(101, 2093, 2176, 102), nil, nil},
		{"max_length 2 keeps only the special tokens", EncodeOptions{MaxLength: 2}, false, ids32(101, 102), nil, nil},
		{"pad to max_length", EncodeOptions{MaxLength: 8, Padding: PadMaxLength}, false,
			ids32(101, 2028, 2048, 2093, 2176, 102, 0, 0), ids32(1, 1, 1, 1, 1, 1, 0, 0), nil},
		{"pad to a multiple of 8", EncodeOptions{Padding: PadLongest, PadToMultipleOf: 8}, false,
			ids32(101, 2028, 2048, 2093, 2176, 102, 0, 0), ids32(1, 1, 1, 1, 1, 1, 0, 0), nil},
		{"pad on the left", EncodeOptions{MaxLength: 7, Padding: PadMaxLength, PaddingSide: Left}, false,
			ids32(0, 101, 2028, 2048, 2093, 2176, 102), ids32(0, 1, 1, 1, 1, 1, 1), nil},
		{"only_second cuts the pair", EncodeOptions{MaxLength: 8, Truncation: OnlySecond}, true,
			ids32(101, 2028, 2048, 2093, 2176, 102, 2274, 102), nil, nil},
		{"only_second that would empty the second sequence is an error (HF SequenceTooShort)",
			EncodeOptions{MaxLength: 7, Truncation: OnlySecond}, true, nil, nil, ErrTruncation},
		{"only_first that cannot fit is an error", EncodeOptions{MaxLength: 4, Truncation: OnlyFirst}, true, nil, nil, ErrTruncation},
		{"max_length below the special tokens is an error", EncodeOptions{MaxLength: 2}, true, nil, nil, ErrTruncation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e *Encoding
			var err error
			if c.pair {
				e, err = tok.EncodePair("one two three four", "five six seven", c.opts)
			} else {
				e, err = tok.Encode("one two three four", c.opts)
			}
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.IDs, c.want) {
				t.Fatalf("ids %v, want %v", e.IDs, c.want)
			}
			if c.mask != nil && !reflect.DeepEqual(e.AttentionMask, c.mask) {
				t.Errorf("attention mask %v, want %v", e.AttentionMask, c.mask)
			}
			checkParallel(t, e)
		})
	}
}

func TestTokenizerConcurrentUse(t *testing.T) {
	tok := bertTokenizers(t)["tokenizer.json"]
	want, err := tok.Encode("Concurrent encoding of the same naïve text", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				e, err := tok.Encode("Concurrent encoding of the same naïve text", EncodeOptions{})
				if err != nil || !reflect.DeepEqual(e.IDs, want.IDs) {
					t.Errorf("concurrent Encode gave %v, %v; want %v", e, err, want.IDs)
					return
				}
			}
		})
	}
	wg.Wait()
}
