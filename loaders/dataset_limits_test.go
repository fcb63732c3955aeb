package loaders

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLoadDatasetRowLimit: a row longer than MaxRowBytes is an error naming file:line in every format (a CSV
// quoted field left open over many short lines too), read no further than the limit; rows up to the limit load.
func TestLoadDatasetRowLimit(t *testing.T) {
	long := strings.Repeat("word ", 300) // 1500 bytes
	for _, c := range []struct {
		name, file, text, want string
	}{
		{"tsv", "d.tsv", "sentence\tlabel\nok\t1\n" + long + "\t0\n", "d.tsv:3: row too long: the line is longer than 1000 bytes"},
		{"jsonl", "d.jsonl", `{"sentence": "ok", "label": 1}` + "\n" + `{"sentence": "` + long + `", "label": 0}` + "\n", "d.jsonl:2: row too long"},
		{"csv", "d.csv", "sentence,label\n\"" + long + "\",1\n", "d.csv:2: row too long"},
		{"csv quote never closed", "d.csv", "sentence,label\nok,1\n\"open" + strings.Repeat("\nline of text", 2000), "row too long: the record is longer than 1000 bytes"},
		{"no final newline", "d.tsv", "sentence\tlabel\n" + long, "d.tsv:2: row too long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDataset(p, DatasetOptions{MaxRowBytes: 1000})
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrRowTooLong) {
				t.Fatalf("error %v, want %s", err, c.want)
			}
			if _, err := LoadDataset(p, DatasetOptions{MaxRowBytes: 1 << 20}); err != nil && errors.Is(err, ErrRowTooLong) {
				t.Fatalf("with a 1 MiB limit: %v", err)
			}
		})
	}
}

// TestLoadDatasetHugeLabel: an integer label far beyond the classes is refused, naming file:line, before any
// table is sized by it (2147483647 used to allocate 2^31 label names).
func TestLoadDatasetHugeLabel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.tsv")
	if err := os.WriteFile(p, []byte("sentence\tlabel\nok\t1\nbad\t2147483647\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadDataset(p, DatasetOptions{NumLabels: 2})
	var lre *LabelRangeError
	if !errors.As(err, &lre) || lre.Line != 3 || lre.Label != 2147483647 ||
		!strings.Contains(err.Error(), "d.tsv:3: label 2147483647 is outside 0..1 for a model with num_labels 2") ||
		!strings.Contains(err.Error(), "the file's labels are 1, 2147483647") {
		t.Fatalf("error %v", err)
	}
	_, err = LoadDataset(p, DatasetOptions{})
	if !errors.As(err, &lre) || !strings.Contains(err.Error(), "beyond the 100000 classes") {
		t.Fatalf("without num_labels: %v", err)
	}
	before := testingAllocs(func() { LoadDataset(p, DatasetOptions{}) })
	if before > 1<<20 {
		t.Fatalf("refusing the label allocated %d bytes", before)
	}
}

// testingAllocs returns the bytes f allocates.
func testingAllocs(f func()) uint64 {
	return uint64(testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			f()
		}
	}).AllocedBytesPerOp())
}

// TestDuplicateHeaderAndLongLabelLists: a header naming the text column twice trained on one of them silently,
// and an error about 200000 string labels listed every one (2.5 MB; findings5 #15).
func TestDuplicateHeaderAndLongLabelLists(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.tsv")
	os.WriteFile(p, []byte("sentence\tsentence\tlabel\na\tb\t1\n"), 0o644)
	if _, err := LoadDataset(p, DatasetOptions{}); err == nil || !strings.Contains(err.Error(), `d.tsv:1: the header names column "sentence" twice (columns 0 and 1); rename one`) {
		t.Errorf("duplicate header: %v", err)
	}
	names := make([]string, 200_000)
	for i := range names {
		names[i] = "lab" + strconv.Itoa(i)
	}
	if s := QuoteNames(names); !strings.HasSuffix(s, `"lab9" and 199990 more`) || len(s) > 200 {
		t.Errorf("QuoteNames: %q", s)
	}
}
