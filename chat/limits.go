package chat

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// Limits of one rendering, in the spirit of transformers' sandbox (transformers/utils/chat_template_utils.py
// renders in jinja2.sandbox.ImmutableSandboxedEnvironment, whose range() refuses more than MAX_RANGE =
// 100000 items, and Python's recursion limit stops a runaway macro). A template that passes one fails with
// an Error naming the template's file and the limit.
const (
	// MaxRange is the most items range() makes (jinja2.sandbox.MAX_RANGE), and the most characters a
	// for-loop over a string may visit.
	MaxRange = 100_000
	// MaxDepth is the deepest chain of macro calls.
	MaxDepth = 500
	// MaxLoopIterations is the most for-loop iterations one rendering runs, all loops together.
	MaxLoopIterations = 10_000_000
	// MaxOutput is the most bytes one rendering writes (text written inside macros and set blocks counts
	// too) and the longest string an operator or filter may build.
	MaxOutput = 16 << 20
	// MaxBuilt is the most bytes that *, +, ~, range() and the guarded filters and methods (list copies at
	// valueBytes an item) may build in one rendering.
	MaxBuilt = 1 << 30
	// MaxValueDepth is the deepest nesting of lists and dicts a {% set %}, append, insert or update may make
	// (Python's repr stops at its recursion limit, 1000, too); a value can never contain itself.
	MaxValueDepth = 1000
	// MaxWalk is the most list items and dict entries the guards may visit in one rendering, checking values
	// for depth and self-containment.
	MaxWalk = 50_000_000
)

// valueBytes is what one list item costs the engine (a jinja.Value and its slot), for the guards' estimates.
const valueBytes = 64

// guard is the state of one rendering.
type guard struct {
	source             string
	out, built         int64
	ticks, depth       int
	walked             int
	stack              []jinja.Value
	outputLimit, limit int64 // MaxOutput unless a test lowers them
}

func (g *guard) fail(format string, args ...any) error {
	return &Error{Source: g.source, Msg: fmt.Sprintf(format, args...) + ": a limit tune sets on chat templates, as transformers' sandboxed rendering does"}
}

// globals returns the guard functions and the bounded range() the instrumented tree calls.
func (g *guard) globals() map[string]jinja.Value {
	fn := func(name string, f func([]jinja.Value) (jinja.Value, error)) jinja.Value {
		return jinja.NewCallable(name, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) { return f(args) })
	}
	empty := jinja.NewString("")
	return map[string]jinja.Value{
		"range": jinja.NewCallable("range", g.rangeFn),
		guardOut: fn(guardOut, func(a []jinja.Value) (jinja.Value, error) {
			g.out += int64(size(a[0]))
			if g.out > g.outputLimit {
				return jinja.Undefined(), g.fail("the rendered text passes %d bytes", g.outputLimit)
			}
			return a[0], nil
		}),
		guardTick: fn(guardTick, func([]jinja.Value) (jinja.Value, error) {
			if g.ticks++; g.ticks > MaxLoopIterations {
				return jinja.Undefined(), g.fail("the for-loops run more than %d iterations", MaxLoopIterations)
			}
			return empty, nil
		}),
		guardIter: fn(guardIter, func(a []jinja.Value) (jinja.Value, error) {
			if a[0].IsString() && len(a[0].AsString()) > MaxRange && utf8.RuneCountInString(a[0].AsString()) > MaxRange {
				return jinja.Undefined(), g.fail("a for-loop over a string of more than %d characters", MaxRange)
			}
			return a[0], nil
		}),
		guardEnter: fn(guardEnter, func([]jinja.Value) (jinja.Value, error) {
			if g.depth++; g.depth > MaxDepth {
				return jinja.Undefined(), g.fail("macro calls nest deeper than %d (a macro that calls itself without end?)", MaxDepth)
			}
			return empty, nil
		}),
		guardLeave: fn(guardLeave, func([]jinja.Value) (jinja.Value, error) { g.depth--; return empty, nil }),
		guardPush: fn(guardPush, func(a []jinja.Value) (jinja.Value, error) {
			g.stack = append(g.stack, a[0])
			return a[0], nil
		}),
		guardCheck:       fn(guardCheck, g.check),
		guardDefined:     fn(guardDefined, g.checkDefined),
		guardFilterInput: fn(guardFilterInput, g.checkFilterInput),
		indentedJSONFunc: jinja.NewCallable(indentedJSONFunc, func(a []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
			// PATH | tojson(indent=N), rewritten at Compile: bounded as the tojson filter is, before it writes.
			if len(a) == 2 && a[1].IsInt() {
				if want := jsonBound(a[0], a[1].AsInt(), 0); want > g.limit {
					return jinja.Undefined(), g.fail("the filter tojson would build a string of %d bytes, more than the limit of %d", want, g.limit)
				} else if g.built += want; g.built > MaxBuilt {
					return jinja.Undefined(), g.fail("the operators and filters build more than %d bytes in all", MaxBuilt)
				}
			}
			return indentedJSON(a, kw)
		}),
		guardValue: fn(guardValue, func(a []jinja.Value) (jinja.Value, error) {
			if err := g.checkValue("{% set %}", a[0], a[1]); err != nil {
				return jinja.Undefined(), err
			}
			return a[1], nil
		}),
	}
}

