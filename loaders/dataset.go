package loaders

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
)

// IgnoreLabel is the label of an unlabelled example (PyTorch's cross-entropy ignore_index).
const IgnoreLabel = -100

// Example is one row of a dataset.
type Example struct {
	Text   string  // the text column, as read (valid UTF-8; the tokenizer normalizes it)
	Pair   *string // the text_pair column; nil when the dataset has none
	Label  int64   // class id; IgnoreLabel when the row has no label (or the task is regression)
	Target float32 // regression target (DatasetOptions.Regression); 0 otherwise
	Line   int     // 1-based line of the row in its file, for messages
}

// Dataset is a labelled text dataset held in memory.
type Dataset struct {
	Path     string    // the file it was read from, as given to LoadDataset
	Examples []Example // in file order
	// LabelNames maps class id to label name: from DatasetOptions.Label2ID when given, else the sorted
	// distinct string labels of the file, or "0".."max" for integer labels. Nil for regression.
	LabelNames []string
	Regression bool // examples carry Target rather than Label (DatasetOptions.Regression)
	// IDLabelLine is the line of the first row whose label is not one of DatasetOptions.Label2ID's names but an
	// integer, taken as a class id, and IDLabel that label; 0 and "" when there is none (or no Label2ID).
	IDLabelLine int
	IDLabel     string

	// missing describes the rows of a labelled file that have no label (nil when every row has one), for
	// MissingLabels.
	missing *MissingLabelError
}

// MissingLabels returns a *MissingLabelError when rows of a labelled file (not DatasetOptions.Unlabelled, not
// Regression) have no label (an empty label field, a JSON label that is null or an empty string); LoadDataset
// reads them as IgnoreLabel, which suits a partly labelled file but not a training or evaluation set. Nil when
// every row has a label.
func (d *Dataset) MissingLabels() error {
	if d.missing == nil {
		return nil
	}
	return d.missing
}

// MissingLabelError is Dataset.MissingLabels' error: it names the file, the first row without a label (its
// line, 1-based as an editor shows it), the label column or key, and how many rows have none.
type MissingLabelError struct {
	Path    string // the data file
	Line    int    // the line of the first row without a label
	Field   string // the label's column or key: `column "label"`, `column 2` (no header), `key "label"` (JSONL)
	Value   string // what that row holds there: "empty", "null"
	Missing int    // how many rows have no label
	Rows    int    // how many rows the file has
}

// BadInput marks the error as the input's (internal/badinput): the data file must change (exit 2).
func (e *MissingLabelError) BadInput() bool { return true }

// Error says which row has no label, in which column or key, how many do, and what to do.
func (e *MissingLabelError) Error() string {
	return fmt.Sprintf("loaders: %s:%d: no label: the label %s is %s (%d of the file's %d rows have no label); every "+
		"row of a training or evaluation file needs a label: fill them in or remove those rows (tune predict "+
		"reads files without labels)", e.Path, e.Line, e.Field, e.Value, e.Missing, e.Rows)
}

// Len returns the number of examples.
func (d *Dataset) Len() int { return len(d.Examples) }

// Header says whether a TSV/CSV file starts with a header row.
type Header int

const (
	// HeaderAuto treats the first row as a header when one of its fields is a configured column name (or,
	// when no column is named, one of sentence, text, sentence1, sentence2, label).
	HeaderAuto Header = iota
	// HeaderPresent: the first row is a header.
	HeaderPresent
	// HeaderAbsent: every row is data; columns must be given by index.
	HeaderAbsent
)

