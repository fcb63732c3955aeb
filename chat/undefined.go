package chat

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// transformers renders chat templates in a jinja2 ImmutableSandboxedEnvironment with the default Undefined
// (transformers/utils/chat_template_utils.py, _compile_jinja_template). A name that is not set, a dict key that
// is missing or a list index out of range gives an Undefined value (jinja2/runtime.py, class Undefined), which
// prints as "", is false, has length 0 and iterates as an empty sequence, and equals only another Undefined;
// but reading an attribute or item of it, calling it, negating it, or using it in arithmetic (+ - * / // % **)
// or an ordering comparison (< <= > >=) raises jinja2.exceptions.UndefinedError with its message:
// "'foo' is undefined" for a name, "'dict object' has no attribute 'x'" for a missing key,
// "list object has no element 3" for an index out of range.
//
// The engine (github.com/ardanlabs/jinja) is lenient with all of these (undefined + 1 is 1, undefined.x is
// undefined), so instrument routes each such operand through guardDefined (checkDefined), which returns the
// value when it is defined and fails as jinja2 does otherwise, with the template line of the tag the operand is
// in (tagLines). The filters int and float need a defined input too, list of an undefined input is [] and
// tojson of it fails (checkFilterInput). ~ (string concatenation), ==, !=, in, and, or, not, the other filters
// and the tests are left as the engine evaluates them.

// guardDefined is the global that checks an operand (see instrument), guardFilterInput the one that gives
// the list and tojson filters what jinja2 gives them for an undefined input (checkFilterInput).
const (
	guardDefined     = "__tune_defined"
	guardFilterInput = "__tune_filter_input"
)

// undefinedOps are the binary operators whose operands must be defined.
var undefinedOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "//": true, "%": true, "**": true,
	"<": true, "<=": true, ">": true, ">=": true}

// checkDefined is guardDefined: args are the operand's value, the line of its tag, how the operand reads
// ("name", "attr", "item" or "expr"), its name (the variable, the attribute, or the expression's text), and, for
// "attr" and "item", the object it was read from and the key (none when not known: an object whose expression
// has side effects is not evaluated twice).
func (g *guard) checkDefined(a []jinja.Value) (jinja.Value, error) {
	if len(a) != 6 || !a[0].IsUndefined() {
		return a[0], nil
	}
	line, how, name, obj, key := int(a[1].AsInt()), a[2].AsString(), a[3].AsString(), a[4], a[5]
	var msg string
	switch {
	case how == "attr" && !obj.IsUndefined():
		msg = fmt.Sprintf("%s has no attribute %s", pyRepr(typeRepr(obj)), pyRepr(name))
	case how == "item" && !obj.IsUndefined() && key.IsString():
		msg = fmt.Sprintf("%s has no attribute %s", pyRepr(typeRepr(obj)), pyRepr(key.AsString()))
	case how == "item" && !obj.IsUndefined():
		msg = fmt.Sprintf("%s has no element %s", typeRepr(obj), valueRepr(key))
	default:
		msg = fmt.Sprintf("%s is undefined", pyRepr(name))
	}
	return jinja.Undefined(), &Error{Source: g.source, Line: line, Msg: msg, Undefined: true}
}

// checkFilterInput is guardFilterInput: args are a filter's input, the filter's name and the line. An undefined
// input of list is the empty list, as list() of an Undefined is (the engine gave [Undefined]), and one of
// tojson is the TypeError of json.dumps, which transformers' tojson filter calls (chat_template_utils.py);
// int and float fail as an undefined operand does (jinja2's do_int calls int() of it, which raises
// UndefinedError), through guardDefined.
func (g *guard) checkFilterInput(a []jinja.Value) (jinja.Value, error) {
	if len(a) != 3 || !a[0].IsUndefined() {
		return a[0], nil
	}
	if a[1].AsString() == "list" {
		return jinja.NewList(nil), nil
	}
	return jinja.Undefined(), &Error{Source: g.source, Line: int(a[2].AsInt()), Msg: "Object of type Undefined is not JSON serializable"}
}

// typeRepr is jinja2.utils.object_type_repr of a template value: "None", or "<type> object" with the Python
// type transformers' values have.
func typeRepr(v jinja.Value) string {
	switch {
	case v.IsNone():
		return "None"
	case v.IsBool():
		return "bool object"
	case v.IsInt():
		return "int object"
	case v.IsFloat():
		return "float object"
	case v.IsString():
		return "str object"
	case v.IsList():
		return "list object"
	case v.IsDict():
		return "dict object"
	case v.IsCallable():
		return "function object"
	}
	return "jinja2.runtime.Undefined object"
}

// valueRepr is Python's repr of a key.
func valueRepr(v jinja.Value) string {
	switch {
	case v.IsString():
		return pyRepr(v.AsString())
	case v.IsNone():
		return "None"
	case v.IsBool():
		if v.AsBool() {
			return "True"
		}
		return "False"
	case v.IsUndefined():
		return "Undefined"
	}
	return v.String()
}

