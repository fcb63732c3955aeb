package chat

import (
	"errors"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestHostileTemplates renders templates that, unbounded, exhaust memory or Go's stack (findings of a
// tester: a range of 10^9, a macro that calls itself, a 10 GB string repetition) and checks that each one
// fails with an Error naming the template and the limit, within a second and a few hundred MB.
func TestHostileTemplates(t *testing.T) {
	debug.SetMaxStack(256 << 20) // a runaway recursion fails the test quickly instead of using 1 GB of stack
	defer debug.SetMaxStack(1 << 30)
	cases := []struct{ name, src, want string }{
		{"huge range", `{% for i in range(1000000000) %}x{% endfor %}`, "range() of more than 100000"},
		{"range alone", `{% set r = range(1000000000) %}`, "range() of more than 100000"},
		{"negative step range", `{% for i in range(0, -1000000000, -1) %}{% endfor %}`, "range() of more than 100000"},
		{"nested ranges", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, "more than 10000000 iterations"},
		{"recursive macro", `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`, "deeper than 500"},
		{"mutual recursion", `{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) }}`, "deeper than 500"},
		{"string repetition", `{{ "x" * 10000000000 }}`, "the operator * would build a string of 10000000000 bytes"},
		{"repetition overflow", `{{ "xx" * 9000000000000000000 }}`, "the operator *"},
		{"doubling", `{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`, "the operator ~ would build"},
		{"doubling with +", `{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`, "the operator + would build"},
		{"output", `{% for i in range(100000) %}{{ "x" * 200 }}{% endfor %}`, "the rendered text passes 16777216 bytes"},
		{"loop over a long string", `{% for c in "x" * 16000000 %}{% endfor %}`, "a for-loop over a string of more than 100000 characters"},
		{"indent", `{{ "a\nb" | indent(10000000000) }}`, "the filter indent"},
		{"replace", `{% set s = "x" * 10000 %}{{ s.replace("", s) }}`, "replace()"},
		{"replace filter", `{% set s = "x" * 10000 %}{{ s | replace("x", s) }}`, "the filter replace"},
		// findings5 #2: tojson(indent=N) on a path (tune's rewrite) and on another value (the engine's filter).
		{"tojson indent on a path", `{{ messages|tojson(indent=1000000000) }}`, "the filter tojson would build"},
		{"tojson indent on a literal", `{{ [1,[2,[3,[4]]]]|tojson(indent=300000000) }}`, "the filter tojson would build"},
		{"tojson negative indent", `{{ messages|tojson(indent=-5) }}`, "the indent must be 0 or more"},
		{"tojson negative indent literal", `{{ [1]|tojson(indent=-1) }}`, "the indent must be 0 or more"},
		// findings5 #3: values that contain themselves.
		{"list contains itself", `{% set l = [1] %}{% set _ = l.append(l) %}{{ l }}`, "would put a list into itself"},
		{"list compared with itself", `{% set l = [1] %}{% set _ = l.append(l) %}{{ l == l }}`, "would put a list into itself"},
		{"list through another", `{% set a = [1] %}{% set b = [a] %}{% set _ = a.append(b) %}{{ a }}`, "would put a list into itself"},
		{"insert", `{% set l = [1] %}{% set _ = l.insert(0, [l]) %}{{ l }}`, "would put a list into itself"},
		{"dict contains itself", `{% set d = {} %}{% set _ = d.update({"a": d}) %}{{ d }}`, "would put a dict or namespace into itself"},
		{"namespace contains itself", `{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns.a }}`, "would put a dict or namespace into itself"},
		{"deep nesting", `{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}`, "deeper than 1000"},
		// findings5 #4: filters and methods that copy strings count towards MaxBuilt.
		{"upper copies", `{% set s = "x" * 16000000 %}{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append(s|upper) %}{% endfor %}{{ l|length }}`, "build more than 1073741824 bytes in all"},
		{"upper method copies", `{% set s = "x" * 16000000 %}{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append(s.upper()) %}{% endfor %}{{ l|length }}`, "build more than 1073741824 bytes in all"},
		// tester8 F3: lists built by range() and |list count towards MaxBuilt too.
		{"lists of ranges", `{% set l = [] %}{% for i in range(3000) %}{% set _ = l.append(range(100000)|list) %}{% endfor %}{{ l|length }}`, "build more than 1073741824 bytes in all"},
		{"ranges appended", `{% set l = [] %}{% for i in range(3000) %}{% set _ = l.append(range(100000)) %}{% endfor %}{{ l|length }}`, "build more than 1073741824 bytes in all"},
		{"split", `{% set s = " x" * 8000000 %}{% set a = s.split(" ") %}`, "split() would build"},
		{"split fields", `{% set s = " x" * 8000000 %}{% set a = s.split() %}`, "split() would build"},
		{"split empty separator", `{{ ("x" * 1000).split("") }}`, "empty separator"},
		{"join", `{% set s = "x" * 1000000 %}{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = ns.l + [s] %}{% endfor %}{{ ns.l | join("") }}`, "would build"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, err := Compile(c.src, "g/tokenizer_config.json (chat_template)", nil)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := tm.Render(Messages([]Message{{"user", "hi"}}), Options{})
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("still rendering after 20 s")
			}
			runtime.ReadMemStats(&after)
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "g/tokenizer_config.json") ||
				!strings.Contains(err.Error(), "chat_template") {
				t.Fatalf("got %v, want an Error naming the file and %q", err, c.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<30 {
				t.Errorf("allocated %d MB", alloc>>20)
			}
			t.Logf("%v in %v", err, time.Since(start))
		})
	}
}

