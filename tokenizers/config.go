package tokenizers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/jsonerr"
	"github.com/tune-ml/tune/internal/smallfile"
)

// Config is what tune reads from a model's tokenizer_config.json (and chat_template.jinja beside it): the
// special tokens that chat templates see, the chat template and the longest input the model takes.
type Config struct {
	// BOSToken, EOSToken, PadToken and UnkToken are the special tokens' strings; "" when the file sets none.
	BOSToken, EOSToken, PadToken, UnkToken string
	// AdditionalSpecialTokens is additional_special_tokens.
	AdditionalSpecialTokens []string
	// ChatTemplate is the Jinja chat template: chat_template.jinja when present (what transformers v5 saves),
	// else tokenizer_config.json's chat_template (a string, or the "default" entry of a list of
	// {"name", "template"}); "" when there is none.
	ChatTemplate string
	// ChatTemplateSource names the file ChatTemplate came from.
	ChatTemplateSource string
	// ModelMaxLength is model_max_length; 0 when absent or not a sensible length (transformers writes 1e30
	// for "no limit").
	ModelMaxLength int
	// TokenizerClass is tokenizer_class ("LlamaTokenizer", "Qwen2Tokenizer", ...).
	TokenizerClass string
	// Path is the tokenizer_config.json read; "" when there was none.
	Path string
}

// LoadConfig reads tokenizer_config.json and chat_template.jinja from dir (a model directory, or the directory
// of a tokenizer.json). Both files are optional: a directory with neither gives a zero Config.
func LoadConfig(dir string) (*Config, error) {
	if st, err := os.Stat(dir); (err == nil && !st.IsDir()) || filepath.Ext(dir) == ".json" {
		dir = filepath.Dir(dir)
	}
	c := &Config{}
	p := filepath.Join(dir, "tokenizer_config.json")
	data, err := smallfile.Read(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("tokenizers: %w", err)
	default:
		c.Path = p
		if err := c.parse(data); err != nil {
			return nil, badinput.Errorf("tokenizers: %s: %w", p, err) // the file must change (exit 2)
		}
	}
	jp := filepath.Join(dir, "chat_template.jinja")
	if b, err := smallfile.Read(jp); err == nil {
		c.ChatTemplate, c.ChatTemplateSource = string(b), jp
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tokenizers: %w", err)
	}
	return c, nil
}

// tokenString reads a special token: a string, null, or an AddedToken object {"content": ...}.
func tokenString(raw json.RawMessage, key string) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == "" {
		return "", fmt.Errorf("%s: want a string or {\"content\": ...}", key)
	}
	return obj.Content, nil
}

func (c *Config) parse(data []byte) error {
	var j map[string]json.RawMessage
	if err := json.Unmarshal(data, &j); err != nil {
		what := ""
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			what = "invalid JSON: "
		}
		return fmt.Errorf("%s%w; fix the file, or replace it with the tokenizer's own", what, jsonerr.Describe(data, err))
	}
	var err error
	for key, dst := range map[string]*string{"bos_token": &c.BOSToken, "eos_token": &c.EOSToken,
		"pad_token": &c.PadToken, "unk_token": &c.UnkToken} {
		if *dst, err = tokenString(j[key], key); err != nil {
			return err
		}
	}
	if raw, ok := j["additional_special_tokens"]; ok && !isNull(raw) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("additional_special_tokens: want a list")
		}
		for i, r := range list {
			s, err := tokenString(r, fmt.Sprintf("additional_special_tokens[%d]", i))
			if err != nil {
				return err
			}
			c.AdditionalSpecialTokens = append(c.AdditionalSpecialTokens, s)
		}
	}
	if raw, ok := j["chat_template"]; ok && !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			c.ChatTemplate = s
		} else {
			var list []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(raw, &list); err != nil {
				return fmt.Errorf("chat_template: want a string or a list of {\"name\", \"template\"}")
			}
			for _, e := range list {
				if e.Name == "default" {
					c.ChatTemplate = e.Template
				}
			}
			if c.ChatTemplate == "" {
				return fmt.Errorf("chat_template: the list has no \"default\" entry")
			}
		}
		c.ChatTemplateSource = c.Path + " (chat_template)"
	}
	if raw, ok := j["tokenizer_class"]; ok {
		_ = json.Unmarshal(raw, &c.TokenizerClass)
	}
	if raw, ok := j["model_max_length"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) == nil && f > 0 && f < 1<<40 {
			c.ModelMaxLength = int(f)
		}
	}
	return nil
}

// ModelType returns the model type of a tokenizer.json ("BPE", "WordPiece", ...), or of the tokenizer.json in a
// directory; "" when path is not a tokenizer.json (a vocab.txt, or a directory without one).
func ModelType(path string) (string, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
		if _, err := os.Stat(path); err != nil {
			return "", nil
		}
	}
	if filepath.Ext(path) != ".json" {
		return "", nil
	}
	data, err := smallfile.ReadCapped(path, smallfile.MaxTokenizerBytes, "a tokenizer.json")
	if err != nil {
		return "", fmt.Errorf("tokenizers: %w", err)
	}
	var j struct {
		Model struct {
			Type string `json:"type"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		// The file must change, as Load's errors for it (exit 2: tune tokenize probes with ModelType first).
		return "", badinput.Errorf("tokenizers: %s: not a tokenizer.json: %w", path, describeJSON(data, err))
	}
	return j.Model.Type, nil
}

// describeJSON rewrites encoding/json's errors for people: the line and column of a syntax error, and for a
// file whose top level is not an object what it is instead (encoding/json names the Go type it decoded into).
func describeJSON(data []byte, err error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the file is empty")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(int(se.Offset), len(data))
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := off - bytes.LastIndexByte(data[:off], '\n') - 1
		return fmt.Errorf("invalid JSON at line %d column %d: %w", line, col, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("the top level is a JSON %s, want an object with a \"model\"", te.Value)
		}
		return fmt.Errorf("%q is a JSON %s, want an object", te.Field, te.Value)
	}
	return err
}
