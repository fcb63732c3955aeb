package chat

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// The engine's tojson filter writes indented output (tojson(indent=N), which Llama 3.1's template uses for
// tool schemas) through Go maps, so keys come out sorted, while transformers' tojson is Python's
// json.dumps(x, ensure_ascii=False, indent=N), which keeps insertion order. Filters cannot be replaced, so
// Compile rewrites `PATH | tojson(indent=N)`, where PATH is a variable, attribute or index path, into a call
// of indentedJSONFunc, which writes what json.dumps does.
var indentedTojson = regexp.MustCompile(`([A-Za-z_][\w.]*(?:\[[^\[\]]*\])*)\s*\|\s*tojson\(\s*indent\s*=\s*(\d+)\s*\)`)

const indentedJSONFunc = "__tune_tojson_indent"

func rewriteIndentedTojson(src string) string {
	return indentedTojson.ReplaceAllString(src, indentedJSONFunc+"($1, $2)")
}

func indentedJSON(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 || !args[1].IsInt() {
		return jinja.Undefined(), fmt.Errorf("tojson(indent=N) needs a value and an integer indent")
	}
	var b strings.Builder
	if err := writeIndented(&b, args[0], strings.Repeat(" ", int(args[1].AsInt())), ""); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

// writeIndented is json.dumps with indent: items on their own lines, ",\n" between them, ": " after keys,
// [] and {} for empty containers, non-ASCII written as is.
func writeIndented(b *strings.Builder, v jinja.Value, step, cur string) error {
	next := cur + step
	switch {
	case v.IsNone() || v.IsUndefined():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		writeJSONString(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[\n")
		for i, it := range items {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(next)
			if err := writeIndented(b, it, step, next); err != nil {
				return err
			}
		}
		b.WriteString("\n" + cur + "]")
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(next)
			writeJSONString(b, k)
			b.WriteString(": ")
			val, _ := d.Get(k)
			if err := writeIndented(b, val, step, next); err != nil {
				return err
			}
		}
		b.WriteString("\n" + cur + "}")
	default:
		return fmt.Errorf("tojson: cannot write %s", v.String())
	}
	return nil
}

// writeJSONString quotes s as json.dumps(ensure_ascii=False) does: only ", \ and control characters escape.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloat writes a float as Python's repr does (shortest round-trip digits, "1.0" for whole numbers).
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // n: NaN, Inf
		s += ".0"
	}
	return s
}
