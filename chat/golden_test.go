package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"

	"github.com/tune-ml/tune/tokenizers"
)

// goldens is testdata/chat/goldens.json, written by tools/reference/chat_template_goldens.py.
type goldens struct {
	Probe     string `json:"strftime_probe"`
	Templates map[string]struct {
		Source    string            `json:"source"`
		Tokenizer string            `json:"tokenizer"`
		Special   map[string]string `json:"special_tokens"`
	} `json:"templates"`
	Cases []struct {
		Template      string                     `json:"template"`
		Conversation  string                     `json:"conversation"`
		AddGeneration bool                       `json:"add_generation_prompt"`
		Kwargs        map[string]json.RawMessage `json:"kwargs"`
		Tools         json.RawMessage            `json:"tools"`
		Text          *string                    `json:"text"`
		Error         string                     `json:"error"`
		IDs           []int32                    `json:"ids"`
	} `json:"cases"`
	Conversations map[string]json.RawMessage `json:"conversations"`
}

func realDir() string {
	if d := os.Getenv("TUNE_TOKENIZERS"); d != "" {
		return d
	}
	return filepath.Join("..", ".tokenizers")
}

func mustParse(t *testing.T, raw []byte) jinja.Value {
	t.Helper()
	v, err := ParseJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestGoldens renders every recorded case and compares the text byte for byte (and, where the real
// tokenizer is present, the ids of apply_chat_template(tokenize=True)).
func TestGoldens(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "chat", "goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldens
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if g.Probe != "2024-07-26 12:00" {
		t.Fatalf("the goldens' clock was not pinned: %q", g.Probe)
	}
	clock := func() time.Time { return time.Date(2024, 7, 26, 12, 0, 0, 0, time.UTC) }
	compiled := map[string]*Template{}
	toks := map[string]*tokenizers.Tokenizer{}
	skipped := map[string]bool{}
	for name, info := range g.Templates {
		var src string
		if tok, ok := strings.CutSuffix(name, "/config"); ok {
			cfg, err := tokenizers.LoadConfig(filepath.Join(realDir(), tok))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Path == "" {
				skipped[name] = true
				t.Logf("%s: skipped, %s is absent (run scripts/fetch-tokenizers.sh)", name, filepath.Join(realDir(), tok))
				continue
			}
			src = cfg.ChatTemplate
		} else {
			b, err := os.ReadFile(filepath.Join("..", "testdata", "chat", info.Source))
			if err != nil {
				t.Fatal(err)
			}
			src = string(b)
		}
		tm, err := Compile(src, info.Source, info.Special)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tm.Now = clock
		compiled[name] = tm
		if _, ok := toks[info.Tokenizer]; !ok {
			if tk, err := tokenizers.LoadForTransformers(filepath.Join(realDir(), info.Tokenizer)); err == nil {
				toks[info.Tokenizer] = tk
			}
		}
	}
	ran, idsChecked := 0, 0
	for _, c := range g.Cases {
		tm := compiled[c.Template]
		if tm == nil {
			if !skipped[c.Template] {
				t.Fatalf("no template %s", c.Template)
			}
			continue
		}
		conv := mustParse(t, g.Conversations[c.Conversation]).AsList().Items
		opts := Options{AddGenerationPrompt: c.AddGeneration, Kwargs: map[string]jinja.Value{}}
		for k, v := range c.Kwargs {
			opts.Kwargs[k] = mustParse(t, v)
		}
		if tools := mustParse(t, c.Tools); tools.IsList() {
			opts.Tools = tools.AsList().Items
		}
		name := c.Template + " " + c.Conversation
		if c.AddGeneration {
			name += " +gen"
		}
		if len(c.Kwargs) > 0 || c.Tools != nil && string(c.Tools) != "null" {
			name += " " + string(mustJSON(c.Kwargs)) + " tools=" + string(c.Tools)[:min(len(c.Tools), 4)]
		}
		ran++
		got, err := tm.Render(conv, opts)
		if c.Text == nil {
			var e *Error
			want := strings.TrimPrefix(c.Error, "TemplateError: ")
			if !errors.As(err, &e) || e.Msg != want {
				t.Errorf("%s: got %q, %v; want the error %q", name, got, err, c.Error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != *c.Text {
			t.Errorf("%s:\n got  %q\n want %q", name, got, *c.Text)
			continue
		}
		if tk := toks[g.Templates[c.Template].Tokenizer]; tk != nil {
			ids, err := tk.Encode(got, false)
			if err != nil || !slices.Equal(ids, c.IDs) {
				t.Errorf("%s: ids %v, want %v (%v)", name, ids, c.IDs, err)
			}
			idsChecked++
		}
	}
	t.Logf("%d cases rendered, %d tokenized", ran, idsChecked)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
