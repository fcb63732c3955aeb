package generate

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestUnappliedDecodingKeys: generation_config.json keys that change transformers' output and that tune does not
// implement were dropped without a word (findings5 #20: repetition_penalty 1.5 gave the no-penalty text). They
// are listed in Config.Unapplied (tune generate warns), unless at their neutral values.
func TestUnappliedDecodingKeys(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": 2, "repetition_penalty": 1.5,
		"max_length": 4096, "num_beams": 4, "min_p": null, "no_repeat_ngram_size": 0, "typical_p": 1.0, "temperature": 0.7}`), 0o644)
	c, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"repetition_penalty 1.5", "num_beams 4", "max_length 4096"}; !slices.Equal(c.Unapplied, want) {
		t.Errorf("Unapplied %q, want %q", c.Unapplied, want)
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": 2, "repetition_penalty": 1.0, "num_beams": 1}`), 0o644)
	if c, err := ReadConfig(dir); err != nil || len(c.Unapplied) != 0 {
		t.Errorf("neutral values: %q, %v", c.Unapplied, err)
	}
}