// pyRepr is Python's repr of a str: single quotes, or double quotes when s holds a single quote and no double
// quote; backslashes, the quote and control characters escaped.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r > 0x7f:
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// tag is a {{ }} or {% %} tag of a template: its statement keyword ("" for an expression) and line.
type tag struct {
	keyword string
	line    int
}

// tagLines returns the expression and statement tags of src in order, as the engine scans them (the
// delimiters, quoted strings inside tags, comments), without comments and without the tags inside
// {% raw %} blocks, which are text.
func tagLines(src string) []tag {
	var tags []tag
	line, raw := 1, false
	for i := 0; i < len(src); {
		if src[i] != '{' || i+1 >= len(src) || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			if src[i] == '\n' {
				line++
			}
			i++
			continue
		}
		kind, start := src[i+1], line
		closer := "}}"
		switch kind {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		i += 2
		from := i
		for i < len(src) && !strings.HasPrefix(src[i:], closer) {
			if c := src[i]; kind != '#' && (c == '\'' || c == '"') {
				for i++; i < len(src) && src[i] != c; i++ {
					if src[i] == '\\' && i+1 < len(src) {
						if src[i+1] == '\n' {
							line++
						}
						i++
					}
					if src[i] == '\n' {
						line++
					}
				}
				if i < len(src) {
					i++
				}
				continue
			}
			if src[i] == '\n' {
				line++
			}
			i++
		}
		body := src[from:min(i, len(src))]
		i += len(closer)
		if kind == '#' {
			continue
		}
		kw := ""
		if kind == '%' {
			f := strings.Fields(strings.Trim(strings.TrimSpace(strings.TrimPrefix(body, "-")), "-"))
			kw = "?"
			if len(f) > 0 {
				kw = f[0]
			}
		}
		switch {
		case raw && kw == "endraw":
			raw = false
		case raw:
		case kw == "raw":
			raw = true
		default:
			tags = append(tags, tag{kw, start})
		}
	}
	return tags
}

// lineMap assigns the tree's nodes and the conditions of elif branches the lines of their tags: the tree is
// walked in source order beside the tags of tagLines, each node taking the next tag of its kind (end tags,
// else and generation are skipped). A tree that does not line up with the tags (a construct the walk does not
// know) gives no lines at all: errors then name the template alone, never a wrong line.
type lineMap struct {
	tags  []tag
	next  int
	lines map[uintptr]int
	bad   bool
}

// skipped are the statements that make no node of their own.
var skipped = map[string]bool{"else": true, "endif": true, "endfor": true, "endset": true, "endmacro": true,
	"endcall": true, "endfilter": true, "generation": true, "endgeneration": true}

// take consumes the next tag, which must have keyword kw, and records its line for ptr.
func (m *lineMap) take(ptr reflect.Value, kw string) {
	for m.next < len(m.tags) && skipped[m.tags[m.next].keyword] {
		m.next++
	}
	if m.next >= len(m.tags) || m.tags[m.next].keyword != kw {
		m.bad = true
		return
	}
	m.lines[ptr.Pointer()] = m.tags[m.next].line
	m.next++
}

// walkNodes walks a []node.
func (m *lineMap) walkNodes(nodes reflect.Value) {
	for i := 0; i < nodes.Len() && !m.bad; i++ {
		m.walk(nodes.Index(i).Elem())
	}
}

// walk assigns lines to the node ptr and the nodes in its bodies.
func (m *lineMap) walk(ptr reflect.Value) {
	switch ptr.Elem().Type().Name() {
	case "textNode":
	case "outputNode":
		m.take(ptr, "")
	case "ifNode":
		m.take(ptr, "if")
		branches := field(ptr, "branches")
		for i := 0; i < branches.Len() && !m.bad; i++ {
			b := branches.Index(i)
			cond := settable(b.FieldByName("condition"))
			if i > 0 && !cond.IsNil() {
				m.take(cond.Elem(), "elif")
			} else if !cond.IsNil() {
				m.lines[cond.Elem().Pointer()] = m.lines[ptr.Pointer()]
			}
			m.walkNodes(settable(b.FieldByName("body")))
		}
	case "forNode":
		m.take(ptr, "for")
		m.walkNodes(field(ptr, "body"))
		m.walkNodes(field(ptr, "elseBody"))
	case "setNode":
		m.take(ptr, "set")
	case "setBlockNode":
		m.take(ptr, "set")
		m.walkNodes(field(ptr, "body"))
	case "macroNode":
		m.take(ptr, "macro")
		m.walkNodes(field(ptr, "body"))
	case "callNode":
		m.take(ptr, "call")
		m.walkNodes(field(ptr, "body"))
	case "filterBlockNode":
		m.take(ptr, "filter")
		m.walkNodes(field(ptr, "body"))
	case "breakNode":
		m.take(ptr, "break")
	case "continueNode":
		m.take(ptr, "continue")
	default:
		m.bad = true
	}
}