// TestLimitsKeepRendering checks that the guards change nothing for templates within the limits: the
// operators, filters and methods they wrap give the engine's results.
func TestLimitsKeepRendering(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{{ "ab" * 3 }}|{{ "ab" * 0 }}|{{ 2 * 3 }}|{{ 1.5 * 2 }}`, "ababab||6|3"},
		{`{{ "a" + "b" }}|{{ 1 + 2 }}|{{ [1] + [2] }}|{{ "a" ~ 1 ~ none }}`, "ab|3|[1, 2]|a1"},
		{`{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}|{% for i in range(1, 3) %}{{ i }}{% endfor %}`, "012|531|12"},
		{`{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}`, "321"},
		{`{{ "a\nb" | indent(2) }}|{{ "a-b" | replace("-", "+") }}|{{ "a-b".replace("-", "") }}|{{ ["a", "b"] | join(", ") }}`, "a\n  b|a+b|ab|a, b"},
		{`{% for c in "abc" %}{{ c }}.{% endfor %}`, "a.b.c."},
		{`{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}`, "user:hi;"},
		{`{{ "aB"|upper }}{{ "aB".lower() }}|{{ " a b ".split() }}|{{ "a,b".split(",") }}|{{ " x ".strip() }}|{{ "<"|e }}`, "ABab|['a', 'b']|['a', 'b']|x|&lt;"},
		{`{% set l = [1] %}{% set _ = l.append([2]) %}{% set _ = l.insert(0, 0) %}{{ l }}|{% set d = {"a": 1} %}{% set _ = d.update({"b": [d["a"]]}) %}{{ d|tojson }}`, `[0, 1, [2]]|{"a": 1, "b": [1]}`},
		{`{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = ns.l + [i] %}{% endfor %}{{ ns.l }}|{{ messages|tojson(indent=2) }}`, "[0, 1, 2]|[\n  {\n    \"role\": \"user\",\n    \"content\": \"hi\"\n  }\n]"},
	}
	for _, c := range cases {
		tm, err := Compile(c.src, "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.Render(Messages([]Message{{"user", "hi"}}), Options{})
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.src, got, err, c.want)
		}
	}
}

// TestDeepNesting checks that a template whose brackets or blocks nest deeper than MaxNesting is
// refused at Compile (the parser would overflow Go's stack, or take minutes), and a long shallow one is not.
func TestDeepNesting(t *testing.T) {
	src := "{{ " + strings.Repeat("(", 1_000_000) + "1" + strings.Repeat(")", 1_000_000) + " }}"
	if _, err := Compile(src, "g/tokenizer_config.json", nil); err == nil || !strings.Contains(err.Error(), "nests brackets or blocks 1000002 deep") {
		t.Fatalf("got %v", err)
	}
	src = strings.Repeat("{% if true %}", 200_000) + "x" + strings.Repeat("{% endif %}", 200_000)
	if _, err := Compile(src, "g/tokenizer_config.json", nil); err == nil || !strings.Contains(err.Error(), "200000 deep") {
		t.Fatalf("got %v", err)
	}
	src = strings.Repeat("{% if true %}{% set x = 1 %}{% set y %}a{% endset %}x{% endif %}", 5000) // deep 2, long
	if _, err := Compile(src, "g/tokenizer_config.json", nil); err != nil {
		t.Fatalf("a long, shallow template: %v", err)
	}
}
