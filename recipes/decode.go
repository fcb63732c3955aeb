package recipes

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tune-ml/tune/internal/typo"
)

// ErrInvalid is wrapped by every *Problem: the recipe does not decode or does not validate.
var ErrInvalid = errors.New("invalid recipe")

// Problem is one thing wrong with a recipe, located where the user wrote it: Pos is "file:line" (or "file" for
// a key left at its default, or "override key=value"), Key the dotted key ("training.learning_rate").
type Problem struct {
	Pos string // "file:line", "file", or "override key=value"; "" when unknown
	Key string // the dotted key: "training.learning_rate"; "" for the recipe as a whole
	Msg string // the complete message, key included: "training.learning_rate: must be > 0 (got 0)"
}

// Error formats as "recipes/x.yaml:12: unknown key 'learnig_rate' in training; did you mean 'learning_rate'?"
// or "recipes/x.yaml:14: training.learning_rate: must be > 0 (got 0)".
func (p *Problem) Error() string {
	if p.Pos == "" {
		return p.Msg
	}
	return p.Pos + ": " + p.Msg
}

// Unwrap returns ErrInvalid.
func (p *Problem) Unwrap() error { return ErrInvalid }

// decoder decodes a recipe's YAML node tree into a Recipe field by field, so that every error names the key and
// the line (or the override) it came from, and unknown keys are caught with a suggestion.
type decoder struct {
	source   string                // the recipe file, for messages
	override map[*yaml.Node]string // key nodes that came from a key=value override → "override key=value"
	pos      map[string]string     // dotted key → where it was set
	fromArgs map[string]bool       // dotted keys set by an override (their paths resolve against the working directory)
	problems []error
}

func newDecoder(source string) *decoder {
	return &decoder{source: source, override: map[*yaml.Node]string{}, pos: map[string]string{}, fromArgs: map[string]bool{}}
}

func (d *decoder) add(pos, key, format string, a ...any) {
	d.problems = append(d.problems, &Problem{Pos: pos, Key: key, Msg: fmt.Sprintf(format, a...)})
}

// where names a key node's origin: the override that created it, or file:line.
func (d *decoder) where(key *yaml.Node) string {
	if o, ok := d.override[key]; ok {
		return o
	}
	if key.Line > 0 {
		return fmt.Sprintf("%s:%d", d.source, key.Line)
	}
	return d.source
}

