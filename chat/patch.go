package chat

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ardanlabs/jinja"
)

// The engine (github.com/ardanlabs/jinja v1.8.0) has no sandbox: range() materialises its whole list, macros
// recurse until Go's stack limit (a fatal error, not a panic), "x" * n allocates n bytes at once, and nothing
// bounds the rendered text. It offers no hooks either, so instrument rewrites the compiled syntax tree once,
// at Compile, to call the guard functions of limits.go at every point where a template can spend memory or
// time without bound:
//
//   - text and {{ }} output pass through guardOut, which counts the bytes written;
//   - every for-loop body starts with guardTick, which counts iterations, and its iterable passes through
//     guardIter, which refuses a string of more than MaxRange characters (the engine makes a list of them);
//   - every macro body is bracketed by guardEnter/guardLeave, which track the call depth;
//   - the value of every {% set %} goes through guardValue, which refuses one nested deeper than MaxValueDepth
//     or, for {% set ns.x = v %}, one that contains the namespace ns (a value that contains itself sends the
//     engine's printing and comparison into endless recursion: a fatal stack overflow);
//   - the operands of *, + and ~, of the filters and methods that build or copy strings and lists
//     (guardedFilters, guardedMethods), and of append, insert and update go through guardPush, and the last
//     one through a check that sees them all before the operation runs;
//   - an operand that jinja2 requires to be defined (the object of an attribute, item or slice, a callee,
//     the operands of arithmetic and ordering comparisons, of unary - and +) goes through guardDefined
//     (undefined.go), which fails as jinja2's Undefined does.
//
// The values pass through unchanged, so a template that stays within the limits, and uses no undefined value
// where jinja2 would fail, renders exactly as before.
// The tree's types are unexported, so the rewrite goes through reflect and unsafe; patch_test.go pins the
// shapes it relies on, and a tree it does not recognise makes Compile fail (never a silent, unguarded
// template).

// Names of the guard functions in the template's globals; templates cannot spell a name starting with
// "__tune" by accident.
const (
	guardOut   = "__tune_out"
	guardTick  = "__tune_tick"
	guardIter  = "__tune_iter"
	guardEnter = "__tune_enter"
	guardLeave = "__tune_leave"
	guardPush  = "__tune_push"
	guardCheck = "__tune_check"
	guardValue = "__tune_value"
)

// guardedFilters are the filters whose result is checked before they run: those that can build much more
// than their input (indent, replace, join, center, list, format, tojson) and those that copy it (upper,
// sort, ...), whose copies count towards MaxBuilt.
var guardedFilters = map[string]bool{"indent": true, "replace": true, "join": true, "center": true, "list": true,
	"format": true, "tojson": true, "upper": true, "lower": true, "title": true, "capitalize": true, "trim": true,
	"reverse": true, "string": true, "escape": true, "e": true, "unique": true, "sort": true, "map": true,
	"select": true, "reject": true, "selectattr": true, "rejectattr": true, "dictsort": true, "items": true,
	"batch": true}

// guardedMethods are the string, list and dict methods checked before they run: those that build strings or
// lists as guardedFilters do, and those that put a value into a list or dict (append, insert, update), which
// must not make it contain itself.
var guardedMethods = map[string]bool{"replace": true, "format": true, "center": true, "upper": true, "lower": true,
	"title": true, "capitalize": true, "strip": true, "lstrip": true, "rstrip": true, "split": true,
	"append": true, "insert": true, "update": true}

// patcher builds tree nodes of the engine's unexported types from prototypes taken out of a compiled
// template.
type patcher struct {
	outputNode, callExpr, nameExpr, litExpr reflect.Type
	err                                     error
	// lines holds the template line of each node (templateLines; nil when unknown), line the one of the node
	// being rewritten.
	lines map[uintptr]int
	line  int
}

// settable returns v (a field reached through unexported fields) as a settable value.
func settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

func field(ptr reflect.Value, name string) reflect.Value {
	f := ptr.Elem().FieldByName(name)
	if !f.IsValid() {
		panic(fmt.Sprintf("chat: the template engine has no field %s.%s", ptr.Elem().Type().Name(), name))
	}
	return settable(f)
}

func newPatcher() (p *patcher, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%v", r)
		}
	}()
	proto, err := jinja.Compile(`{{ f(x, 1) }}`)
	if err != nil {
		return nil, err
	}
	nodes := field(reflect.ValueOf(proto), "nodes")
	out := nodes.Index(0).Elem()
	call := field(out, "expression").Elem()
	args := field(call, "args")
	p = &patcher{outputNode: out.Type().Elem(), callExpr: call.Type().Elem(), nameExpr: field(call, "fn").Elem().Type().Elem(),
		litExpr: args.Index(1).Elem().Type().Elem()}
	return p, nil
}

