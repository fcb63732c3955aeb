package loaders

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/tune-ml/tune/internal/atomicfile"
)

// configDecoder takes known keys out of a config.json object one by one, type-checking each; the first error
// sticks and names the key.
type configDecoder struct {
	raw map[string]json.RawMessage
	err error
}

// take removes key from raw and decodes it into dst with what describing the wanted type. It reports whether a
// non-null value was stored; null is an error unless nullable.
func (d *configDecoder) take(key, what string, nullable bool, dst any) bool {
	v, ok := d.raw[key]
	if !ok || d.err != nil {
		return false
	}
	delete(d.raw, key)
	if string(v) == "null" {
		if !nullable {
			d.err = fmt.Errorf("%q: want %s, got null", key, what)
		}
		return false
	}
	if err := json.Unmarshal(v, dst); err != nil {
		d.err = fmt.Errorf("%q: want %s, got %s", key, what, v)
		return false
	}
	return true
}

// int decodes an integer written as a JSON integer (not 768.0, not "768").
func (d *configDecoder) int(key string, nullable bool, dst *int) bool {
	var raw json.RawMessage
	if !d.take(key, "an integer", nullable, &raw) {
		return false
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		d.err = fmt.Errorf("%q: want an integer, got %s", key, raw)
		return false
	}
	*dst = v
	return true
}

func (d *configDecoder) float(key string, dst *float64) { d.take(key, "a number", false, dst) }

func (d *configDecoder) nullableFloat(key string, dst **float64) {
	var f float64
	if d.take(key, "a number or null", true, &f) {
		*dst = &f
	}
}

func (d *configDecoder) string(key string, dst *string) { d.take(key, "a string", false, dst) }

func (d *configDecoder) nullableString(key string, dst *string) {
	d.take(key, "a string or null", true, dst)
}

func (d *configDecoder) strings(key string, dst *[]string) {
	d.take(key, "a list of strings or null", true, dst)
}

func (d *configDecoder) bool(key string, dst *bool) { d.take(key, "true or false", false, dst) }

// labels decodes id2label (string keys holding ids 0..n-1) and label2id; without id2label it makes num_labels
// (or the old _num_labels, else 2) default labels, as transformers' PretrainedConfig does. The names must be
// distinct and label2id, when present, id2label's inverse (checkLabels); without it, label2id is derived.
func (d *configDecoder) labels(c *BertConfig) {
	numLabels := -1
	for _, key := range []string{"num_labels", "_num_labels"} {
		var n int
		if d.int(key, true, &n) && numLabels < 0 {
			if n < 0 {
				d.err = fmt.Errorf("%q: %d is negative", key, n)
				return
			}
			if n > MaxLabels { // checked before labels are made for it: 2147483647 used to exhaust memory
				d.err = fmt.Errorf("%q: %d is more than the %d classes tune reads; set it to the number of classes the "+
					"classifier has (the rows of classifier.weight)", key, n, MaxLabels)
				return
			}
			numLabels = n
		}
	}
	var id2label map[string]string
	hasNames := d.take("id2label", "an object of id strings to names", true, &id2label)
	if hasNames {
		if len(id2label) > MaxLabels {
			d.err = fmt.Errorf("\"id2label\": %d classes is more than the %d tune reads", len(id2label), MaxLabels)
			return
		}
		c.ID2Label = make(map[int]string, len(id2label))
		for k, name := range id2label {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 {
				d.err = fmt.Errorf("\"id2label\": key %q is not a non-negative integer id", k)
				return
			}
			c.ID2Label[id] = name
		}
	} else if numLabels >= 0 {
		c.ID2Label = defaultLabels(numLabels)
	}
	c.Label2ID = invertLabels(c.ID2Label)
	var label2id map[string]int
	has := d.take("label2id", "an object of names to integer ids", true, &label2id)
	if d.err != nil || !has && !hasNames {
		return // only num_labels: the LABEL_i names are distinct by construction
	}
	rebuild, err := checkLabels(c.ID2Label, label2id, has)
	if err != nil {
		d.err = err
		return
	}
	if has && !rebuild {
		c.Label2ID = label2id
	}
}

