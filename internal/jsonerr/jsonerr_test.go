package jsonerr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestWrap: each kind of decoding error names the file and where it is, in the file's terms (no Go type names),
// and still unwraps to encoding/json's error.
func TestWrap(t *testing.T) {
	type config struct {
		VocabSize int      `json:"vocab_size"`
		Names     []string `json:"names"`
	}
	for _, c := range []struct{ name, data, want string }{
		{"a syntax error gives line and column", "{\n  \"a\": 1,,\n}", "c.json: invalid JSON: line 2 column 10: invalid character ','"},
		{"an empty file", "", "c.json: invalid JSON: line 1 column 1: unexpected end of JSON input"},
		{"a wrong type names the key", "{\"vocab_size\": \"x\"}", `c.json: line 1 column 18: "vocab_size": want an integer, got a string`},
		{"a fraction for an integer", "{\"vocab_size\": 2.5}", `"vocab_size": want an integer, got the number 2.5`},
		{"the top level of another type", "[1, 2]", "c.json: line 1 column 1: want an object, got a list"},
		{"inside a list", "{\"names\": [1]}", `"names": want a string, got a number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v config
			inner := json.Unmarshal([]byte(c.data), &v)
			err := Wrap("c.json", []byte(c.data), inner)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Wrap = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "unmarshal") {
				t.Errorf("Go's terms reach the message: %v", err)
			}
			if !errors.Is(err, inner) {
				t.Error("the error does not unwrap to encoding/json's")
			}
		})
	}
	if Wrap("c.json", nil, nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