// call makes the expression fn(args...).
func (p *patcher) call(fn string, args ...reflect.Value) reflect.Value {
	name := reflect.New(p.nameExpr)
	field(name, "name").SetString(fn)
	c := reflect.New(p.callExpr)
	fv := field(c, "fn")
	fv.Set(name.Convert(fv.Type()))
	av := field(c, "args")
	list := reflect.MakeSlice(av.Type(), len(args), len(args))
	for i, a := range args {
		list.Index(i).Set(a.Convert(av.Type().Elem()))
	}
	av.Set(list)
	return c
}

// name makes the expression that reads the variable n.
func (p *patcher) name(n string) reflect.Value {
	e := reflect.New(p.nameExpr)
	field(e, "name").SetString(n)
	return e
}

func (p *patcher) lit(v jinja.Value) reflect.Value {
	l := reflect.New(p.litExpr)
	field(l, "val").Set(reflect.ValueOf(v))
	return l
}

// output makes the node {{ e }}.
func (p *patcher) output(e reflect.Value) reflect.Value {
	o := reflect.New(p.outputNode)
	ev := field(o, "expression")
	ev.Set(e.Convert(ev.Type()))
	return o
}

// instrument rewrites t's tree, compiled from src, in place (see the comment at the top of this file, and
// undefined.go); lined reports whether the errors it raises know their template line (templateLines).
func instrument(t *jinja.Template, src string) (lined bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	p, err := newPatcher()
	if err != nil {
		return false, err
	}
	p.lines = templateLines(t, src)
	p.visitNodes(field(reflect.ValueOf(t), "nodes"))
	return p.lines != nil, p.err
}

// visitNodes rewrites a []node in place.
func (p *patcher) visitNodes(nodes reflect.Value) {
	for i := 0; i < nodes.Len(); i++ {
		slot := nodes.Index(i)
		if r := p.visit(slot.Elem()); r.IsValid() {
			slot.Set(r.Convert(slot.Type()))
		}
	}
}

// prepend puts the node {{ fn() }} in front of a []node (and, with appendToo, at its end too: closing).
func (p *patcher) bracket(nodes reflect.Value, first, last string) {
	n := nodes.Len()
	extra := 1
	if last != "" {
		extra = 2
	}
	list := reflect.MakeSlice(nodes.Type(), n+extra, n+extra)
	list.Index(0).Set(p.output(p.call(first)).Convert(nodes.Type().Elem()))
	reflect.Copy(list.Slice(1, n+1), nodes)
	if last != "" {
		list.Index(n + 1).Set(p.output(p.call(last)).Convert(nodes.Type().Elem()))
	}
	nodes.Set(list)
}

// visitExpr rewrites the expression held in slot (an interface-typed field or slice element) in place.
func (p *patcher) visitExpr(slot reflect.Value) {
	if slot.IsNil() {
		return
	}
	if r := p.visit(slot.Elem()); r.IsValid() {
		slot.Set(r.Convert(slot.Type()))
	}
}

// guardOperands routes a sequence of operand slots, evaluated in this order, through guardPush, and the
// last through guardCheck(op, npos, kwnames, last).
func (p *patcher) guardOperands(op string, slots []reflect.Value, npos int, kwnames []string) {
	if len(slots) == 0 {
		return
	}
	for _, s := range slots[:len(slots)-1] {
		s.Set(p.call(guardPush, s.Elem()).Convert(s.Type()))
	}
	var names jinja.Value = jinja.None() // a literal: the engine hands out the same value at every call
	if len(kwnames) > 0 {
		items := make([]jinja.Value, len(kwnames))
		for i, k := range kwnames {
			items[i] = jinja.NewString(k)
		}
		names = jinja.NewList(items)
	}
	s := slots[len(slots)-1]
	s.Set(p.call(guardCheck, p.lit(jinja.NewString(op)), p.lit(jinja.NewInt(int64(npos))), p.lit(names), s.Elem()).Convert(s.Type()))
}

