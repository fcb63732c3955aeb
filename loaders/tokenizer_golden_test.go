package loaders

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

const goldenScript = "python3 tools/reference/tokenizer_goldens.py --tokenizer ../shared/data/bert-base-uncased/tokenizer.json --sst2 ../shared/data/sst2/dev.tsv --out testdata/tokenizer"

// openGolden opens testdata/tokenizer/name or skips the test, naming the script that writes it.
func openGolden(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(testutil.Testdata(t, "tokenizer", name))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("testdata/tokenizer/%s not generated yet; run on a machine with Hugging Face tokenizers: %s", name, goldenScript)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// sst2Sentences reads dev.tsv exactly as the golden script does: every line after the header, the text before
// its last tab, byte for byte.
func sst2Sentences(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []string
	for _, l := range lines[1:] {
		l = strings.TrimSuffix(l, "\r")
		if i := strings.LastIndexByte(l, '\t'); i >= 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return out
}

func TestTokenizerGoldenSST2Dev(t *testing.T) {
	f := openGolden(t, "hf_sst2_dev_ids.jsonl.gz")
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		t.Fatal("empty golden file")
	}
	var meta struct {
		Version string `json:"tokenizers_version"`
		Count   int    `json:"count"`
	}
	if err := json.Unmarshal(sc.Bytes(), &meta); err != nil {
		t.Fatal(err)
	}
	var want [][]int32
	for sc.Scan() {
		var ids []int32
		if err := json.Unmarshal(sc.Bytes(), &ids); err != nil {
			t.Fatal(err)
		}
		want = append(want, ids)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sentences := sst2Sentences(t, testutil.SharedData(t, "sst2", "dev.tsv"))
	if len(want) != meta.Count || len(sentences) != len(want) {
		t.Fatalf("golden has %d rows (header says %d), dev.tsv has %d sentences; regenerate with %s", len(want), meta.Count, len(sentences), goldenScript)
	}
	for name, tok := range bertTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			bad := 0
			for i, s := range sentences {
				e, err := tok.Encode(s, EncodeOptions{})
				if err != nil {
					t.Fatalf("sentence %d: %v", i+1, err)
				}
				if !reflect.DeepEqual(e.IDs, want[i]) {
					if bad < 5 {
						t.Errorf("dev.tsv sentence %d %q:\n got  %v\n want %v (HF tokenizers %s)", i+1, s, e.IDs, want[i], meta.Version)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d sentences differ from Hugging Face tokenizers %s", bad, len(sentences), meta.Version)
			}
		})
	}
}

type goldenCase struct {
	Name              string         `json:"name"`
	Text              string         `json:"text"`
	Pair              *string        `json:"pair"`
	AddSpecialTokens  bool           `json:"add_special_tokens"`
	MaxLength         *int           `json:"max_length"`
	Padding           map[string]int `json:"padding"`
	IDs               []int32        `json:"ids"`
	TypeIDs           []int32        `json:"type_ids"`
	AttentionMask     []int32        `json:"attention_mask"`
	SpecialTokensMask []int32        `json:"special_tokens_mask"`
	Offsets           [][2]int       `json:"offsets"`
	Tokens            []string       `json:"tokens"`
}

// options translates a golden case's HF settings into EncodeOptions.
func (c goldenCase) options() (EncodeOptions, error) {
	opts := EncodeOptions{NoSpecialTokens: !c.AddSpecialTokens}
	if c.MaxLength != nil {
		opts.MaxLength = *c.MaxLength
	}
	if n, ok := c.Padding["length"]; ok {
		if c.MaxLength == nil || *c.MaxLength != n {
			return opts, fmt.Errorf("padding length %d without max_length %d is not expressible", n, n)
		}
		opts.Padding = PadMaxLength
	}
	if k, ok := c.Padding["pad_to_multiple_of"]; ok {
		opts.Padding = PadLongest
		opts.PadToMultipleOf = k
	}
	return opts, nil
}

func TestTokenizerGoldenEdgeCases(t *testing.T) {
	f := openGolden(t, "hf_edge_cases.json")
	var doc struct {
		Version string       `json:"tokenizers_version"`
		Cases   []goldenCase `json:"cases"`
		Batches []struct {
			Name          string    `json:"name"`
			Texts         []string  `json:"texts"`
			Multiple      *int      `json:"pad_to_multiple_of"`
			IDs           [][]int32 `json:"ids"`
			AttentionMask [][]int32 `json:"attention_mask"`
		} `json:"batches"`
	}
	if err := json.NewDecoder(f).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("no cases in hf_edge_cases.json; regenerate with %s", goldenScript)
	}
	for name, tok := range bertTokenizers(t) {
		for _, c := range doc.Cases {
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				opts, err := c.options()
				if err != nil {
					t.Fatal(err)
				}
				var e *Encoding
				if c.Pair != nil {
					e, err = tok.EncodePair(c.Text, *c.Pair, opts)
				} else {
					e, err = tok.Encode(c.Text, opts)
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range []struct {
					field     string
					got, want any
				}{
					{"ids", e.IDs, c.IDs}, {"type_ids", e.TypeIDs, c.TypeIDs},
					{"attention_mask", e.AttentionMask, c.AttentionMask},
					{"special_tokens_mask", e.SpecialTokensMask, c.SpecialTokensMask},
					{"offsets", e.Offsets, c.Offsets}, {"tokens", e.Tokens, c.Tokens},
				} {
					if !sameSlice(f.got, f.want) {
						t.Errorf("%+q: %s\n got  %v\n want %v (HF tokenizers %s)", c.Text, f.field, f.got, f.want, doc.Version)
					}
				}
			})
		}
		for _, b := range doc.Batches {
			t.Run(name+"/batch/"+b.Name, func(t *testing.T) {
				in := make([]Input, len(b.Texts))
				for i, s := range b.Texts {
					in[i] = Input{Text: s}
				}
				opts := EncodeOptions{Padding: PadLongest}
				if b.Multiple != nil {
					opts.PadToMultipleOf = *b.Multiple
				}
				encs, err := tok.EncodeBatch(in, opts)
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range encs {
					if !reflect.DeepEqual(e.IDs, b.IDs[i]) || !reflect.DeepEqual(e.AttentionMask, b.AttentionMask[i]) {
						t.Errorf("row %d: ids %v mask %v, want %v %v", i, e.IDs, e.AttentionMask, b.IDs[i], b.AttentionMask[i])
					}
				}
			})
		}
	}
}

// sameSlice is reflect.DeepEqual for slices except that nil and empty are equal (JSON's [] decodes to an empty
// slice; an empty Encoding may hold nil).
func sameSlice(got, want any) bool {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	if g.Kind() == reflect.Slice && w.Kind() == reflect.Slice && g.Len() == 0 && w.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(got, want)
}