// DatasetOptions configures LoadDataset. Columns are named by header name or, for files without a header, by
// 0-based index written as a number ("0", "1"). The zero value reads SST-2/GLUE-style files: text column
// "sentence" (else "text", else "sentence1" with "sentence2" as the pair), label column "label".
type DatasetOptions struct {
	Format         string // "tsv", "csv" or "jsonl"; "" picks by extension (.tsv, .csv, .jsonl/.json)
	TextColumn     string // "" picks sentence, then text, then sentence1 (see DatasetOptions)
	TextPairColumn string // "" for single-sentence tasks (set automatically to sentence2 next to sentence1)
	LabelColumn    string // default "label"
	Header         Header // whether a TSV/CSV file has a header row; HeaderAuto guesses from its fields
	// Unlabelled reads files without a label column (every Label is IgnoreLabel).
	Unlabelled bool
	// Regression parses labels as float32 targets (num_labels == 1, problem_type "regression").
	Regression bool
	// MaxRowBytes bounds each line (row) of the file; a longer one is an error naming file:line, read no further.
	// 0 means DefaultMaxRowBytes (1 MiB).
	MaxRowBytes int
	// NumLabels, when > 0, is the model's number of classes: an integer label must be a class id below it, checked
	// (file:line, *LabelRangeError) before any table is sized. 0 means at most MaxLabels classes.
	NumLabels int
	// Label2ID maps label names to ids (a model's classes: the inverse of its id2label), naming each id
	// 0..len(Label2ID)-1 once. Labels not in it must be integer ids in [0, len(Label2ID)). Without it, ids
	// come from the data: integers as they are, strings sorted.
	Label2ID map[string]int
}

// rawRow is a row before label mapping.
type rawRow struct {
	text, pair, label string
	hasPair, hasLabel bool   // hasLabel false: empty field, JSON null or empty string
	noLabel           string // when !hasLabel, what the label holds: "empty" or "null"
	line              int
}

// LoadDataset reads a TSV, CSV or JSONL file of labelled text. A malformed row (wrong number of columns,
// invalid JSON, a missing key, an unknown label, a bad number) is an error naming file:line.
// TSV fields are split on tabs with no quoting (as GLUE's files); CSV follows RFC 4180 quoting.
func LoadDataset(path string, opts DatasetOptions) (*Dataset, error) {
	ds, err := loadDataset(path, opts)
	return ds, badinput.Mark(err) // a row or an option is wrong (exit 2); a failed read (*fs.PathError) is not
}

// loadDataset is LoadDataset without the bad-input mark.
func loadDataset(path string, opts DatasetOptions) (*Dataset, error) {
	format := strings.ToLower(opts.Format)
	if format == "" {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".tsv":
			format = "tsv"
		case ".csv":
			format = "csv"
		case ".jsonl", ".json", ".ndjson":
			format = "jsonl"
		default:
			return nil, fmt.Errorf("loaders: dataset %s: cannot tell the format from the extension; set format to tsv, csv or jsonl", path)
		}
	}
	if format != "tsv" && format != "csv" && format != "jsonl" {
		return nil, fmt.Errorf("loaders: dataset %s: unknown format %q (tsv, csv or jsonl)", path, opts.Format)
	}
	f, err := smallfile.Open(path, "a data file")
	if err != nil {
		return nil, fmt.Errorf("loaders: dataset: %w", err)
	}
	defer f.Close()
	lr := NewLineReader(f, path, opts.MaxRowBytes)
	var rows []rawRow
	var field string // the label's column or key, for messages
	switch format {
	case "tsv", "csv":
		rows, field, err = readDelimited(path, lr, format, opts)
	default:
		rows, field, err = readJSONL(path, lr, opts)
	}
	if err != nil {
		return nil, err
	}
	return buildDataset(path, rows, field, opts)
}

// columnSpec is a column resolved against the header: its index, or -1 when absent.
type columnSpec struct {
	name  string
	index int
}

func defaultColumns(opts DatasetOptions, header []string) (text, pair, label string) {
	text, pair, label = opts.TextColumn, opts.TextPairColumn, opts.LabelColumn
	if label == "" {
		label = "label"
	}
	if text == "" {
		text = "sentence"
		for _, name := range []string{"sentence", "text", "sentence1"} {
			if indexOf(header, name) >= 0 {
				text = name
				break
			}
		}
		if text == "sentence1" && pair == "" && indexOf(header, "sentence2") >= 0 {
			pair = "sentence2"
		}
	}
	return text, pair, label
}

