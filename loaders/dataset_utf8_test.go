package loaders

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadDatasetInvalidUTF8: a data file that is not UTF-8 (a Latin-1 "café" in line 3) is an error naming
// file:line and the byte, in every format, rather than text silently turned into U+FFFD; a UTF-8 BOM and
// multi-byte characters are fine.
func TestLoadDatasetInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		name, file, text, want string
	}{
		{"tsv", "d.tsv", "sentence\tlabel\nok\t1\ncaf\xe9\t0\n", "d.tsv:3: invalid UTF-8 (byte 0xe9 at column 4)"},
		{"csv", "d.csv", "sentence,label\nok,1\n\"caf\xe9\",0\n", "d.csv:3: invalid UTF-8 (byte 0xe9 at column 5)"},
		{"jsonl", "d.jsonl", "{\"sentence\": \"ok\", \"label\": 1}\n\n{\"sentence\": \"caf\xe9\", \"label\": 0}\n", "d.jsonl:3: invalid UTF-8 (byte 0xe9 at column 18)"},
		{"a truncated multi-byte sequence at the end", "d.tsv", "sentence\tlabel\nok\t1\n\xe2\x82", "d.tsv:3: invalid UTF-8 (byte 0xe2 at column 1)"},
		{"UTF-8 with a BOM", "d.tsv", "\xef\xbb\xbfsentence\tlabel\ncafé ☕\t1\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			ds, err := LoadDataset(p, DatasetOptions{})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := ds.Examples[0].Text; got != "café ☕" {
					t.Errorf("text %q", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %s", err, c.want)
			}
		})
	}
}
