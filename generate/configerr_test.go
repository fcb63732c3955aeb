package generate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadConfigErrors: a broken generation_config.json said "unexpected end of JSON input" (no position), and a
// value of the wrong type spelled out the Go struct ("cannot unmarshal array into Go value of type struct {
// EOS json.RawMessage ..."). Each now names the file and says what is wrong in JSON's terms.
func TestReadConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{"{", "generation_config.json: invalid JSON: line 1 column 1: unexpected end of JSON input"},
		{"[]", "generation_config.json: line 1 column 1: want an object, got a list"},
		{"{\n\"top_k\": 1e30}", `generation_config.json: line 2 column 13: "top_k": want an integer, got the number 1e30`},
		{`{"use_cache": "yes"}`, `generation_config.json: line 1 column 19: "use_cache": want true or false, got a string`},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadConfig(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Go ") {
			t.Errorf("%s: error %v, want one containing %q", c.json, err, c.want)
		}
	}
}