func indexOf(fields []string, name string) int {
	for i, f := range fields {
		if f == name {
			return i
		}
	}
	return -1
}

// resolve finds a column in the header (by name) or by index; header is nil for files without one.
func resolve(path, what, col string, header []string, width int) (int, error) {
	if i, err := strconv.Atoi(col); err == nil {
		if i < 0 || i >= width {
			return 0, fmt.Errorf("loaders: %s:1: %s column %d is out of range (rows have %d columns)", path, what, i, width)
		}
		return i, nil
	}
	if header == nil {
		return 0, fmt.Errorf("loaders: %s:1: %s column %q needs a header row, and the file has none; name columns by index (0, 1, ...) or set header", path, what, col)
	}
	if i := indexOf(header, col); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("loaders: %s:1: no %s column %q in the header %q", path, what, col, header)
}

// delimiterHint returns a hint for a file whose first row is one column holding another delimiter (a
// ;-separated "CSV", a comma-separated "TSV"): the column errors it causes say nothing of the delimiter. ""
// otherwise.
func delimiterHint(first []string, format string) string {
	if len(first) != 1 {
		return ""
	}
	names := map[string]string{";": "semicolon", "|": "pipe", ",": "comma", "\t": "tab"}
	for _, d := range []string{"\t", ",", ";", "|"} {
		if (format == "tsv" && d == "\t") || (format == "csv" && d == ",") || !strings.Contains(first[0], d) {
			continue
		}
		return fmt.Sprintf(" (the first row is one column, %q: is the file %s-separated? tune splits TSV on tabs and "+
			"CSV on commas)", first[0], names[d])
	}
	return ""
}

// readDelimited returns the rows of a TSV or CSV file and its label column as messages name it (`column
// "label"`, `column 2` by index; "" when unlabelled).
func readDelimited(path string, lr *LineReader, format string, opts DatasetOptions) ([]rawRow, string, error) {
	rows, label, err := readDelimitedRows(path, lr, format, opts)
	if err != nil || opts.Unlabelled {
		return rows, "", err
	}
	if i, err := strconv.Atoi(label); err == nil {
		return rows, fmt.Sprintf("column %d", i), nil
	}
	return rows, fmt.Sprintf("column %q", label), nil
}

// readDelimitedRows is readDelimited returning the label column as configured or defaulted.
func readDelimitedRows(path string, lr *LineReader, format string, opts DatasetOptions) ([]rawRow, string, error) {
	records, lines, err := splitRecords(path, lr, format)
	if err != nil {
		return nil, "", err
	}
	if len(records) == 0 {
		return nil, "", fmt.Errorf("loaders: %s: the file has no rows", path)
	}
	hint := delimiterHint(records[0], format)
	var header []string
	switch opts.Header {
	case HeaderPresent:
		header = records[0]
	case HeaderAuto:
		text, pair, label := defaultColumns(opts, records[0])
		for _, name := range []string{text, pair, label} {
			if _, err := strconv.Atoi(name); name != "" && err != nil && indexOf(records[0], name) >= 0 {
				header = records[0]
				break
			}
		}
	}
	if header != nil {
		// A column read by name must be named once: `sentence<TAB>sentence<TAB>label` trained on one of the
		// two without a word (pandas renames the second sentence.1, datasets refuses).
		text, pair, label := defaultColumns(opts, header)
		for _, name := range []string{text, pair, label} {
			if i := indexOf(header, name); name != "" && i >= 0 {
				if j := indexOf(header[i+1:], name); j >= 0 {
					return nil, "", fmt.Errorf("loaders: %s:1: the header names column %q twice (columns %d and %d); rename one", path, name, i, i+1+j)
				}
			}
		}
		records, lines = records[1:], lines[1:]
		if len(records) == 0 {
			return nil, "", fmt.Errorf("loaders: %s: the file has a header row and no examples", path)
		}
	}
	text, pair, label := defaultColumns(opts, header)
	width := len(header)
	if header == nil {
		width = len(records[0])
		if opts.TextColumn == "" {
			text = "0"
		}
		if opts.LabelColumn == "" && !opts.Unlabelled {
			label = strconv.Itoa(width - 1)
		}
	}
	ti, err := resolve(path, "text", text, header, width)
	if err != nil {
		return nil, "", fmt.Errorf("%w%s", err, hint)
	}
	pi, li := -1, -1
	if pair != "" {
		if pi, err = resolve(path, "text_pair", pair, header, width); err != nil {
			return nil, "", fmt.Errorf("%w%s", err, hint)
		}
	}
	if !opts.Unlabelled {
		if li, err = resolve(path, "label", label, header, width); err != nil {
			return nil, "", fmt.Errorf("%w%s", err, hint)
		}
		if li == ti || li == pi {
			return nil, "", fmt.Errorf("loaders: %s: the label column %d is also a text column; set the columns, or unlabelled%s", path, li, hint)
		}
	}
	rows := make([]rawRow, 0, len(records))
	for k, rec := range records {
		if len(rec) != width {
			return nil, "", fmt.Errorf("loaders: %s:%d: %d columns, expected %d (as the first row)", path, lines[k], len(rec), width)
		}
		r := rawRow{text: rec[ti], line: lines[k]}
		if pi >= 0 {
			r.pair, r.hasPair = rec[pi], true
		}
		if li >= 0 {
			r.label = rec[li]
			r.hasLabel = strings.TrimSpace(r.label) != ""
			if !r.hasLabel {
				r.noLabel = "empty"
			}
		}
		rows = append(rows, r)
	}
	return rows, label, nil
}

