package tokenizers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tune-ml/tune/internal/strictjson"
)

// fileJSON is the top level of tokenizer.json. Every key the library writes is listed; others are refused.
type fileJSON struct {
	Version       string           `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         json.RawMessage  `json:"model"`
}

// addedTokenJSON is one entry of added_tokens.
type addedTokenJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// patternJSON is a Split/Replace pattern: exactly one of {"String": s} or {"Regex": r}.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// strict decodes raw into v, refusing unknown keys; where names the place in the file for errors.
func strict(raw json.RawMessage, v any, where string) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		msg := err.Error()
		if k, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("%s: unknown key %s (this key is not one Hugging Face tokenizers writes here)", where, k)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s: key %q holds a JSON %s, want %s", where, te.Field, te.Value, te.Type)
		}
		return fmt.Errorf("%s: %v", where, strings.TrimPrefix(msg, "json: "))
	}
	// encoding/json matches keys case-insensitively ("Type" fills Type); the library's serde does not.
	if err := strictjson.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	return nil
}

// isNull reports whether a component is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// componentType returns the "type" of a component object.
func componentType(raw json.RawMessage, where string) (string, error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", fmt.Errorf("%s: want a JSON object with a \"type\": %v", where, err)
	}
	t, ok := head["type"]
	if !ok {
		return "", fmt.Errorf("%s: no \"type\" key", where)
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return "", fmt.Errorf("%s: \"type\" must be a string", where)
	}
	return s, nil
}

// unsupported is the error for a component type this package does not implement.
func unsupported(where, kind, typ string, supported ...string) error {
	return fmt.Errorf("%s: unsupported %s type %q (tune implements %s)", where, kind, typ, strings.Join(supported, ", "))
}

// patternOf checks a pattern object and returns (text, isRegex).
func patternOf(p patternJSON, where string) (string, bool, error) {
	switch {
	case p.String != nil && p.Regex == nil:
		return *p.String, false, nil
	case p.Regex != nil && p.String == nil:
		return *p.Regex, true, nil
	}
	return "", false, fmt.Errorf("%s.pattern: want exactly one of {\"String\": ...} or {\"Regex\": ...}", where)
}

// parseEach parses the components of a Sequence (normalizers, pretokenizers or decoders), naming each by its
// index under where, and drops the null ones.
func parseEach[T comparable](list []json.RawMessage, where string, parse func(json.RawMessage, string) (T, error)) ([]T, error) {
	var out []T
	var none T
	for i, r := range list {
		c, err := parse(r, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		if c != none {
			out = append(out, c)
		}
	}
	return out, nil
}
