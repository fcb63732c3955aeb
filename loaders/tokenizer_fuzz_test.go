package loaders

import (
	"reflect"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// FuzzTokenizerEncode checks, on arbitrary text pairs (invalid UTF-8 included), that encoding never fails or
// panics and that its output is consistent: [CLS] first, [SEP] last, parallel fields, offsets inside the text
// they come from, truncation within max_length, and the same ids from tokenizer.json and vocab.txt.
//
//	go test ./loaders/ -run XXX -fuzz FuzzTokenizerEncode -fuzztime 60s
func FuzzTokenizerEncode(f *testing.F) {
	for _, s := range []string{"", " ", "Héllo  wörld\t\u0000", "[MASK]x[SEP]", "中文😀", "a\u0323\u0301", "İ\xff\xfe", "hello" + string(make([]byte, 120))} {
		f.Add(s, "pair", uint8(0))
		f.Add(s, s, uint8(7))
	}
	json, err := LoadTokenizer(testutil.SharedData(f, "bert-base-uncased", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	vocab, err := LoadTokenizer(testutil.SharedData(f, "bert-base-uncased", "vocab.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string, maxLen uint8) {
		opts := EncodeOptions{}
		if maxLen >= 3 {
			opts.MaxLength = int(maxLen)
		}
		e, err := json.EncodePair(a, b, opts)
		if err != nil {
			t.Fatalf("EncodePair(%q, %q, %+v): %v", a, b, opts, err)
		}
		checkParallel(t, e)
		if e.IDs[0] != 101 || e.IDs[e.Len()-1] != 102 {
			t.Fatalf("ids %v do not start with [CLS] and end with [SEP]", e.IDs)
		}
		if opts.MaxLength > 0 && e.Len() > opts.MaxLength {
			t.Fatalf("%d tokens exceed max_length %d", e.Len(), opts.MaxLength)
		}
		na, nb := len([]rune(a)), len([]rune(b))
		for i, o := range e.Offsets {
			limit := na
			if e.TypeIDs[i] == 1 {
				limit = nb
			}
			if o[0] < 0 || o[1] < o[0] || o[1] > limit {
				t.Fatalf("offsets[%d] = %v outside a text of %d code points (token %q)", i, o, limit, e.Tokens[i])
			}
		}
		v, err := vocab.EncodePair(a, b, opts)
		if err != nil || !reflect.DeepEqual(v.IDs, e.IDs) {
			t.Fatalf("vocab.txt gave %v, %v; tokenizer.json gave %v", v, err, e.IDs)
		}
	})
}