// templateLines returns the line of each node of t's tree (and of each elif condition), keyed by pointer, or
// nil when the tree and the tags of src do not line up.
func templateLines(t *jinja.Template, src string) map[uintptr]int {
	m := &lineMap{tags: tagLines(src), lines: map[uintptr]int{}}
	m.walkNodes(field(reflect.ValueOf(t), "nodes"))
	for m.next < len(m.tags) && skipped[m.tags[m.next].keyword] {
		m.next++
	}
	if m.bad || m.next != len(m.tags) {
		return nil
	}
	return m.lines
}

// exprText writes an expression as a template would spell it, for messages ("'x.y' is undefined").
func exprText(ptr reflect.Value) string {
	if ptr.Kind() == reflect.Interface {
		ptr = ptr.Elem()
	}
	if !ptr.IsValid() || ptr.Kind() != reflect.Pointer || ptr.IsNil() {
		return "?"
	}
	switch ptr.Elem().Type().Name() {
	case "nameExpr":
		return field(ptr, "name").String()
	case "attrExpr":
		return exprText(field(ptr, "obj")) + "." + field(ptr, "attr").String()
	case "itemExpr":
		return exprText(field(ptr, "obj")) + "[" + exprText(field(ptr, "key")) + "]"
	case "litExpr":
		v := field(ptr, "val").Interface().(jinja.Value)
		if v.IsString() {
			return pyRepr(v.AsString())
		}
		return valueRepr(v)
	case "callExpr":
		fn := field(ptr, "fn").Elem()
		if fn.Elem().Type().Name() == "nameExpr" && field(fn, "name").String() == guardDefined {
			return exprText(field(ptr, "args").Index(0))
		}
		return exprText(fn) + "(...)"
	}
	return strings.TrimSuffix(ptr.Elem().Type().Name(), "Expr")
}

// pure returns a copy of the expression ptr without tune's guardDefined calls when evaluating it has no effect
// beyond reading values (names, literals, attributes and items of those, and arithmetic on them), so that
// guardDefined may read it again for its message; an invalid Value otherwise.
func (p *patcher) pure(ptr reflect.Value) reflect.Value {
	if ptr.Kind() == reflect.Interface {
		ptr = ptr.Elem()
	}
	if !ptr.IsValid() || ptr.Kind() != reflect.Pointer || ptr.IsNil() {
		return reflect.Value{}
	}
	cp := func(names ...string) reflect.Value {
		c := reflect.New(ptr.Elem().Type())
		c.Elem().Set(ptr.Elem())
		for _, n := range names {
			sub := p.pure(field(ptr, n))
			if !sub.IsValid() {
				return reflect.Value{}
			}
			f := field(c, n)
			f.Set(sub.Convert(f.Type()))
		}
		return c
	}
	switch ptr.Elem().Type().Name() {
	case "nameExpr", "litExpr":
		return ptr
	case "attrExpr":
		return cp("obj")
	case "itemExpr":
		return cp("obj", "key")
	case "unaryExpr":
		return cp("operand")
	case "binExpr":
		return cp("left", "right")
	case "callExpr":
		fn := field(ptr, "fn").Elem()
		if fn.Elem().Type().Name() == "nameExpr" && field(fn, "name").String() == guardDefined {
			return p.pure(field(ptr, "args").Index(0))
		}
	}
	return reflect.Value{}
}

// defined routes the operand in slot through guardDefined (see the top of this file).
func (p *patcher) defined(slot reflect.Value) {
	if slot.IsNil() {
		return
	}
	e := slot.Elem()
	how, name := "expr", exprText(e)
	obj, key := p.lit(jinja.Undefined()), p.lit(jinja.Undefined())
	switch e.Elem().Type().Name() {
	case "litExpr":
		return // a literal is never undefined
	case "nameExpr":
		how = "name"
	case "attrExpr":
		how, name = "attr", field(e, "attr").String()
		if o := p.pure(field(e, "obj")); o.IsValid() {
			obj = o
		}
	case "itemExpr":
		how = "item"
		o, k := p.pure(field(e, "obj")), p.pure(field(e, "key"))
		if o.IsValid() && k.IsValid() {
			obj, key = o, k
		}
	}
	slot.Set(p.call(guardDefined, e, p.lit(jinja.NewInt(int64(p.line))), p.lit(jinja.NewString(how)),
		p.lit(jinja.NewString(name)), obj, key).Convert(slot.Type()))
}

// lineOf returns the line of the template's tag for a node or an elif condition, when known.
func (p *patcher) lineOf(ptr reflect.Value) (int, bool) {
	if p.lines == nil {
		return 0, false
	}
	l, ok := p.lines[ptr.Pointer()]
	return l, ok
}