// visit walks the node or expression ptr (a pointer to one of the engine's structs) and returns its
// replacement, or an invalid Value to keep it.
func (p *patcher) visit(ptr reflect.Value) reflect.Value {
	if ptr.Kind() != reflect.Pointer || ptr.IsNil() {
		return reflect.Value{}
	}
	typ := ptr.Elem().Type().Name()
	if l, ok := p.lineOf(ptr); ok { // a node's tag, or an elif condition: its expressions are on that line
		saved := p.line
		p.line = l
		defer func() { p.line = saved }()
	}
	// Children first, generically: every field that holds nodes or expressions.
	st := ptr.Elem()
	for i := 0; i < st.NumField(); i++ {
		p.visitField(settable(st.Field(i)))
	}
	switch typ {
	case "textNode":
		return p.output(p.call(guardOut, p.lit(jinja.NewString(field(ptr, "text").String()))))
	case "outputNode":
		e := field(ptr, "expression")
		e.Set(p.call(guardOut, e.Elem()).Convert(e.Type()))
	case "forNode":
		p.bracket(field(ptr, "body"), guardTick, "")
		it := field(ptr, "iter")
		it.Set(p.call(guardIter, it.Elem()).Convert(it.Type()))
	case "macroNode":
		p.bracket(field(ptr, "body"), guardEnter, guardLeave)
	case "setNode":
		// {% set x = v %} and {% set ns.x = v %}: v must not nest too deep, nor contain the namespace ns.
		target := p.lit(jinja.None())
		if ns := field(ptr, "namespace").String(); ns != "" {
			target = p.name(ns)
		}
		v := field(ptr, "value")
		v.Set(p.call(guardValue, target, v.Elem()).Convert(v.Type()))
	case "attrExpr", "itemExpr", "sliceExpr":
		p.defined(field(ptr, "obj"))
	case "unaryExpr":
		if op := field(ptr, "op").String(); op == "-" || op == "+" {
			p.defined(field(ptr, "operand"))
		}
	case "binExpr":
		if undefinedOps[field(ptr, "op").String()] {
			p.defined(field(ptr, "left"))
			p.defined(field(ptr, "right"))
		}
		switch op := field(ptr, "op").String(); op {
		case "*", "+", "~":
			p.guardOperands(op, []reflect.Value{field(ptr, "left"), field(ptr, "right")}, 1, nil)
		}
	case "filterExpr":
		switch name := field(ptr, "name").String(); name {
		case "int", "float":
			p.defined(field(ptr, "expr"))
		case "list", "tojson":
			in := field(ptr, "expr")
			in.Set(p.call(guardFilterInput, in.Elem(), p.lit(jinja.NewString(name)), p.lit(jinja.NewInt(int64(p.line)))).Convert(in.Type()))
		}
		if name := field(ptr, "name").String(); guardedFilters[name] {
			p.guardCall(name, field(ptr, "expr"), field(ptr, "args"), field(ptr, "kwargs"))
		}
	case "callExpr":
		fn := field(ptr, "fn")
		if fn.Elem().Elem().Type().Name() == "attrExpr" {
			if m := field(fn.Elem(), "attr").String(); guardedMethods[m] {
				p.guardCall("."+m, field(fn.Elem(), "obj"), field(ptr, "args"), field(ptr, "kwargs"))
			}
		}
		p.defined(fn)
	}
	return reflect.Value{}
}

// guardCall guards a filter or method call: the subject, then the positional arguments, then the keyword
// arguments, in the order the engine evaluates them.
func (p *patcher) guardCall(name string, subject, args, kwargs reflect.Value) {
	slots := []reflect.Value{subject}
	for i := 0; i < args.Len(); i++ {
		slots = append(slots, args.Index(i))
	}
	var names []string
	for i := 0; i < kwargs.Len(); i++ {
		kw := kwargs.Index(i)
		names = append(names, settable(kw.FieldByName("name")).String())
		slots = append(slots, settable(kw.FieldByName("value")))
	}
	p.guardOperands(name, slots, args.Len(), names)
}

// visitField descends into a struct field: a node or expression, a slice of them, or a struct holding them
// (branches, parameters, keyword arguments, dict pairs).
func (p *patcher) visitField(f reflect.Value) {
	switch f.Kind() {
	case reflect.Interface:
		if f.IsNil() {
			return
		}
		if _, ok := f.Elem().Interface().(jinja.Value); ok {
			return
		}
		p.visitExpr(f)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.String {
			return
		}
		if f.Type().Elem().Kind() == reflect.Interface {
			for i := 0; i < f.Len(); i++ {
				p.visitExpr(f.Index(i))
			}
			return
		}
		for i := 0; i < f.Len(); i++ {
			p.visitField(f.Index(i))
		}
	case reflect.Struct:
		if f.Type() == reflect.TypeOf(jinja.Value{}) {
			return
		}
		for i := 0; i < f.NumField(); i++ {
			p.visitField(settable(f.Field(i)))
		}
	}
}