// splitRecords returns the rows of a TSV (tabs, no quoting) or CSV (RFC 4180) file and the line each starts
// on; blank lines are skipped.
func splitRecords(path string, lr *LineReader, format string) ([][]string, []int, error) {
	var records [][]string
	var lines []int
	if format == "tsv" {
		for {
			l, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				return records, lines, nil
			}
			if err != nil {
				return nil, nil, err
			}
			if len(l) == 0 {
				continue
			}
			records = append(records, strings.Split(string(l), "\t"))
			lines = append(lines, n)
		}
	}
	src := &linesAsReader{lr: lr}
	r := csv.NewReader(src)
	r.FieldsPerRecord = -1
	for {
		rec, err := r.Read()
		if src.err != nil && !errors.Is(src.err, io.EOF) {
			return nil, nil, src.err // the line reader's own error (too long, not UTF-8) names file:line
		}
		if errors.Is(err, io.EOF) {
			return records, lines, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, nil, fmt.Errorf("loaders: %s:%d: %v", path, pe.StartLine, pe.Err)
			}
			return nil, nil, fmt.Errorf("loaders: %s: %w", path, err)
		}
		src.mark = r.InputOffset()
		line, _ := r.FieldPos(0)
		records = append(records, rec)
		lines = append(lines, line)
	}
}

// readJSONL returns the rows of a JSONL file and its label key as messages name it (`key "label"`; "" when
// unlabelled).
func readJSONL(path string, lr *LineReader, opts DatasetOptions) ([]rawRow, string, error) {
	rows, label, err := readJSONLRows(path, lr, opts)
	if err != nil || opts.Unlabelled {
		return rows, "", err
	}
	return rows, fmt.Sprintf("key %q", label), nil
}