// position returns where key (dotted) or the nearest section above it was set, else the file.
func (d *decoder) position(key string) string {
	for k := key; k != ""; {
		if p, ok := d.pos[k]; ok {
			return p
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return d.source
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decode fills v (addressable) from n; path is v's dotted key ("" for the root).
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && !t.Implements(unmarshalerType) {
		if v.IsNil() {
			if def, ok := sectionDefaults[t.Elem()]; ok {
				v.Set(def())
			} else {
				v.Set(reflect.New(t.Elem()))
			}
		}
		v, t = v.Elem(), t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		d.decodeLeaf(n, v, path)
		return
	}
	switch {
	case n.ShortTag() == "!!null":
		return // an empty section keeps its defaults
	case n.Kind != yaml.MappingNode:
		hint := ""
		if _, ok := t.FieldByName("Path"); ok {
			hint = fmt.Sprintf("; did you mean '%s.path'?", path)
		}
		d.add(d.position(path), path, "%s is a section of keys, not a value (got %q)%s", path, nodeText(n), hint)
		return
	}
	fields := yamlFields(t)
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		full := joinKey(path, key)
		if prev, dup := seen[key]; dup {
			d.add(d.where(k), full, "key '%s' is set twice (first at %s)", full, d.where(prev))
			continue
		}
		seen[key] = k
		idx, ok := fields[key]
		if !ok {
			d.add(d.where(k), full, "%s", unknownKeyMessage(key, path, fields))
			continue
		}
		d.pos[full] = d.where(k)
		if _, ok := d.override[k]; ok {
			d.fromArgs[full] = true
		}
		d.decode(val, v.Field(idx), full)
	}
}

// decodeLeaf decodes one value with yaml.v3 and turns its error into a Problem at the value's line.
func (d *decoder) decodeLeaf(n *yaml.Node, v reflect.Value, path string) {
	if k := v.Kind(); n.Kind == yaml.MappingNode && k != reflect.Map && k != reflect.Struct && k != reflect.Interface {
		d.add(d.position(path), path, "%s takes a value, not a section of keys", path)
		return
	}
	pos := d.position(path)
	if _, over := d.fromArgs[path]; !over && n.Line > 0 {
		pos = fmt.Sprintf("%s:%d", d.source, n.Line)
	}
	// yaml.v3 truncates a float into an integer field (32.5 → 32), clamps some numbers beyond its range
	// (-1e20 → math.MinInt64) and reports others as "cannot unmarshal !!float"; a recipe must say what it means.
	if f, why := intProblem(n, v.Type()); f != nil {
		if _, over := d.fromArgs[path]; !over && f.Line > 0 {
			pos = fmt.Sprintf("%s:%d", d.source, f.Line)
		}
		d.add(pos, path, "%s: %s %s", path, f.Value, why)
		return
	}
	err := n.Decode(v.Addr().Interface())
	if err == nil {
		return
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n  ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = lineRe.ReplaceAllString(msg, "")
	msg = unmarshalRe.ReplaceAllStringFunc(msg, plainTypeError)
	if n.ShortTag() == "!!str" && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		if _, perr := strconv.ParseFloat(n.Value, 64); perr == nil {
			msg = fmt.Sprintf("%q is quoted, so it is a string, not a number: write %s without quotes", n.Value, n.Value)
		} else if b := strings.ToLower(n.Value); b == "true" || b == "false" {
			// "true is not true or false" read as a contradiction.
			msg = fmt.Sprintf("%q is quoted, so it is a string, not true or false: write %s without quotes", n.Value, b)
		}
	}
	d.add(pos, path, "%s: %s", path, msg)
}

// unmarshalRe matches yaml.v3's type errors: "cannot unmarshal !!str `abc` into float64"; the value is absent for
// a list or a section ("cannot unmarshal !!seq into int").
var unmarshalRe = regexp.MustCompile("cannot unmarshal !!(\\w+)(?: `([^`]*)`)? into (\\S+)")

// plainTypeError rewrites one yaml.v3 type error in a recipe's words: "abc is not a number (such as 2e-5 or 3)"
// rather than Go's "cannot unmarshal !!str `abc` into float64".
func plainTypeError(m string) string {
	sm := unmarshalRe.FindStringSubmatch(m)
	tag, value, goType := sm[1], sm[2], sm[3]
	var want string
	switch {
	case strings.HasPrefix(goType, "float"):
		want = "a number (such as 2e-5 or 3)"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		want = "a whole number (such as 16)"
	case goType == "bool":
		want = "true or false"
	case goType == "string":
		want = "a single value (quote it if it is text)"
	case strings.HasPrefix(goType, "[]"):
		want = "a list (such as [a, b])"
	case strings.HasPrefix(goType, "map["):
		want = "a section of keys"
	default:
		return m
	}
	got := map[string]string{"seq": "a list", "map": "a section of keys", "null": "null"}[tag]
	if got == "" {
		got = value
	}
	return fmt.Sprintf("%s is not %s", got, want)
}

// intProblem returns the first number scalar in n that would be decoded into an integer of t (directly, through
// pointers, or as an element of a slice, array or map) but that the integer cannot hold exactly, with the
// reason ("is not a whole number; ...", "does not fit an integer (at most ...)"); else nil.
func intProblem(n *yaml.Node, t reflect.Type) (*yaml.Node, string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil, "" // the type decodes itself
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind == yaml.ScalarNode {
			if why := intRange(n, t); why != "" {
				return n, why
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if bad, why := intProblem(c, t.Elem()); bad != nil {
					return bad, why
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				if bad, why := intProblem(n.Content[i], t.Elem()); bad != nil {
					return bad, why
				}
			}
		}
	}
	return nil, ""
}

// intRange says why the number scalar n does not fit the integer type t, or "" when it does or is not a
// number (yaml.v3's own error covers that). An !!int is compared exactly; a !!float must be a whole number
// within t's range.
func intRange(n *yaml.Node, t reflect.Type) string {
	bits := t.Bits()
	signed := t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64
	var lo int64
	var hi uint64 = 1<<bits - 1
	if signed {
		lo, hi = -1<<(bits-1), 1<<(bits-1)-1
	}
	tooBig := fmt.Sprintf("does not fit an integer (at most %d)", hi)
	tooSmall := fmt.Sprintf("does not fit an integer (at least %d)", lo)
	switch n.ShortTag() {
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return ""
		}
		limit := math.Ldexp(1, bits) // hi+1: a power of two, so exact, unlike float64(hi)
		if signed {
			limit = math.Ldexp(1, bits-1)
		}
		switch {
		case f != math.Trunc(f): // NaN too
			return "is not a whole number; this key takes an integer"
		case f < float64(lo):
			return tooSmall
		case f >= limit:
			return tooBig
		}
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			switch {
			case i < lo:
				return tooSmall
			case i > 0 && uint64(i) > hi:
				return tooBig
			}
			return ""
		}
		var u uint64
		if n.Decode(&u) == nil && !signed && u <= hi {
			return ""
		}
		if strings.HasPrefix(strings.TrimSpace(n.Value), "-") {
			return tooSmall
		}
		return tooBig
	}
	return ""
}