// MarshalJSON encodes the config as transformers writes config.json: every key sorted, known fields first
// converted back to their JSON spelling, floats in Python's repr (0.0, 1e-12), labels with string keys. A
// known field that was absent from the file read is written only when it differs from transformers' default,
// so reading and writing a config changes nothing. Use WriteFile for the on-disk layout (indented, ASCII).
func (c *BertConfig) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(c.Extra)+24)
	for k, v := range c.Extra {
		out[k] = sortedJSON(v)
	}
	def := DefaultBertConfig()
	out["vocab_size"] = c.VocabSize
	out["hidden_size"] = c.HiddenSize
	out["num_hidden_layers"] = c.NumHiddenLayers
	out["num_attention_heads"] = c.NumAttentionHeads
	out["intermediate_size"] = c.IntermediateSize
	out["hidden_act"] = c.HiddenAct
	out["hidden_dropout_prob"] = pyFloat(c.HiddenDropoutProb)
	out["attention_probs_dropout_prob"] = pyFloat(c.AttentionProbsDropoutProb)
	out["max_position_embeddings"] = c.MaxPositionEmbeddings
	out["type_vocab_size"] = c.TypeVocabSize
	out["initializer_range"] = pyFloat(c.InitializerRange)
	out["layer_norm_eps"] = pyFloat(c.LayerNormEps)
	out["model_type"] = c.ModelType
	if c.PadTokenID >= 0 {
		out["pad_token_id"] = c.PadTokenID
	} else {
		out["pad_token_id"] = nil
	}
	if c.ClassifierDropout != nil {
		out["classifier_dropout"] = pyFloat(*c.ClassifierDropout)
	} else {
		out["classifier_dropout"] = nil
	}
	optional := func(key string, isDefault bool, v any) {
		if c.present[key] || !isDefault {
			out[key] = v
		}
	}
	optional("architectures", len(c.Architectures) == 0, c.Architectures)
	optional("position_embedding_type", c.PositionEmbeddingType == def.PositionEmbeddingType, c.PositionEmbeddingType)
	optional("tie_word_embeddings", c.TieWordEmbeddings == def.TieWordEmbeddings, c.TieWordEmbeddings)
	if c.ProblemType != "" {
		out["problem_type"] = c.ProblemType
	} else if c.present["problem_type"] {
		out["problem_type"] = nil
	}
	id2label := make(map[string]string, len(c.ID2Label))
	for id, name := range c.ID2Label {
		id2label[strconv.Itoa(id)] = name
	}
	defaultLabelsInUse := maps.Equal(c.ID2Label, def.ID2Label)
	optional("id2label", defaultLabelsInUse, id2label)
	optional("label2id", defaultLabelsInUse && maps.Equal(c.Label2ID, def.Label2ID), c.Label2ID)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("loaders: encoding config: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// sortedJSON decodes a raw value so that encoding it again sorts nested object keys, as json.dumps(sort_keys=True)
// does; numbers keep their original text. A value that does not decode is returned as it is.
func sortedJSON(v json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return v
	}
	return x
}

// WriteFile validates the config and writes it to path as transformers does (json.dumps(indent=2,
// sort_keys=True) + "\n", non-ASCII escaped as \uXXXX), through a temporary file renamed into place.
func (c *BertConfig) WriteFile(path string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	compact, err := c.MarshalJSON()
	if err != nil {
		return err
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, compact, "", "  "); err != nil {
		return fmt.Errorf("loaders: encoding config: %w", err)
	}
	indented.WriteByte('\n')
	if err := atomicfile.WriteFile(path, asciiJSON(indented.Bytes()), 0o644); err != nil {
		return fmt.Errorf("loaders: %w", err)
	}
	return nil
}

// pyFloat is a float64 that encodes as Python's repr: shortest round-trip digits, ".0" on integral values, and
// exponent notation below 1e-4 or from 1e16 on (1e-12, 1e+16), as json.dumps writes floats.
type pyFloat float64

// MarshalJSON implements json.Marshaler.
func (f pyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("loaders: %v cannot be written to config.json", v)
	}
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		return []byte(strconv.FormatFloat(v, 'e', -1, 64)), nil
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return []byte(s), nil
}

// asciiJSON escapes every non-ASCII character of a JSON document as \uXXXX (UTF-16 surrogate pairs above the
// BMP), as Python's json.dumps does with ensure_ascii. Non-ASCII bytes can only occur inside strings.
func asciiJSON(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteByte(byte(r))
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.Bytes()
}
