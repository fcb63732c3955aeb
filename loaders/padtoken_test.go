package loaders

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestPadErrorNamesTheToken (tester10 T10-11): a tokenizer whose pad token is not in its vocabulary said "has no
// padding token; ... (set pad_token in tokenizer_config.json)" even when tokenizer_config.json set one, and
// exited 1. PadError names the token, where it was set and the file to change, as bad input.
func TestPadErrorNamesTheToken(t *testing.T) {
	src := filepath.Join("..", "recipes", "data", "tiny")
	for _, c := range []struct {
		name, config, vocab string
		want                []string
	}{
		{"tokenizer_config.json names a token the vocabulary lacks", `{"pad_token": "<pad>"}`, "",
			[]string{`pad_token "<pad>" (tokenizer_config.json's pad_token) is not in its vocabulary`, "set it in TOKCONFIG"}},
		{"an AddedToken object", `{"pad_token": {"content": "<pad>"}}`, "",
			[]string{`pad_token "<pad>" (tokenizer_config.json's pad_token)`}},
		{"no pad_token, and no [PAD] in vocab.txt", `{}`, "[UNK]\n[CLS]\n[SEP]\nhello\n",
			[]string{`it sets no pad_token, and the default "[PAD]" is not in its vocabulary`, `set "pad_token" in TOKCONFIG`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"tokenizer_config.json": c.config}
			if c.vocab != "" {
				files["vocab.txt"] = c.vocab
			} else {
				b, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
				if err != nil {
					t.Fatal(err)
				}
				files["tokenizer.json"] = string(b)
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := LoadTokenizer(dir)
			if err != nil {
				t.Fatal(err)
			}
			err = tok.PadError()
			if err == nil || !badinput.Is(err) {
				t.Fatalf("PadError = %v, want a bad-input error", err)
			}
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "TOKCONFIG", filepath.Join(dir, "tokenizer_config.json")); !strings.Contains(err.Error(), w) {
					t.Errorf("PadError = %q, want %q", err, w)
				}
			}
			if _, err := tok.Encode("a", EncodeOptions{Padding: PadLongest}); err == nil || !strings.Contains(err.Error(), "is not in its vocabulary") {
				t.Errorf("padding: %v", err)
			}
		})
	}
	tok, err := LoadTokenizer(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.PadError(); err != nil {
		t.Errorf("the tiny tokenizer, whose [PAD] is id 0: %v", err)
	}
}
