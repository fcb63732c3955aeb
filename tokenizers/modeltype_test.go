package tokenizers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelTypeErrors checks that a tokenizer.json that is not JSON, or not a JSON object, is reported with
// the file, the position and what is wrong, never with encoding/json's Go type names.
func TestModelTypeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"empty", "", []string{"tokenizer.json: not a tokenizer.json: ", "the file is empty"}},
		{"array", "[]", []string{"the top level is a JSON array, want an object"}},
		{"model string", `{"model": "x"}`, []string{`"model" is a JSON string, want an object`}},
		{"syntax", "{\n  \"model\": {,\n}", []string{"line 2 column 13"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ModelType(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "Go value") || strings.Contains(msg, "struct {") {
				t.Errorf("error %q names Go types", msg)
			}
		})
	}
}
