package loaders

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets of the file parsers a user hands to tune (the safetensors header has FuzzReadHeader, text
// FuzzTokenizerEncode). `make fuzz` runs each for FUZZTIME; .ci/run for a few seconds. The f.Add seeds include
// the reproducers of what hostile files did before issue 18 was fixed: a label that sized a table by its value,
// an empty special token that broke max_length, keys matched in another case.

// tinyFile reads a file of the repository's tiny recipe data.
func tinyFile(f *testing.F, name string) []byte {
	f.Helper()
	b, err := os.ReadFile(filepath.Join("..", "recipes", "data", "tiny", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzLoadTokenizerJSON loads arbitrary tokenizer.json contents: loading never panics, and a tokenizer it
// accepts encodes text within max_length with ids inside its vocabulary.
//
//	go test ./loaders -run '^$' -fuzz '^FuzzLoadTokenizerJSON$' -fuzztime 60s
func FuzzLoadTokenizerJSON(f *testing.F) {
	good := string(tinyFile(f, "tokenizer.json"))
	f.Add([]byte(good))
	f.Add([]byte(`{"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1, "##b": 2}}}`))
	f.Add([]byte(`{"post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 2]}, "model": {"vocab": {"[UNK]": 0, "[SEP]": 1, "[CLS]": 2}}}`))
	// Reproducers: an empty special token (a pair truncated to 3 had 5 tokens), keys in another case.
	f.Add([]byte(strings.Replace(good, "\"ids\": [\n          2\n        ]", `"ids": []`, 1)))
	f.Add([]byte(strings.Replace(good, `"vocab": {`, `"voCAB": {`, 1)))
	f.Add([]byte(strings.Replace(good, `"type": "BertPreTokenizer"`, `"tYpe": "BertPreTokenizer"`, 1)))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "tokenizer.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := LoadTokenizer(p)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, max := range []int{0, 3, 8} {
			for _, pair := range []*string{nil, new(string)} {
				e, err := tok.EncodeBatch([]Input{{Text: "a b [MASK] héllo, wörld", Pair: pair}}, EncodeOptions{MaxLength: max})
				if err != nil {
					continue // e.g. max_length below the special tokens
				}
				if max > 0 && e[0].Len() > max {
					t.Fatalf("max_length %d gave %d tokens: %v", max, e[0].Len(), e[0].Tokens)
				}
				for _, id := range e[0].IDs {
					if id < 0 || int(id) >= tok.VocabSize() {
						t.Fatalf("id %d outside the vocabulary of %d", id, tok.VocabSize())
					}
				}
			}
		}
	})
}

// FuzzLoadDataset loads arbitrary TSV, CSV and JSONL contents: loading never panics, rows beyond the row limit
// are refused, and accepted examples have valid UTF-8 text, a line number and a label that is a class id below
// num_labels (or none).
//
//	go test ./loaders -run '^$' -fuzz '^FuzzLoadDataset$' -fuzztime 60s
func FuzzLoadDataset(f *testing.F) {
	train := string(tinyFile(f, "train.tsv"))
	lines := strings.SplitN(train, "\n", 20)
	seed := strings.Join(lines[:19], "\n") + "\n"
	f.Add([]byte(seed), uint8(0), uint8(2))
	f.Add([]byte("sentence,label\n\"a, quoted\"\"field\",1\nb,0\n"), uint8(1), uint8(2))
	f.Add([]byte(`{"sentence": "a", "label": 1}`+"\n"+`{"sentence": "b", "label": "x"}`+"\n"), uint8(2), uint8(3))
	f.Add([]byte("sentence1\tsentence2\tlabel\na\tb\tneg\n"), uint8(0), uint8(0))
	// Reproducers: a label that sized the label table by its value (3.2 GB; 2147483647 ran out of memory).
	f.Add([]byte("sentence\tlabel\nok\t1\nbad\t2147483647\n"), uint8(0), uint8(2))
	f.Add([]byte("sentence\tlabel\nok\t1\nbad\t100000000\n"), uint8(0), uint8(0))
	f.Add([]byte("sentence,label\n\"never closed,1\n"+strings.Repeat("x\n", 100)), uint8(1), uint8(2))
	dir := f.TempDir()
	const limit = 4096
	f.Fuzz(func(t *testing.T, data []byte, format, numLabels uint8) {
		ext := []string{".tsv", ".csv", ".jsonl"}[int(format)%3]
		p := filepath.Join(dir, "data"+ext)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := LoadDataset(p, DatasetOptions{MaxRowBytes: limit, NumLabels: int(numLabels)})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		maxLabels := MaxLabels
		if numLabels > 0 {
			maxLabels = int(numLabels)
		}
		for _, e := range ds.Examples {
			if e.Line < 1 || !utf8.ValidString(e.Text) || len(e.Text) > limit+2 {
				t.Fatalf("example %+v", e)
			}
			if e.Label != IgnoreLabel && (e.Label < 0 || e.Label >= int64(max(maxLabels, len(ds.LabelNames)))) {
				t.Fatalf("label %d with num_labels %d and names %q", e.Label, numLabels, ds.LabelNames)
			}
		}
		if isInts(ds.LabelNames) && len(ds.LabelNames) > maxLabels {
			t.Fatalf("%d integer classes for num_labels %d", len(ds.LabelNames), numLabels)
		}
	})
}

// isInts reports whether names are the class ids "0", "1", ...
func isInts(names []string) bool {
	for i, n := range names {
		if n != strings.TrimSpace(n) || n != strconv.Itoa(i) {
			return false
		}
	}
	return true
}