var lineRe = regexp.MustCompile(`(?m)^line \d+: `)

// yamlFields maps the yaml names of t's fields to their indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = i
	}
	return m
}

// unknownKeyMessage says that key is not valid in section and suggests the closest valid key, or the section
// where key belongs.
func unknownKeyMessage(key, section string, fields map[string]int) string {
	where := "at the top level"
	if section != "" {
		where = "in " + section
	}
	msg := fmt.Sprintf("unknown key '%s' %s", key, where)
	if key == "<<" {
		return msg + "; YAML merge keys are not supported in recipes"
	}
	if hint, ok := renamedKeys[key]; ok {
		return msg + "; " + hint
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	if best := closest(key, names); best != "" {
		return msg + fmt.Sprintf("; did you mean '%s'?", best)
	}
	if home := sectionOf(key); home != "" && home != section {
		return msg + fmt.Sprintf("; it belongs in %s (write %s.%s)", home, home, key)
	}
	return msg + "; valid keys: " + strings.Join(names, ", ")
}

// renamedKeys explains keys that older transformers or PEFT releases had and recipes copied from them carry.
var renamedKeys = map[string]string{
	"warmup_ratio":        "transformers v5 removed it: write warmup_steps with a value below 1 (warmup_steps: 0.1 is 10% of the steps)",
	"evaluation_strategy": "transformers renamed it: write eval_strategy",
	"save_safetensors":    "transformers v5 removed it: checkpoints are always safetensors",
}

// KeyPath returns the dotted recipe key whose last part is name ("learning_rate" → "training.learning_rate",
// "lora" → "lora"), or "" when no key has that name: for a hint when a key is given in another form (a flag).
func KeyPath(name string) string {
	if _, ok := yamlFields(reflect.TypeFor[Recipe]())[name]; ok {
		return name
	}
	if s := sectionOf(name); s != "" {
		return s + "." + name
	}
	return ""
}

// sectionOf returns the section of Recipe that has key, if exactly one does.
func sectionOf(key string) string {
	found := ""
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
		for name, i := range yamlFields(t) {
			full := joinKey(path, name)
			if name == key && path != "" {
				found = path
			}
			walk(t.Field(i).Type, full)
		}
	}
	walk(reflect.TypeFor[Recipe](), "")
	return found
}