// readJSONLRows is readJSONL returning the label key as configured or defaulted.
func readJSONLRows(path string, lr *LineReader, opts DatasetOptions) ([]rawRow, string, error) {
	text, pair, label := defaultColumns(opts, nil)
	var rows []rawRow
	for {
		l, line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(l, &obj); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, "", fmt.Errorf("loaders: %s:%d: not a JSON object: the line is a JSON %s; each line must be one object such as {\"text\": \"...\", \"label\": 1}", path, line, te.Value)
			}
			return nil, "", fmt.Errorf("loaders: %s:%d: not a JSON object: %v", path, line, err)
		}
		if opts.TextColumn == "" && len(rows) == 0 {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			text, pair, label = defaultColumns(opts, keys)
		}
		if k := repeatedKey(l, text, pair, label); k != "" {
			return nil, "", fmt.Errorf("loaders: %s:%d: the key %q appears twice in the row, so which value is meant "+
				"is unclear (JSON parsers disagree; most keep the last): keep one", path, line, k)
		}
		r := rawRow{line: line}
		if r.text, _, err = jsonField(obj, text, true); err != nil {
			return nil, "", fmt.Errorf("loaders: %s:%d: %w", path, line, err)
		}
		if pair != "" {
			if r.pair, _, err = jsonField(obj, pair, true); err != nil {
				return nil, "", fmt.Errorf("loaders: %s:%d: %w", path, line, err)
			}
			r.hasPair = true
		}
		if !opts.Unlabelled {
			if _, ok := obj[label]; !ok {
				return nil, "", fmt.Errorf("loaders: %s:%d: no label: the row has no key %q; every row of a training or "+
					"evaluation file needs its label there (or set the label column option to the key that holds "+
					"it; tune predict reads files without labels)", path, line, label)
			}
			if r.label, r.hasLabel, err = jsonField(obj, label, false); err != nil {
				return nil, "", fmt.Errorf("loaders: %s:%d: %w", path, line, err)
			}
			// An empty string is no label, as an empty TSV/CSV field is (not a class named "").
			switch {
			case !r.hasLabel:
				r.noLabel = "null"
			case strings.TrimSpace(r.label) == "":
				r.hasLabel, r.noLabel = false, "empty"
			}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, "", fmt.Errorf("loaders: %s: the file has no rows", path)
	}
	return rows, label, nil
}

// repeatedKey returns the first of keys ("" entries ignored) that the JSON object line holds more than once, or
// "": a row {"text": "a", "label": 0, "label": 1} decoded silently as label 1. It walks the object's top-level
// keys with a token decoder, skipping their values; a line that is not an object was refused before.
func repeatedKey(line []byte, keys ...string) string {
	// The common case, no key's quoted name twice and no \u escape (a key may be spelled "lab\u0065l") in the
	// line, costs a byte search a key.
	twice := bytes.Contains(line, []byte(`\u`))
	for _, k := range keys {
		if k != "" && bytes.Count(line, []byte(`"`+k+`"`)) > 1 {
			twice = true
		}
	}
	if !twice {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(line))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return ""
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return ""
		}
		if k != "" && slices.Contains(keys, k) {
			if seen[k] {
				return k
			}
			seen[k] = true
		}
	}
	return ""
}

// jsonField returns key's value as text: a string as is, a number as written, true/false; null gives ok=false.
// Text columns (text=true) must be strings.
func jsonField(obj map[string]json.RawMessage, key string, text bool) (string, bool, error) {
	raw, ok := obj[key]
	if !ok {
		return "", false, fmt.Errorf("no %q key (keys can be set with the text/text_pair/label column options)", key)
	}
	raw = bytes.TrimSpace(raw)
	if bytes.Equal(raw, []byte("null")) && !text {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	if text {
		return "", false, fmt.Errorf("%q must be a string, got %s", key, raw)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String(), true, nil
	}
	if string(raw) == "true" || string(raw) == "false" {
		return string(raw), true, nil
	}
	return "", false, fmt.Errorf("%q must be a string, number or boolean, got %s", key, raw)
}

// buildDataset maps labels to ids (or targets) and builds the examples.
// field names the label's column or key in messages.
func buildDataset(path string, rows []rawRow, field string, opts DatasetOptions) (*Dataset, error) {
	d := &Dataset{Path: path, Examples: make([]Example, len(rows)), Regression: opts.Regression}
	for i, r := range rows {
		e := Example{Text: r.text, Label: IgnoreLabel, Line: r.line}
		if r.hasPair {
			p := r.pair
			e.Pair = &p
		}
		d.Examples[i] = e
	}
	if opts.Unlabelled {
		return d, nil
	}
	if opts.Regression {
		for i, r := range rows {
			if !r.hasLabel {
				return nil, fmt.Errorf("loaders: %s:%d: no regression target: the label %s is %s; every row needs a "+
					"number there", path, r.line, field, r.noLabel)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(r.label), 32)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("loaders: %s:%d: regression target %q is not a finite number", path, r.line, r.label)
			}
			d.Examples[i].Target = float32(v)
		}
		return d, nil
	}
	toID, names, err := labelMapping(path, rows, opts.Label2ID, opts.NumLabels)
	if err != nil {
		return nil, err
	}
	d.LabelNames = names
	for i, r := range rows {
		if !r.hasLabel {
			if d.missing == nil {
				d.missing = &MissingLabelError{Path: path, Line: r.line, Field: field, Value: r.noLabel, Rows: len(rows)}
			}
			d.missing.Missing++
			continue
		}
		label := strings.TrimSpace(r.label)
		id, err := toID(label)
		if err != nil {
			return nil, fmt.Errorf("loaders: %s:%d: %w", path, r.line, err)
		}
		d.Examples[i].Label = id
		if _, named := opts.Label2ID[label]; len(opts.Label2ID) > 0 && !named && d.IDLabelLine == 0 {
			d.IDLabelLine, d.IDLabel = r.line, label
		}
	}
	return d, nil
}

