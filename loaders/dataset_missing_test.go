package loaders

import (
	"errors"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestMissingLabels: rows of a labelled file without a label (an empty TSV/CSV field, a JSON label that is null
// or "") load as IgnoreLabel, and Dataset.MissingLabels describes them: the file, the first such row's line
// (1-based, as an editor shows it, counting the header and a CSV field's quoted newlines), the label column or
// key, what the row holds there and how many rows have none, as bad input (tester10 F2: tune eval exited 1 with
// a message naming no column). A JSON "" used to become a class named "".
func TestMissingLabels(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		opts                DatasetOptions
		want                string // after path
		missing, rows       int
	}{
		{"TSV empty field", "a.tsv", "sentence\tlabel\nfine\t1\nbad\t \nok\t0\n", DatasetOptions{},
			`:3: no label: the label column "label" is empty`, 1, 3},
		{"CSV quoted newline before", "a.csv", "text,label\n\"two\nlines\",1\nbad,\nworse,\n", DatasetOptions{},
			`:4: no label: the label column "label" is empty`, 2, 3},
		{"TSV without a header", "a.tsv", "fine\t1\nbad\t\n", DatasetOptions{Header: HeaderAbsent},
			`:2: no label: the label column 1 is empty`, 1, 2},
		{"a named label column", "a.tsv", "sentence\tstars\nfine\t1\nbad\t\n", DatasetOptions{LabelColumn: "stars"},
			`:3: no label: the label column "stars" is empty`, 1, 2},
		{"JSONL null", "a.jsonl", "{\"text\": \"a\", \"label\": 1}\n\n{\"text\": \"b\", \"label\": null}\n", DatasetOptions{},
			`:3: no label: the label key "label" is null`, 1, 2},
		{"JSONL empty string", "a.jsonl", "{\"text\": \"a\", \"label\": \"pos\"}\n{\"text\": \"b\", \"label\": \"\"}\n", DatasetOptions{},
			`:2: no label: the label key "label" is empty`, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, c.file, c.content)
			ds, err := LoadDataset(p, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			err = ds.MissingLabels()
			var me *MissingLabelError
			if !errors.As(err, &me) || !badinput.Is(err) || !strings.Contains(err.Error(), p+c.want) ||
				!strings.Contains(err.Error(), "fill them in or remove those rows") {
				t.Fatalf("MissingLabels() = %v, want a bad-input *MissingLabelError containing %q", err, p+c.want)
			}
			if me.Missing != c.missing || me.Rows != c.rows {
				t.Errorf("%d of %d rows missing, want %d of %d", me.Missing, me.Rows, c.missing, c.rows)
			}
			for _, e := range ds.Examples {
				if e.Line == me.Line && e.Label != IgnoreLabel {
					t.Errorf("line %d: label %d, want IgnoreLabel", e.Line, e.Label)
				}
			}
		})
	}
	p := writeFile(t, "a.tsv", "sentence\tlabel\nfine\t1\nbad\t0\n")
	if ds, err := LoadDataset(p, DatasetOptions{}); err != nil || ds.MissingLabels() != nil {
		t.Errorf("every row labelled: %v, %v", err, ds.MissingLabels())
	}
	if ds, err := LoadDataset(p, DatasetOptions{Unlabelled: true}); err != nil || ds.MissingLabels() != nil {
		t.Errorf("unlabelled: %v, %v", err, ds.MissingLabels())
	}
}
