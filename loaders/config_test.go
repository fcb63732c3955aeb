package loaders

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestConfigRoundTripShared reads the shared configs, checks their values and writes them back byte for byte
// (transformers' layout: sorted keys, indent 2, Python float repr).
func TestConfigRoundTripShared(t *testing.T) {
	tests := []struct {
		dir                          string
		hidden, layers, heads, inter int
		dropout                      float64
		architectures                []string
	}{
		{"tiny-bert-random", 64, 2, 4, 128, 0, []string{"BertForSequenceClassification"}},
		{"bert-base-uncased", 768, 12, 12, 3072, 0.1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			path := testutil.SharedData(t, tt.dir, "config.json")
			c, err := ReadBertConfig(filepath.Dir(path))
			if err != nil {
				t.Fatal(err)
			}
			if c.HiddenSize != tt.hidden || c.NumHiddenLayers != tt.layers || c.NumAttentionHeads != tt.heads ||
				c.IntermediateSize != tt.inter || c.HiddenDropoutProb != tt.dropout || c.VocabSize != 30522 ||
				c.ModelType != "bert" || !c.TieWordEmbeddings || c.ClassifierDropout != nil || c.PadTokenID != 0 ||
				!reflect.DeepEqual(c.Architectures, tt.architectures) {
				t.Errorf("config = %+v", c)
			}
			if c.NumLabels() != 2 || c.ID2Label[1] != "LABEL_1" || c.Label2ID["LABEL_0"] != 0 {
				t.Errorf("labels = %v %v, want transformers' default LABEL_0, LABEL_1", c.ID2Label, c.Label2ID)
			}
			if string(c.Extra["transformers_version"]) != `"5.17.0"` {
				t.Errorf("Extra lost transformers_version: %v", c.Extra)
			}
			out := filepath.Join(t.TempDir(), "config.json")
			if err := c.WriteFile(out); err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(path)
			got, _ := os.ReadFile(out)
			if !bytes.Equal(got, want) {
				t.Errorf("round trip differs:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestConfigDefaults checks that an empty object gets every default of transformers/models/bert/configuration_bert.py.
func TestConfigDefaults(t *testing.T) {
	c, err := ParseBertConfig("config.json", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultBertConfig()
	if c.VocabSize != 30522 || c.HiddenSize != 768 || c.NumHiddenLayers != 12 || c.NumAttentionHeads != 12 ||
		c.IntermediateSize != 3072 || c.HiddenAct != "gelu" || c.HiddenDropoutProb != 0.1 ||
		c.AttentionProbsDropoutProb != 0.1 || c.MaxPositionEmbeddings != 512 || c.TypeVocabSize != 2 ||
		c.InitializerRange != 0.02 || c.LayerNormEps != 1e-12 || c.PadTokenID != 0 || c.ClassifierDropout != nil ||
		c.ProblemType != "" || c.PositionEmbeddingType != "absolute" || c.ModelType != "bert" ||
		!reflect.DeepEqual(c.ID2Label, want.ID2Label) || !reflect.DeepEqual(c.Label2ID, want.Label2ID) {
		t.Errorf("defaults = %+v", c)
	}
}

// TestConfigLabels checks id2label/label2id parsing, num_labels defaults and writing back.
func TestConfigLabels(t *testing.T) {
	tests := []struct {
		name     string
		json     string
		id2label map[int]string
		label2id map[string]int
		written  []string // substrings of the written file
	}{
		{"id2label with string keys, label2id derived", `{"id2label":{"0":"NEG","1":"POS","2":"NEU"}}`,
			map[int]string{0: "NEG", 1: "POS", 2: "NEU"}, map[string]int{"NEG": 0, "POS": 1, "NEU": 2},
			[]string{`"id2label": {` + "\n" + `    "0": "NEG",`, `"label2id": {` + "\n" + `    "NEG": 0,`}},
		{"num_labels without id2label", `{"num_labels":3}`,
			map[int]string{0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, map[string]int{"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
			[]string{`"2": "LABEL_2"`}},
		{"regression: one label", `{"num_labels":1,"problem_type":"regression"}`,
			map[int]string{0: "LABEL_0"}, map[string]int{"LABEL_0": 0}, []string{`"problem_type": "regression"`}},
		{"id2label wins over num_labels, as in transformers", `{"num_labels":5,"id2label":{"0":"a","1":"b"}}`,
			map[int]string{0: "a", 1: "b"}, map[string]int{"a": 0, "b": 1}, nil},
		{"non-ASCII names are written escaped, as json.dumps does", `{"id2label":{"0":"négatif","1":"😀"}}`,
			map[int]string{0: "négatif", 1: "😀"}, map[string]int{"négatif": 0, "😀": 1},
			[]string{`"0": "n\u00e9gatif"`, `"1": "\ud83d\ude00"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseBertConfig("config.json", []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.ID2Label, tt.id2label) || !reflect.DeepEqual(c.Label2ID, tt.label2id) {
				t.Errorf("labels = %v %v, want %v %v", c.ID2Label, c.Label2ID, tt.id2label, tt.label2id)
			}
			out := filepath.Join(t.TempDir(), "config.json")
			if err := c.WriteFile(out); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(out)
			for _, w := range tt.written {
				if !strings.Contains(string(b), w) {
					t.Errorf("written config lacks %q:\n%s", w, b)
				}
			}
			back, err := ReadBertConfig(out)
			if err != nil || !reflect.DeepEqual(back.ID2Label, tt.id2label) || !reflect.DeepEqual(back.Label2ID, tt.label2id) {
				t.Errorf("re-read labels = %v %v (%v)", back.ID2Label, back.Label2ID, err)
			}
		})
	}
}

// TestConfigSetLabels checks that SetLabels rebuilds both maps and refuses duplicates.
func TestConfigSetLabels(t *testing.T) {
	c := DefaultBertConfig()
	if err := c.SetLabels([]string{"negative", "positive", "neutral"}); err != nil {
		t.Fatal(err)
	}
	if c.NumLabels() != 3 || c.ID2Label[2] != "neutral" || c.Label2ID["positive"] != 1 {
		t.Errorf("labels = %v %v", c.ID2Label, c.Label2ID)
	}
	if err := c.SetLabels([]string{"a", "a"}); err == nil || !strings.Contains(err.Error(), `"a" given for ids 0 and 1`) {
		t.Errorf("duplicate labels: err = %v", err)
	}
}

// TestConfigKeepsUnknownFields checks that keys tune does not interpret survive a round trip, nested values too.
func TestConfigKeepsUnknownFields(t *testing.T) {
	in := `{"custom": {"b": [1, 2], "a": "x"}, "dtype": "bfloat16", "classifier_dropout": 0.25, "problem_type": null}`
	c, err := ParseBertConfig("config.json", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.ClassifierDropout == nil || *c.ClassifierDropout != 0.25 || len(c.Extra) != 2 {
		t.Fatalf("config = %+v", c)
	}
	out := filepath.Join(t.TempDir(), "config.json")
	if err := c.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	for _, w := range []string{"\"custom\": {\n    \"a\": \"x\",\n    \"b\": [\n      1,\n      2\n    ]\n  }", `"dtype": "bfloat16"`, `"classifier_dropout": 0.25`, `"problem_type": null`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("written config lacks %q:\n%s", w, b)
		}
	}
}

// TestConfigErrors checks that a config.json that is not a well-formed BERT config file (a key of the wrong JSON
// type, labels that do not agree) is refused with the file and the key named. Values a model cannot be built
// from are the model's to refuse (TestConfigLeavesModelRulesToTheModel; transformer's
// TestCheckpointConfigProblems).
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"integer written as a string", `{"hidden_size":"768"}`, `"hidden_size": want an integer, got "768"`},
		{"integer written as a float", `{"num_hidden_layers":12.0}`, `"num_hidden_layers": want an integer, got 12.0`},
		{"size null", `{"vocab_size":null}`, `"vocab_size": want an integer, got null`},
		{"id2label key not an id", `{"id2label":{"zero":"a"}}`, `"id2label": key "zero" is not a non-negative integer id`},
		{"id2label with a gap", `{"id2label":{"0":"a","2":"c"}}`, "id2label has 2 entries but no id 1"},
		{"label2id outside id2label", `{"id2label":{"0":"a"},"label2id":{"a":3}}`, `label2id maps "a" to 3`},
		{"num_labels negative", `{"num_labels":-1}`, `"num_labels": -1 is negative`},
		{"num_labels beyond MaxLabels, before any label is made", `{"num_labels":2147483647}`, `"num_labels": 2147483647 is more than the 100000 classes tune reads`},
		{"architectures not a list", `{"architectures":"Bert"}`, `"architectures": want a list of strings or null, got "Bert"`},
		{"invalid JSON", "{\n  \"hidden_size\": 768,\n  oops\n}", "invalid JSON: line 3 column 3"},
		{"null document", `null`, "the config is null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "config.json", []byte(tt.json))
			_, err := ReadBertConfig(path)
			if err == nil {
				t.Fatal("ReadBertConfig accepted the config")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "loaders: "+path) {
				t.Errorf("err = %q, want it to name %s and contain %q", err, path, tt.want)
			}
		})
	}
}

// TestConfigLeavesModelRulesToTheModel: values that are well-formed JSON of the right type but describe a model
// tune cannot build are read as written, so that bert.BertConfig.Problems can name them (loaders does not
// import transformer; DESIGN's package order).
func TestConfigLeavesModelRulesToTheModel(t *testing.T) {
	tests := []struct {
		name, json string
		check      func(c *BertConfig) bool
	}{
		{"hidden not a multiple of heads", `{"hidden_size":100,"num_attention_heads":12}`,
			func(c *BertConfig) bool { return c.HiddenSize == 100 && c.NumAttentionHeads == 12 }},
		{"zero layers", `{"num_hidden_layers":0}`, func(c *BertConfig) bool { return c.NumHiddenLayers == 0 }},
		{"dropout above 1", `{"hidden_dropout_prob":1.5}`, func(c *BertConfig) bool { return c.HiddenDropoutProb == 1.5 }},
		{"pad outside the vocabulary", `{"vocab_size":10,"pad_token_id":10}`, func(c *BertConfig) bool { return c.PadTokenID == 10 }},
		{"unknown problem type", `{"problem_type":"ranking"}`, func(c *BertConfig) bool { return c.ProblemType == "ranking" }},
		{"no labels", `{"num_labels":0}`, func(c *BertConfig) bool { return c.NumLabels() == 0 }},
		{"relu", `{"hidden_act":"relu"}`, func(c *BertConfig) bool { return c.HiddenAct == "relu" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseBertConfig("config.json", []byte(tt.json))
			if err != nil {
				t.Fatalf("ParseBertConfig: %v; the file is well-formed, the model decides", err)
			}
			if !tt.check(c) {
				t.Errorf("config = %+v, want the values as written", c)
			}
		})
	}
}

// TestPyFloat checks Python's float repr, which transformers' config.json uses.
func TestPyFloat(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0.0"}, {0.1, "0.1"}, {1e-12, "1e-12"}, {1e-5, "1e-05"}, {0.0001, "0.0001"}, {2, "2.0"},
		{123456789, "123456789.0"}, {1e16, "1e+16"}, {-0.5, "-0.5"}, {0.02, "0.02"},
	}
	for _, tt := range tests {
		got, err := pyFloat(tt.v).MarshalJSON()
		if err != nil || string(got) != tt.want {
			t.Errorf("pyFloat(%v) = %s (%v), want %s", tt.v, got, err, tt.want)
		}
	}
}

// TestLineColumnOfANewline (tester3): an error whose last byte read is a newline ("{\n" cut short, a raw
// newline inside a string) was put at "line 2 column 0"; columns are 1-based and the newline ends its line.
func TestLineColumnOfANewline(t *testing.T) {
	for _, c := range []struct {
		data string
		want string
	}{
		{"{\n", "line 1 column 2: unexpected end of JSON input"},
		{"{\"a\": \"x\ny\"}", "line 1 column 9: invalid character '\\n' in string literal"},
		{`{"a": x}`, "line 1 column 7: invalid character 'x'"},
		{"", "line 1 column 1: unexpected end of JSON input"},
	} {
		var v any
		err := DescribeJSONError([]byte(c.data), json.Unmarshal([]byte(c.data), &v))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.data, err, c.want)
		}
	}
}
