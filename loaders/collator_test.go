package loaders

import (
	"reflect"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

func TestCollatorPadsToLongest(t *testing.T) {
	tok, err := LoadTokenizer(testutil.SharedData(t, "bert-base-uncased", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, "a.tsv", "sentence1\tsentence2\tlabel\nhello\tworld\t1\none two three four\tfive\t0\nx\ty\t\n")
	ds, err := LoadDataset(p, DatasetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		opts    CollatorOptions
		indices []int
		T       int
		ids     []int32
		types   []int32
		mask    []int32
		labels  []int64
	}{
		{"pads to the longest row", CollatorOptions{}, []int{0, 1}, 8,
			[]int32{101, 7592, 102, 2088, 102, 0, 0, 0, 101, 2028, 2048, 2093, 2176, 102, 2274, 102},
			[]int32{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
			[]int32{1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, []int64{1, 0}},
		{"pad_to_multiple_of rounds T up", CollatorOptions{PadToMultipleOf: 4}, []int{0}, 8,
			[]int32{101, 7592, 102, 2088, 102, 0, 0, 0}, []int32{0, 0, 0, 1, 1, 0, 0, 0}, []int32{1, 1, 1, 1, 1, 0, 0, 0}, []int64{1}},
		{"max_length truncates longest_first; unlabelled row gets -100", CollatorOptions{MaxLength: 6, Cache: true}, []int{1, 2}, 6,
			[]int32{101, 2028, 2048, 102, 2274, 102, 101, 1060, 102, 1061, 102, 0},
			[]int32{0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0},
			[]int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}, []int64{0, IgnoreLabel}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col, err := NewCollator(tok, ds, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for pass := 0; pass < 2; pass++ { // the second pass reads the cache when enabled
				b, err := col.Collate(c.indices)
				if err != nil {
					t.Fatal(err)
				}
				if b.B != len(c.indices) || b.T != c.T {
					t.Fatalf("B, T = %d, %d; want %d, %d", b.B, b.T, len(c.indices), c.T)
				}
				if !reflect.DeepEqual(b.InputIDs, c.ids) || !reflect.DeepEqual(b.TokenTypeIDs, c.types) ||
					!reflect.DeepEqual(b.AttentionMask, c.mask) || !reflect.DeepEqual(b.Labels, c.labels) {
					t.Fatalf("pass %d:\n ids %v\n types %v\n mask %v\n labels %v", pass, b.InputIDs, b.TokenTypeIDs, b.AttentionMask, b.Labels)
				}
				if b.Targets != nil {
					t.Errorf("classification batch has Targets %v", b.Targets)
				}
			}
		})
	}
	t.Run("out-of-range index is an error", func(t *testing.T) {
		col, _ := NewCollator(tok, ds, CollatorOptions{})
		if _, err := col.Collate([]int{3}); err == nil {
			t.Error("want an error")
		}
	})
}

func TestCollatorRegressionAndLengths(t *testing.T) {
	tok, err := LoadTokenizer(testutil.SharedData(t, "bert-base-uncased", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, "a.tsv", "sentence\tlabel\nhello world\t0.5\nhi\t-2\n")
	ds, err := LoadDataset(p, DatasetOptions{Regression: true})
	if err != nil {
		t.Fatal(err)
	}
	col, err := NewCollator(tok, ds, CollatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := col.Collate([]int{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.Targets, []float32{-2, 0.5}) || b.Labels != nil || b.NumLabelled() != 2 {
		t.Errorf("targets %v labels %v", b.Targets, b.Labels)
	}
	if b.NumTokens() != 3+4 {
		t.Errorf("NumTokens = %d, want 7", b.NumTokens())
	}
	lengths, err := col.Lengths()
	if err != nil || !reflect.DeepEqual(lengths, []int{4, 3}) {
		t.Errorf("Lengths = %v, %v; want [4 3]", lengths, err)
	}
}

func BenchmarkTokenizeSST2Dev(b *testing.B) {
	tok, err := LoadTokenizer(testutil.SharedData(b, "bert-base-uncased", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	ds, err := LoadDataset(testutil.SharedData(b, "sst2", "dev.tsv"), DatasetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tokens := 0
	b.ResetTimer()
	for range b.N {
		for _, e := range ds.Examples {
			enc, err := tok.Encode(e.Text, EncodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			tokens += enc.Len()
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(b.N*ds.Len())/b.Elapsed().Seconds(), "sentences/s")
}
