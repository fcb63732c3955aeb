package strictjson

import (
	"strings"
	"testing"
)

type inner struct {
	Type  string           `json:"type"`
	Vocab map[string]int64 `json:"vocab"`
}

type outer struct {
	Model    *inner            `json:"model"`
	List     []inner           `json:"list"`
	ByName   map[string]inner  `json:"by_name"`
	Untagged string            // JSON name "Untagged"
	Raw      []byte            `json:"raw"`
	Ignored  string            `json:"-"`
	Specials map[string]string `json:"specials"`
}

func TestUnmarshal(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"exact keys", `{"model": {"type": "WordPiece", "vocab": {"a": 1}}, "list": [{"type": "x"}], "Untagged": "u", "unknown": 1}`, ""},
		{"a key of another case at the top", `{"MODEL": {"type": "x"}}`, `key "MODEL" is not spelled as "model"`},
		{"nested", `{"model": {"voCAB": {"a": 1}}}`, `model: key "voCAB" is not spelled as "vocab" (keys are case-sensitive)`},
		{"in a slice", `{"list": [{"type": "a"}, {"tYpe": "b"}]}`, `list[1]: key "tYpe"`},
		{"in a map", `{"by_name": {"x": {"TYPE": "b"}}}`, `by_name["x"]: key "TYPE"`},
		{"an untagged field is matched by its name only", `{"untagged": "u"}`, `key "untagged" is not spelled as "Untagged"`},
		{"map keys are data, not field names", `{"specials": {"CLS": "x", "cls": "y"}, "model": {"vocab": {"VOCAB": 1}}}`, ""},
		{"a syntax error is json's", `{"model": `, "unexpected end of JSON input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o outer
			err := Unmarshal([]byte(c.in), &o)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
