package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Describe adds to err, when it is a *json.SyntaxError in data, the line and column (1-based, in
// bytes) where the JSON breaks: "line 3 column 7: invalid character ...". A *json.UnmarshalTypeError (a value
// of the wrong JSON type, the key named unless it is the top level) is said in the file's terms instead of
// Go's, where the value ends, still wrapping
// err: `line 2 column 21: "hidden_size": want an integer, got a string`, not "cannot unmarshal string into Go
// struct field hfConfig.hidden_size of type int". Other errors are returned as they are.
func Describe(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineColumn(data, se.Offset)
		return fmt.Errorf("line %d column %d: %w", line, col, err)
	case errors.As(err, &te):
		line, col := lineColumn(data, te.Offset)
		where := fmt.Sprintf("line %d column %d: ", line, col)
		if key := jsonKey(te.Field); key != "" {
			where += fmt.Sprintf("%q: ", key)
		}
		return &jsonTypeError{msg: fmt.Sprintf("%swant %s, got %s", where, jsonWant(te.Type), jsonGot(te.Value)), err: err}
	}
	return err
}

// lineColumn returns the 1-based line and column (in bytes) of the byte where an encoding/json error occurred:
// the last of the offset bytes read, as json.SyntaxError.Offset counts them (line 1 column 1 for offset 0). A
// newline read last belongs to the line it ends: "{\n" cut short is line 1 column 2, not line 2 column 0.
func lineColumn(data []byte, offset int64) (line, col int) {
	i := int(min(max(offset, 1), int64(len(data)))) - 1 // the index of the last byte read
	if i < 0 {
		return 1, 1
	}
	line = 1 + bytes.Count(data[:i], []byte("\n"))
	col = i - bytes.LastIndexByte(data[:i], '\n')
	return line, col
}

// jsonKey is an UnmarshalTypeError's Field as the file spells it: the dotted path of JSON keys, less the names
// of embedded Go structs that encoding/json puts in front ("Config.r" is the key "r"; an anonymous struct's
// ".top_k" is "top_k"); "" for the top level. Hugging Face's keys are snake_case, so a leading component in
// upper case is taken for a Go name.
func jsonKey(field string) string {
	for {
		head, rest, ok := strings.Cut(field, ".")
		if !ok || (head != "" && (head[0] < 'A' || head[0] > 'Z')) {
			return field
		}
		field = rest
	}
}

// jsonTypeError is a *json.UnmarshalTypeError said in JSON's terms.
type jsonTypeError struct {
	msg string
	err error
}

func (e *jsonTypeError) Error() string { return e.msg }
func (e *jsonTypeError) Unwrap() error { return e.err }

// jsonWant names the JSON value a Go type decodes from: "an integer", "a number", "a list".
func jsonWant(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

// jsonGot names what encoding/json found: its Value is "string", "number", "number 1.5", "bool", "array" or
// "object".
func jsonGot(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return "a " + v
}

// Wrap returns err, from decoding data read from path, as a message naming the file and, through Describe, the
// place and the key: "config.json: invalid JSON: line 3 column 7: invalid character ..." for a syntax error,
// `config.json: line 2 column 21: "hidden_size": want an integer, got a string` for a value of the wrong type,
// "config.json: " + err's message for any other error; nil when err is nil. It still wraps err.
func Wrap(path string, data []byte, err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: invalid JSON: %w", path, Describe(data, err))
	}
	return fmt.Errorf("%s: %w", path, Describe(data, err))
}
