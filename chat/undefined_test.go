package chat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ardanlabs/jinja"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/tokenizers"
)

// TestUndefinedAsJinja2 (tester10 F4): an undefined value (a name not set, a missing dict key, a list index out
// of range) behaves as jinja2's default Undefined does in transformers' ImmutableSandboxedEnvironment
// (trim_blocks, lstrip_blocks): printing it gives "", it is false and not defined, iterates as empty, and
// equals only itself; reading its attributes or items, calling it, arithmetic and ordering comparisons with it
// raise UndefinedError. The engine printed "" for foo.bar and gave 1 for foo + 1. Each case's text or error
// (message and template line) is what jinja2 3.1.6 renders, with messages=[{"role": "user", "content": "hi"}]
// and none_val=None.
func TestUndefinedAsJinja2(t *testing.T) {
	for _, c := range []struct {
		src, text, err string
		line           int
	}{
		{"[{{ foo }}]", "[]", "", 0},
		{"[{{ foo|list }}]", "[[]]", "", 0},
		{"[{{ foo|first }}]", "[]", "", 0},
		{"[{{ foo|join(',') }}]", "[]", "", 0},
		{"[{{ foo|int }}]", "", "'foo' is undefined", 1},
		{"{{ 1 }}\n[{{ foo|tojson }}]", "", "TypeError", 2},
		{"[{{ messages[0].nope|float }}]", "", "'dict object' has no attribute 'nope'", 1},
		{"{% if foo %}T{% else %}F{% endif %}", "F", "", 0},
		{"{{ foo is defined }}", "False", "", 0},
		{"[{{ foo.bar }}]", "", "'foo' is undefined", 1},
		{"[{{ foo['bar'] }}]", "", "'foo' is undefined", 1},
		{"[{% for x in foo %}{{x}}{% else %}E{% endfor %}]", "[E]", "", 0},
		{"[{{ foo + 1 }}]", "", "'foo' is undefined", 1},
		{"[{{ 1 + foo }}]", "", "'foo' is undefined", 1},
		{"[{{ foo == 1 }}]", "[False]", "", 0},
		{"[{{ foo != 1 }}]", "[True]", "", 0},
		{"[{{ foo < 1 }}]", "", "'foo' is undefined", 1},
		{"[{{ 1 >= foo }}]", "", "'foo' is undefined", 1},
		{"[{{ foo() }}]", "", "'foo' is undefined", 1},
		{"[{{ foo ~ 'a' }}]", "[a]", "", 0},
		{"[{{ foo | length }}]", "[0]", "", 0},
		{"[{{ messages[5] }}]", "[]", "", 0},
		{"[{{ messages[5].role }}]", "", "list object has no element 5", 1},
		{"[{{ messages[0].nope }}]", "[]", "", 0},
		{"[{{ messages[0].nope.x }}]", "", "'dict object' has no attribute 'nope'", 1},
		{"[{{ messages[0]['nope']['x'] }}]", "", "'dict object' has no attribute 'nope'", 1},
		{"[{{ not foo }}]", "[True]", "", 0},
		{"[{{ -foo }}]", "", "'foo' is undefined", 1},
		{"[{{ foo * 2 }}]", "", "'foo' is undefined", 1},
		{"[{{ foo - 1 }}]", "", "'foo' is undefined", 1},
		{"[{{ foo / 2 }}]", "", "'foo' is undefined", 1},
		{"[{{ foo // 2 }}]", "", "'foo' is undefined", 1},
		{"[{{ foo % 2 }}]", "", "'foo' is undefined", 1},
		{"[{{ foo ** 2 }}]", "", "'foo' is undefined", 1},
		{"[{{ foo.bar is defined }}]", "", "'foo' is undefined", 1},
		{"[{{ foo[1:] }}]", "", "'foo' is undefined", 1},
		{"[{{ foo.upper() }}]", "", "'foo' is undefined", 1},
		{"[{{ messages[0].nope() }}]", "", "'dict object' has no attribute 'nope'", 1},
		{"[{{ messages[0].content.nope }}]", "[]", "", 0},
		{"[{{ messages[0].content.nope.x }}]", "", "'str object' has no attribute 'nope'", 1},
		{"[{{ none_val.x }}]", "[]", "", 0},
		{"[{{ none_val.x.y }}]", "", "'None' has no attribute 'x'", 1},
		{"[{{ messages[0][3] }}]", "[]", "", 0},
		{"[{{ messages[0][3].x }}]", "", "dict object has no element 3", 1},
		{"line1\n{% if true %}\n{{ foo.bar }}\n{% endif %}", "", "'foo' is undefined", 3},
		{"a\n{% for m in messages %}\n{% if m.role == 'user' %}\n{{ m.x + 1 }}\n{% endif %}\n{% endfor %}", "", "'dict object' has no attribute 'x'", 4},
		{"{% if false %}{% elif foo > 1 %}x{% endif %}", "", "'foo' is undefined", 1},
		{"{% set x = foo %}[{{ x }}]", "[]", "", 0},
		{"{{ 'a' if foo else 'b' }}", "b", "", 0},
		{"[{{ foo and 1 }}]", "[]", "", 0},
		{"[{{ foo or 'x' }}]", "[x]", "", 0},
		{"[{{ messages[0].nope + 'x' }}]", "", "'dict object' has no attribute 'nope'", 1},
		{"[{{ +foo }}]", "", "'foo' is undefined", 1},
		{"{% if false %}\nA\n{% elif foo > 1 %}\nB\n{% endif %}", "", "'foo' is undefined", 3},
		{"{# a comment\nover lines #}\n{% raw %}\n{{ not a tag }}\n{% endraw %}\n{{ 'x' ~ \"}}\" }}\n{{ foo.bar }}", "", "'foo' is undefined", 7},
		{"{%- for m in messages -%}\n  {%- if m.role == 'user' %}\n    {{- m.content }}\n  {%- endif %}\n{%- endfor %}\n{{ messages[1].content }}", "", "list object has no element 1", 6},
	} {
		tm, err := Compile(c.src, "t.jinja", nil)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if !tm.lined {
			t.Errorf("%q: the template's lines were not found", c.src)
		}
		got, err := tm.Render(Messages([]Message{{"user", "hi"}}), Options{Kwargs: map[string]jinja.Value{"none_val": jinja.None()}})
		if c.err == "" {
			if err != nil || got != c.text {
				t.Errorf("%q: %q, %v; want %q", c.src, got, err, c.text)
			}
			continue
		}
		var e *Error
		if c.err == "TypeError" { // not an UndefinedError: json.dumps refuses the value
			if !errors.As(err, &e) || e.Undefined || e.Msg != "Object of type Undefined is not JSON serializable" || e.Line != c.line {
				t.Errorf("%q: %q, %#v; want the TypeError of json.dumps at line %d", c.src, got, e, c.line)
			}
			continue
		}
		if !errors.As(err, &e) || !e.Undefined || e.Msg != c.err || e.Line != c.line || e.Source != "t.jinja" || !badinput.Is(err) {
			t.Errorf("%q: %q, %#v; want the UndefinedError %q at line %d", c.src, got, e, c.err, c.line)
		}
	}
}

// TestTemplatesHaveLines: the tags of every chat template the tests know (testdata/chat, the tiny-chat
// recipe's, and the real Llama 3 and Qwen3 ones when scripts/fetch-tokenizers.sh has fetched them) line up with
// the compiled tree, so their UndefinedErrors name a line.
func TestTemplatesHaveLines(t *testing.T) {
	srcs := map[string]string{}
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "chat", "*.jinja"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = string(b)
	}
	dirs := []string{filepath.Join("..", "recipes", "data", "tiny-chat")}
	for _, n := range []string{"llama2", "llama3", "qwen3"} {
		dirs = append(dirs, filepath.Join(realDir(), n))
	}
	for _, d := range dirs {
		if cfg, err := tokenizers.LoadConfig(d); err == nil && cfg.ChatTemplate != "" {
			srcs[d] = cfg.ChatTemplate
		}
	}
	if len(srcs) < 6 {
		t.Fatalf("found %d templates", len(srcs))
	}
	for name, src := range srcs {
		tm, err := Compile(src, name, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !tm.lined {
			t.Errorf("%s: the template's lines were not found", name)
		}
	}
	t.Logf("%d templates", len(srcs))
}
