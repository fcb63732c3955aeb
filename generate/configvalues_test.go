package generate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestReadConfigRefusesBadValues (tester10 T10-15): an eos_token_id that was a string gave "eos_token_id must be
// an integer or a list of integers" with exit 1 and no value, and a negative one, one past the vocabulary or a
// negative temperature were taken as they were. Each is bad input naming generation_config.json, the key, the
// value and what is accepted.
func TestReadConfigRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"a string eos_token_id", `{"eos_token_id": "x"}`, `eos_token_id "x": want a token id (a whole number from 0`},
		{"a negative eos_token_id", `{"eos_token_id": -5}`, `eos_token_id -5: want a token id`},
		{"a fraction in a list", `{"eos_token_id": [2, 2.5]}`, `eos_token_id [2, 2.5]: want a token id`},
		{"a negative temperature", `{"temperature": -1}`, `temperature -1: want a number ≥ 0`},
		{"a temperature of the wrong type", `{"temperature": "hot"}`, `line 1 column 21: "temperature": want a number, got a string`},
		{"a negative top_k", `{"top_k": -3}`, `top_k -3: want a whole number ≥ 0`},
		{"top_p above 1", `{"top_p": 2}`, `top_p 2: want a number from 0 to 1`},
		{"max_new_tokens 0", `{"max_new_tokens": 0}`, `max_new_tokens 0: want a whole number ≥ 1`},
		{"not JSON", `{"eos_token_id": }`, `invalid JSON: line 1 column 18`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "generation_config.json")
			if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadConfig(dir)
			if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), p+": "+c.want) {
				t.Fatalf("ReadConfig = %v, want bad input with %q", err, p+": "+c.want)
			}
		})
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "generation_config.json")
	if err := os.WriteFile(p, []byte(`{"eos_token_id": [2, 99999], "temperature": 0.7, "top_k": 0, "top_p": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := p + ": eos_token_id 99999 is not a token of the model, whose vocabulary has ids 0 to 755 (config.json's vocab_size 756)"
	if err := c.CheckVocab(756); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckVocab(756) = %v, want %q", err, want)
	}
	if err := c.CheckVocab(100000); err != nil {
		t.Errorf("CheckVocab(100000) = %v", err)
	}
	if err := c.CheckVocab(0); err != nil {
		t.Errorf("CheckVocab of an unknown vocabulary = %v", err)
	}
}