// labelMapping returns the label-to-id function and the id-to-name table. With label2id (a model's mapping), a
// label maps through it, an integer in [0, len(label2id)) is taken as a class id (another integer is an error
// giving that range), and anything else is an error that lists the known labels.
func labelMapping(path string, rows []rawRow, label2id map[string]int, numLabels int) (func(string) (int64, error), []string, error) {
	if len(label2id) > 0 {
		names, err := labelNames(label2id)
		if err != nil {
			return nil, nil, fmt.Errorf("loaders: %s: %w", path, err)
		}
		return func(s string) (int64, error) {
			if id, ok := label2id[s]; ok {
				return int64(id), nil
			}
			if id, err := strconv.Atoi(s); err == nil {
				if id >= 0 && id < len(label2id) {
					return int64(id), nil
				}
				return 0, fmt.Errorf("label %d is outside the class ids 0..%d (num_labels %d): an integer label is a class id; "+
					"the classes are named %s", id, len(names)-1, len(names), quoteAll(names))
			}
			return 0, fmt.Errorf("unknown label %q: the known labels are %s (an integer class id 0..%d is accepted too)",
				s, quoteAll(names), len(names)-1)
		}, names, nil
	}
	numeric := true
	seen := map[string]bool{}
	maxID := int64(-1)
	for _, r := range rows {
		if !r.hasLabel {
			continue
		}
		s := strings.TrimSpace(r.label)
		seen[s] = true
		if id, err := strconv.ParseInt(s, 10, 64); err == nil && id >= 0 && id < 1<<31 {
			maxID = max(maxID, id)
		} else {
			numeric = false
		}
	}
	if len(seen) == 0 {
		return nil, nil, fmt.Errorf("loaders: %s: no row has a label; set unlabelled for a test file", path)
	}
	if limit := cmp.Or(numLabels, MaxLabels); numeric && maxID >= int64(limit) {
		return nil, nil, newLabelRangeError(path, rows, numLabels, limit)
	}
	if numeric {
		names := make([]string, maxID+1)
		for i := range names {
			names[i] = strconv.Itoa(i)
		}
		return func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, names, nil
	}
	names := make([]string, 0, len(seen))
	for s := range seen {
		names = append(names, s)
	}
	sort.Strings(names)
	ids := make(map[string]int64, len(names))
	for i, s := range names {
		ids[s] = int64(i)
	}
	return func(s string) (int64, error) { return ids[s], nil }, names, nil
}

// MaxLabels is the most classes tune reads: a config.json's num_labels or id2label, a recipe's
// model.config.num_labels, and what a data file's integer labels may imply when the model's num_labels is not
// given (DatasetOptions.NumLabels: ids are class ids, and the id-to-name table has max id + 1 entries). The
// largest classification label sets in use (extreme multi-label benchmarks aside) have some 10^4 classes; at
// 10^6, config.json's label tables alone took seconds to build and check, each time the file was read.
const MaxLabels = 100_000