// checkValue refuses v, about to be stored by op into target (a list or dict; None for a plain variable),
// when v nests lists and dicts deeper than MaxValueDepth or contains target: the engine's printing,
// comparison and filters recurse through values without a limit, so a list that contains itself
// (l.append(l)) ends the process with a fatal stack overflow.
func (g *guard) checkValue(op string, target, v jinja.Value) error {
	var list *jinja.List
	var dict *jinja.Dict
	switch {
	case target.IsList():
		list = target.AsList()
	case target.IsDict():
		dict = target.AsDict()
	}
	var walk func(v jinja.Value, depth int) error
	walk = func(v jinja.Value, depth int) error {
		if !v.IsList() && !v.IsDict() {
			return nil
		}
		if depth > MaxValueDepth {
			return g.fail("%s would nest lists and dicts deeper than %d", op, MaxValueDepth)
		}
		if g.walked++; g.walked > MaxWalk {
			return g.fail("the guards would visit more than %d list items and dict entries", MaxWalk)
		}
		if v.IsList() {
			l := v.AsList()
			if l == list {
				return g.fail("%s would put a list into itself (a list that contains itself has no end when printed or compared)", op)
			}
			for _, it := range l.Items {
				if err := walk(it, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		d := v.AsDict()
		if d == dict {
			return g.fail("%s would put a dict or namespace into itself (a dict that contains itself has no end when printed or compared)", op)
		}
		for _, k := range d.Keys {
			if err := walk(d.Data[k], depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(v, 1)
}

// rangeFn is Python's range, refusing more than MaxRange items as jinja2's sandbox does.
func (g *guard) rangeFn(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	var start, stop, step int64 = 0, 0, 1
	for _, a := range args {
		if !a.IsInt() {
			return jinja.Undefined(), g.fail("range() takes integers, got %s", a.String())
		}
	}
	switch len(args) {
	case 1:
		stop = args[0].AsInt()
	case 2, 3:
		start, stop = args[0].AsInt(), args[1].AsInt()
		if len(args) == 3 {
			step = args[2].AsInt()
		}
	default:
		return jinja.Undefined(), g.fail("range() takes 1 to 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), g.fail("range() step must not be zero")
	}
	var n int64
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && start > stop {
		n = (start - stop - step - 1) / -step
	}
	if n > MaxRange || n < 0 {
		return jinja.Undefined(), g.fail("range() of more than %d items", MaxRange)
	}
	if g.built += n * valueBytes; g.built > MaxBuilt { // the lists range() makes count as built bytes too
		return jinja.Undefined(), g.fail("the operators, filters and range() build more than %d bytes in all", MaxBuilt)
	}
	items := make([]jinja.Value, n)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

// check sees the operands of a guarded operator, filter or method (the last as its argument, the others on
// the stack) and refuses one whose result would pass MaxOutput or push the rendering past MaxBuilt. It
// returns the last operand unchanged.
func (g *guard) check(a []jinja.Value) (jinja.Value, error) {
	op, npos, last := a[0].AsString(), int(a[1].AsInt()), a[3]
	var names []jinja.Value
	if a[2].IsList() {
		names = a[2].AsList().Items
	}
	n := 1 + npos + len(names) // operands in all: subject (or left), positional, keyword
	if op == "*" || op == "+" || op == "~" {
		n = 2
	}
	if len(g.stack) < n-1 {
		return jinja.Undefined(), g.fail("internal: guard stack underflow at %s", op)
	}
	ops := g.stack[len(g.stack)-(n-1):]
	g.stack = g.stack[:len(g.stack)-(n-1)]
	ops = append(ops[:n-1:n-1], last) // a copy once the stack has more: the capacity stops at the slice
	var kw map[string]jinja.Value
	if len(names) > 0 {
		kw = map[string]jinja.Value{}
		for i, k := range names {
			kw[k.AsString()] = ops[1+npos+i]
		}
	}
	pos := ops[1 : 1+min(npos, len(ops)-1)]
	arg := func(i int, key string) (jinja.Value, bool) {
		if v, ok := kw[key]; ok {
			return v, true
		}
		if i < len(pos) {
			return pos[i], true
		}
		return jinja.Undefined(), false
	}
	subject := ops[0]
	var want int64 // the result's size, at most
	switch name := strings.TrimPrefix(op, "."); name {
	case "append", "update":
		if len(ops) > 1 && (subject.IsList() || subject.IsDict()) {
			if err := g.checkValue(name+"()", subject, ops[1]); err != nil {
				return jinja.Undefined(), err
			}
		}
		want = valueBytes
		if name == "update" && len(ops) > 1 {
			want = int64(size(ops[1]))
		}
	case "insert":
		if len(ops) > 2 && subject.IsList() {
			if err := g.checkValue("insert()", subject, ops[2]); err != nil {
				return jinja.Undefined(), err
			}
		}
		want = valueBytes
	case "upper", "lower", "title", "capitalize", "trim", "strip", "lstrip", "rstrip", "reverse", "string",
		"unique", "sort", "map", "select", "reject", "selectattr", "rejectattr", "dictsort", "items", "batch":
		want = int64(size(subject)) // a copy of the subject, at most
	case "escape", "e":
		want = 6 * int64(size(subject)) // "&#34;" for each '"', at most
	case "split":
		s := str(subject)
		sep, given := arg(0, "sep")
		var items int64
		switch {
		case !given || sep.IsNone():
			items = int64(countFields(s))
		case str(sep) == "":
			return jinja.Undefined(), g.fail("split() with an empty separator (Python raises ValueError: empty separator)")
		default:
			items = int64(strings.Count(s, str(sep)) + 1)
		}
		want = int64(len(s)) + items*valueBytes
	case "tojson":
		indent := int64(-1)
		if v, ok := arg(0, "indent"); ok && !v.IsNone() {
			if indent = toInt(v); indent < 0 {
				return jinja.Undefined(), g.fail("tojson(indent=%d): the indent must be 0 or more", indent)
			}
		}
		want = jsonBound(subject, indent, 0)
	case "*":
		if subject.IsString() && last.IsInt() {
			want = int64(len(subject.AsString())) * max(last.AsInt(), 0)
			if last.AsInt() > 0 && want/last.AsInt() != int64(len(subject.AsString())) {
				want = 1 << 62
			}
		}
	case "+", "~":
		if op == "~" || subject.IsString() || last.IsString() || (subject.IsList() && last.IsList()) {
			want = int64(size(subject) + size(last))
		}
	case "indent":
		w := int64(4)
		if v, ok := arg(0, "width"); ok {
			w = toInt(v)
		}
		s := size(subject)
		want = int64(s) + max(w, 0)*int64(strings.Count(str(subject), "\n")+1)
		if w < 0 || w > MaxOutput {
			want = 1 << 62
		}
	case "center":
		w, _ := arg(0, "width")
		want = int64(size(subject)) + max(toInt(w), 0)
	case "replace":
		old, _ := arg(0, "old")
		nw, _ := arg(1, "new")
		s, o := str(subject), str(old)
		var count int64
		if o == "" {
			count = int64(utf8.RuneCountInString(s) + 1)
		} else {
			count = int64(strings.Count(s, o))
		}
		want = int64(len(s)) + count*int64(len(str(nw)))
	case "join":
		if subject.IsList() {
			sep, _ := arg(0, "d")
			items := subject.AsList().Items
			for _, it := range items {
				want += int64(size(it))
			}
			want += int64(max(len(items)-1, 0)) * int64(len(str(sep)))
		}
	case "list":
		if subject.IsString() {
			want = int64(utf8.RuneCountInString(subject.AsString())) * 32 // a list item per character
		} else if subject.IsList() {
			want = int64(len(subject.AsList().Items)) * valueBytes // a copy of the list
		}
	case "format":
		want = int64(size(subject))
		for _, v := range ops[1:] {
			want += int64(size(v)) * int64(strings.Count(str(subject), "%")+strings.Count(str(subject), "{")+1)
		}
	}
	if want > g.limit {
		return jinja.Undefined(), g.fail("%s would build a string of %d bytes, more than the limit of %d", describe(op), want, g.limit)
	}
	if g.built += want; g.built > MaxBuilt {
		return jinja.Undefined(), g.fail("the operators and filters build more than %d bytes in all", MaxBuilt)
	}
	return last, nil
}

func describe(op string) string {
	switch op {
	case "*", "+", "~":
		return "the operator " + op
	}
	if strings.HasPrefix(op, ".") {
		return op[1:] + "()"
	}
	return "the filter " + op
}

// size is the length of v as the engine prints it, at most (an upper bound for None); a value nested deeper
// than MaxValueDepth counts as 2^40 bytes, so that a guard refuses it instead of recursing.
func size(v jinja.Value) int { return sizeAt(v, 0) }

func sizeAt(v jinja.Value, depth int) int {
	switch {
	case v.IsString():
		return len(v.AsString())
	case depth > MaxValueDepth && (v.IsList() || v.IsDict()):
		return 1 << 40
	case v.IsList():
		n := 2
		for _, it := range v.AsList().Items {
			n += sizeAt(it, depth+1) + 4
		}
		return n
	case v.IsDict():
		d := v.AsDict()
		n := 2
		for _, k := range d.Keys {
			n += len(k) + 6 + sizeAt(d.Data[k], depth+1)
		}
		return n
	}
	return len(v.String())
}

// countFields is len(strings.Fields(s)) without making the list.
func countFields(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// jsonBound is the most bytes tojson writes for v with indent (< 0: none) at nesting depth: json.dumps'
// escapes make a string at most 6 times longer, and each item of a list or dict gets its own line, indented
// by depth+1 steps.
func jsonBound(v jinja.Value, indent int64, depth int) int64 {
	line := int64(2)
	if indent > 0 {
		line += indent * int64(depth+1)
	}
	switch {
	case v.IsString():
		return 6*int64(len(v.AsString())) + 2
	case depth > MaxValueDepth && (v.IsList() || v.IsDict()):
		return 1 << 40
	case v.IsList():
		n := int64(2)
		for _, it := range v.AsList().Items {
			n += line + jsonBound(it, indent, depth+1)
		}
		return n
	case v.IsDict():
		d := v.AsDict()
		n := int64(2)
		for _, k := range d.Keys {
			n += line + 6*int64(len(k)) + 4 + jsonBound(d.Data[k], indent, depth+1)
		}
		return n
	}
	return int64(len(v.String())) + 2
}

func str(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	if v.IsUndefined() || v.IsNone() {
		return ""
	}
	return v.String()
}

func toInt(v jinja.Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	}
	return 0
}

// MaxNesting is the deepest nesting of brackets ((, [, {) and of blocks ({% if %}, {% for %}, ...) a
// template's source may have: the engine parses by recursive descent, so deep brackets would overflow Go's
// stack, and its time grows with the square of the block depth (200,000 nested ifs: over a minute).
const MaxNesting = 200

// blockTag matches the keyword of a {% ... %} tag.
var blockTag = regexp.MustCompile(`\{%-?\s*(\w+)([^%]*)`)

// nesting returns the deepest nesting of brackets or of blocks in src.
func nesting(src string) int {
	d, most := 0, 0
	for _, m := range blockTag.FindAllStringSubmatch(src, -1) {
		switch kw := m[1]; {
		case kw == "if" || kw == "for" || kw == "macro" || kw == "call" || kw == "filter" || kw == "raw" ||
			kw == "set" && !strings.Contains(m[2], "="):
			if d++; d > most {
				most = d
			}
		case strings.HasPrefix(kw, "end"):
			d = max(d-1, 0)
		}
	}
	return max(most, brackets(src))
}

// brackets returns the deepest bracket nesting of src.
func brackets(src string) int {
	d, most := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '[', '{':
			if d++; d > most {
				most = d
			}
		case ')', ']', '}':
			d = max(d-1, 0)
		}
	}
	return most
}