// closest is typo.Closest: the candidate key nearest to key, if close enough to be a typo.
func closest(key string, candidates []string) string { return typo.Closest(key, candidates) }

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// applyOverride sets the dotted key of override "key=value" in the document's root mapping, creating sections
// as needed. The value is parsed as a YAML scalar or flow collection ("2e-5", "true", "[query, value]"); an
// empty value is the empty string.
// removeKey deletes the dotted key from the recipe tree (torchtune's ~key override). The key must be one a
// recipe can hold, so "~lroa" is reported as a typo; a valid key the recipe does not set is nothing to remove.
func (d *decoder) removeKey(root *yaml.Node, key, label string) {
	parts := strings.Split(key, ".")
	t := reflect.TypeOf(Recipe{})
	for i, part := range parts {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			d.add(label, key, "%s: '%s' is a value, not a section", key, strings.Join(parts[:i], "."))
			return
		}
		fields := yamlFields(t)
		idx, ok := fields[part]
		if !ok {
			d.add(label, key, "%s", unknownKeyMessage(part, strings.Join(parts[:i], "."), fields))
			return
		}
		t = t.Field(idx).Type
	}
	cur := root
	for i, part := range parts {
		if part == "" {
			d.add(label, key, "%s: empty key segment", key)
			return
		}
		found := -1
		for j := 0; j+1 < len(cur.Content); j += 2 {
			if cur.Content[j].Value == part {
				found = j
			}
		}
		if found < 0 {
			return
		}
		if i == len(parts)-1 {
			cur.Content = append(cur.Content[:found], cur.Content[found+2:]...)
			d.fromArgs[key] = true
			return
		}
		next := cur.Content[found+1]
		if next.Kind == yaml.AliasNode {
			next = next.Alias
		}
		if next.Kind != yaml.MappingNode {
			d.add(label, key, "%s: '%s' is a value, not a section", key, strings.Join(parts[:i+1], "."))
			return
		}
		cur = next
	}
}

func (d *decoder) applyOverride(root *yaml.Node, override string) {
	key, value, ok := strings.Cut(override, "=")
	label := "override " + override
	if rest, removal := strings.CutPrefix(override, "~"); removal && !ok {
		d.removeKey(root, strings.TrimSpace(rest), label)
		return
	}
	if !ok || strings.TrimSpace(key) == "" {
		d.add(label, "", "an override must be key=value (or ~key to remove a key), e.g. training.learning_rate=2e-5")
		return
	}
	key = strings.TrimSpace(key)
	switch strings.TrimSpace(value) {
	case "null", "Null", "NULL", "~":
		// YAML's null removes the key, so the section or value is as if the recipe did not set it: lora=null
		// turns LoRA off (full fine-tuning), as torchtune's ~lora does, rather than giving an empty lora:
		// section (PEFT's defaults).
		d.removeKey(root, key, label)
		return
	}
	val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ""}
	if value != "" {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
			// yaml.v3's "yaml: line 1: " says nothing about a value of one line.
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "yaml: "), "line 1: ")
			d.add(label, key, "%s: the value %q is not valid YAML (%s); for a string with YAML's special "+
				"characters, quote it inside the shell's quotes: %s='\"...\"'", key, value, msg, key)
			return
		}
		if len(doc.Content) == 1 {
			val = doc.Content[0]
		}
	}
	cur := root
	parts := strings.Split(key, ".")
	for i, part := range parts {
		if part == "" {
			d.add(label, key, "%s: empty key segment", key)
			return
		}
		last := i == len(parts)-1
		var next *yaml.Node
		for j := 0; j+1 < len(cur.Content); j += 2 {
			if cur.Content[j].Value == part {
				next = cur.Content[j+1]
				if last {
					d.override[cur.Content[j]] = label
				}
			}
		}
		if next == nil {
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part}
			d.override[k] = label
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			if last {
				next = val
			}
			cur.Content = append(cur.Content, k, next)
		}
		if last {
			*next = *val
			return
		}
		if next.Kind == yaml.AliasNode {
			*next = *next.Alias
		}
		if next.ShortTag() == "!!null" {
			*next = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		if next.Kind != yaml.MappingNode {
			d.add(label, key, "%s: '%s' is a value, not a section", key, strings.Join(parts[:i+1], "."))
			return
		}
		cur = next
	}
}

// nodeText is n as the recipe wrote it, for messages: a scalar's value, a list or mapping in flow style
// ([1, 2]), whose Value is empty.
func nodeText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	c := *n
	c.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&c)
	if err != nil {
		return n.Value
	}
	return strings.TrimSpace(string(b))
}