// LabelRangeError is LoadDataset's error for an integer label at or beyond the number of classes (the model's
// num_labels, or MaxLabels); it is returned before any table is sized by the label.
type LabelRangeError struct {
	Path      string  // the data file
	Line      int     // the line of the first label out of range
	Label     int64   // that label
	NumLabels int     // the model's num_labels; 0 when the limit was MaxLabels
	Labels    []int64 // the file's distinct integer labels, sorted (at most 20: the smallest ones)
	More      int     // how many distinct labels Labels leaves out
}

// BadInput marks the error as the input's (internal/badinput): the data or num_labels must change (exit 2).
func (e *LabelRangeError) BadInput() bool { return true }

// Error says which label is out of range, where, and the labels the file holds.
func (e *LabelRangeError) Error() string {
	ids := make([]string, len(e.Labels))
	for i, id := range e.Labels {
		ids[i] = strconv.FormatInt(id, 10)
	}
	list := strings.Join(ids, ", ")
	if e.More > 0 {
		list += fmt.Sprintf(" and %d more", e.More)
	}
	if e.NumLabels == 0 {
		return fmt.Sprintf("loaders: %s:%d: label %d is beyond the %d classes a data file may have: integer labels are "+
			"class ids 0..num_labels-1, and the file's labels are %s; renumber the classes from 0", e.Path, e.Line,
			e.Label, MaxLabels, list)
	}
	return fmt.Sprintf("loaders: %s:%d: label %d is outside 0..%d for a model with num_labels %d: integer labels are "+
		"class ids 0..num_labels-1, and the file's labels are %s", e.Path, e.Line, e.Label, e.NumLabels-1,
		e.NumLabels, list)
}

// newLabelRangeError describes the first integer label of rows at or beyond limit.
func newLabelRangeError(path string, rows []rawRow, numLabels, limit int) *LabelRangeError {
	e := &LabelRangeError{Path: path, NumLabels: numLabels}
	seen := map[int64]bool{}
	for _, r := range rows {
		if !r.hasLabel {
			continue
		}
		id, _ := strconv.ParseInt(strings.TrimSpace(r.label), 10, 64)
		if id >= int64(limit) && e.Line == 0 {
			e.Line, e.Label = r.line, id
		}
		seen[id] = true
	}
	e.Labels = slices.Sorted(maps.Keys(seen))
	if len(e.Labels) > 20 {
		e.More, e.Labels = len(e.Labels)-20, e.Labels[:20]
	}
	return e
}

// labelNames inverts label2id into the id-to-name table; it must give the ids 0..len(label2id)-1 one name each.
// The error lists the mapping sorted by name.
func labelNames(label2id map[string]int) ([]string, error) {
	names := make([]string, len(label2id))
	ok := true
	for name, id := range label2id {
		if id < 0 || id >= len(label2id) || names[id] != "" {
			ok = false
			break
		}
		names[id] = name
	}
	if ok {
		return names, nil
	}
	sorted := make([]string, 0, len(label2id))
	for name := range label2id {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	for i, name := range sorted {
		sorted[i] = strconv.Quote(name) + ": " + strconv.Itoa(label2id[name])
	}
	return nil, fmt.Errorf("the label mapping {%s} must give each class id 0..%d one name",
		strings.Join(sorted, ", "), len(label2id)-1)
}

// quoteAll returns names quoted and comma-separated: "neg", "pos".
func quoteAll(names []string) string { return QuoteNames(names) }

// QuoteNames quotes the first 10 of names, comma-separated, and says how many more there are: a message about
// 200000 labels listed them all (2.5 MB).
func QuoteNames(names []string) string {
	const most = 10
	q := make([]string, 0, min(len(names), most))
	for _, n := range names[:min(len(names), most)] {
		q = append(q, strconv.Quote(n))
	}
	s := strings.Join(q, ", ")
	if len(names) > most {
		s += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return s
}
