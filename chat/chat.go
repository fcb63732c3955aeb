package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/tokenizers"
)

// Template is a compiled chat template with the special tokens it is rendered with. It is safe for
// concurrent use.
type Template struct {
	source  string
	tmpl    *jinja.Template
	special map[string]string
	lined   bool // the errors of undefined values name their template line (instrument)
	// Now is the clock strftime_now reads; time.Now when nil.
	Now func() time.Time
}

// Options are the per-call arguments of apply_chat_template.
type Options struct {
	// AddGenerationPrompt appends the header of an assistant turn (add_generation_prompt=True).
	AddGenerationPrompt bool
	// Tools is the list of tool (function) schemas; nil renders with tools=None.
	Tools []jinja.Value
	// Kwargs are extra template variables, e.g. "enable_thinking": false.
	Kwargs map[string]jinja.Value
}

// Error is a template's failure while rendering: a raise_exception message or an evaluation error.
type Error struct {
	// Source is the template's file.
	Source string
	// Line is the template line of the tag that failed, when known (0 otherwise).
	Line int
	// Msg is the message, as raise_exception got it, as jinja2 words an UndefinedError, or as the engine wrote
	// it.
	Msg string
	// Undefined marks what jinja2 raises as UndefinedError: an undefined value used other than by printing,
	// testing or iterating it (undefined.go).
	Undefined bool
}

// Error returns "chat template SOURCE: MSG", or "chat template SOURCE:LINE: MSG" when the line is known.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("chat template %s:%d: %s", e.Source, e.Line, e.Msg)
	}
	return fmt.Sprintf("chat template %s: %s", e.Source, e.Msg)
}

// BadInput marks the error as the input's (internal/badinput): the template or the conversation must change
// (exit status 2).
func (e *Error) BadInput() bool { return true }

// Compile compiles a template; source names it in errors (a file path). special holds the special tokens
// the template sees (bos_token, eos_token, ...); empty values are left undefined.
func Compile(src, source string, special map[string]string) (*Template, error) {
	if d := nesting(src); d > MaxNesting {
		return nil, badinput.Errorf("chat template %s nests brackets or blocks %d deep, more than tune's limit of %d", source, d, MaxNesting)
	}
	t, err := jinja.Compile(rewriteIndentedTojson(src))
	if err != nil {
		return nil, badinput.Errorf("chat template %s does not compile: %v", source, err)
	}
	lined, err := instrument(t, rewriteIndentedTojson(src))
	if err != nil {
		return nil, fmt.Errorf("chat template %s: cannot apply tune's rendering limits: %v", source, err)
	}
	sp := map[string]string{}
	for k, v := range special {
		if v != "" {
			sp[k] = v
		}
	}
	return &Template{source: source, tmpl: t, special: sp, lined: lined}, nil
}

// ErrNoTemplate is returned by FromConfig for a tokenizer without a chat template.
var ErrNoTemplate = errors.New("the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)")

// FromConfig compiles the chat template of a tokenizer_config.json, with its special tokens.
func FromConfig(c *tokenizers.Config) (*Template, error) {
	if c.ChatTemplate == "" {
		where := c.Path
		if where == "" {
			where = "no tokenizer_config.json"
		}
		return nil, fmt.Errorf("%s: %w", where, ErrNoTemplate)
	}
	return Compile(c.ChatTemplate, c.ChatTemplateSource, map[string]string{"bos_token": c.BOSToken,
		"eos_token": c.EOSToken, "unk_token": c.UnkToken, "pad_token": c.PadToken})
}

// Source names the template's file.
func (t *Template) Source() string { return t.source }

// Render renders a conversation: messages is a list of message dicts (ParseJSON, or Messages for plain
// role/content pairs).
func (t *Template) Render(messages []jinja.Value, opts Options) (string, error) {
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(messages),
		"tools":                 jinja.None(),
		"documents":             jinja.None(),
		"add_generation_prompt": jinja.NewBool(opts.AddGenerationPrompt),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := ""
			if len(args) > 0 {
				if args[0].IsString() {
					msg = args[0].AsString()
				} else {
					msg = args[0].String()
				}
			}
			return jinja.Undefined(), &Error{Source: t.source, Msg: msg}
		}),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 || !args[0].IsString() {
				return jinja.Undefined(), errors.New("strftime_now takes one format string")
			}
			now := time.Now
			if t.Now != nil {
				now = t.Now
			}
			return jinja.NewString(strftime(now(), args[0].AsString())), nil
		}),
	}
	if opts.Tools != nil {
		data["tools"] = jinja.NewList(opts.Tools)
	}
	for k, v := range t.special {
		data[k] = jinja.NewString(v)
	}
	for k, v := range opts.Kwargs {
		data[k] = v
	}
	g := &guard{source: t.source, outputLimit: MaxOutput, limit: MaxOutput}
	for k, v := range g.globals() {
		data[k] = v
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return "", e
		}
		return "", &Error{Source: t.source, Msg: err.Error()}
	}
	return out, nil
}

// Message is one plain turn of a conversation.
type Message struct {
	// Role is "system", "user", "assistant", "tool", ...
	Role string
	// Content is the turn's text.
	Content string
}

// Messages converts plain turns into template values ({"role", "content"} dicts, in that order).
func Messages(ms []Message) []jinja.Value {
	out := make([]jinja.Value, len(ms))
	for i, m := range ms {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		out[i] = d
	}
	return out
}

// ParseJSON decodes one JSON value into a template value, keeping the key order of objects (Python's dicts
// keep it, and tojson writes it) and integers as integers.
func ParseJSON(data []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := parseValue(d)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("extra data after the JSON value")
	}
	return v, nil
}

func parseValue(d *json.Decoder) (jinja.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := jinja.NewDict()
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				item, err := parseValue(d)
				if err != nil {
					return jinja.Undefined(), err
				}
				v.AsDict().Set(k.(string), item)
			}
			_, err := d.Token()
			return v, err
		case '[':
			var items []jinja.Value
			for d.More() {
				item, err := parseValue(d)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, item)
			}
			_, err := d.Token()
			return jinja.NewList(items), err
		}
	case json.Number:
		return jinja.FromGoValue(x), nil
	case string:
		return jinja.NewString(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// strftime formats t with the C strftime directives templates use (%Y %m %d %H %M %S %b %B %a %A %y %j %p %I
// %e %%); others are kept as written.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'b':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
