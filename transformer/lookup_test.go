package transformer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookupNamesBrokenJSON: a truncated config.json made `tune inspect DIR` say "DIR/config.json: unexpected
// end of JSON input", with no position, and a model_type of the wrong type spelled out Go's struct.
func TestLookupNamesBrokenJSON(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{"{\n \"model_type\": \"bert\",", "config.json: invalid JSON: line 2 column 22: unexpected end of JSON input"},
		{`{"model_type": 5}`, `config.json: line 1 column 16: "model_type": want a string, got a number`},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Lookup(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Go ") {
			t.Errorf("%s: error %v, want one containing %q", c.json, err, c.want)
		}
	}
}
