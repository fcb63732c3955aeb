package bert

import (
	"github.com/tune-ml/tune/transformer"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLookup: config.json's model_type picks the family; without one, the architectures do (and a config with
// neither is BERT's, as tune's first checkpoints were); an unknown model_type names the file, the value and
// what tune builds.
func TestLookup(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model_type": "bert"}`, "bert"},
		{`{"architectures": ["BertForMaskedLM"]}`, "bert"},
		{`{"hidden_size": 8}`, "bert"},
	} {
		f, err := transformer.Lookup(writeConfig(t, c.body))
		if err != nil || f.Name != c.want {
			t.Errorf("%s: got %v, %v; want family %s", c.body, f, err, c.want)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"model_type": "gemma"}`, `model_type "gemma" is not supported; tune builds model_type bert`},
		{`{"architectures": ["GemmaForCausalLM"]}`, `has no model_type and its architectures [GemmaForCausalLM] name no class`},
		{`{"model_type": `, `config.json: invalid JSON: line 1 column 15: unexpected end of JSON input`},
	} {
		_, err := transformer.Lookup(writeConfig(t, c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: got %v, want an error containing %q", c.body, err, c.want)
		}
	}
	if _, _, err := transformer.Open(writeConfig(t, `{"model_type": "t5"}`), cpu.New(), transformer.LoadOptions{}); err == nil {
		t.Error("Open of a t5 config succeeded")
	}
}
