package loaders

import (
	"reflect"
	"strings"
	"testing"
)

// TestConfigLabelConsistency checks that config.json's id2label names each class once and that label2id, when
// present, is its inverse: the errors name the file and the offending entries sorted (never Go map syntax),
// and label2id left at the placeholders next to a named id2label is rebuilt from id2label.
func TestConfigLabelConsistency(t *testing.T) {
	tests := []struct {
		name     string
		json     string
		label2id map[string]int // the parsed label2id when the config is accepted
		want     []string       // substrings of the error; nil: accepted
		unwanted string         // must not be in the error
	}{
		{"a consistent pair is kept", `{"id2label":{"0":"neg","1":"pos"},"label2id":{"neg":0,"pos":1}}`,
			map[string]int{"neg": 0, "pos": 1}, nil, ""},
		{"label2id absent is derived", `{"id2label":{"0":"neg","1":"pos"}}`,
			map[string]int{"neg": 0, "pos": 1}, nil, ""},
		{"placeholder label2id next to named id2label is rebuilt",
			`{"id2label":{"0":"neg","1":"pos"},"label2id":{"LABEL_0":0,"LABEL_1":1}}`,
			map[string]int{"neg": 0, "pos": 1}, nil, ""},
		{"swapped ids are refused", `{"id2label":{"0":"neg","1":"pos"},"label2id":{"neg":1,"pos":0}}`, nil,
			[]string{"config.json", `"label2id" is not the inverse of "id2label" {0: "neg", 1: "pos"}`,
				`label2id maps "neg" to 1, but id2label names class 0 "neg"; label2id maps "pos" to 0, but id2label names class 1 "pos"`,
				"delete label2id"}, "map["},
		{"a name id2label lacks", `{"id2label":{"0":"neg","1":"pos"},"label2id":{"neg":0,"positive":1}}`, nil,
			[]string{`label2id maps "positive" to 1, but id2label has no class "positive"`, `label2id lacks "pos" (class 1 in id2label)`}, "map["},
		{"duplicate names in id2label", `{"id2label":{"0":"neg","1":"neg"},"label2id":{"neg":1}}`, nil,
			[]string{"config.json", `"id2label" names both class 0 and class 1 "neg"`}, "map["},
		{"duplicate names without label2id", `{"id2label":{"0":"x","1":"y","2":"x"}}`, nil,
			[]string{`names both class 0 and class 2 "x"`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "config.json", []byte(tt.json))
			c, err := ReadBertConfig(path)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ReadBertConfig: %v", err)
				}
				if !reflect.DeepEqual(c.Label2ID, tt.label2id) {
					t.Errorf("label2id = %v, want %v", c.Label2ID, tt.label2id)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadBertConfig accepted the config; labels %v %v", c.ID2Label, c.Label2ID)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if tt.unwanted != "" && strings.Contains(err.Error(), tt.unwanted) {
				t.Errorf("error %q contains %q", err, tt.unwanted)
			}
		})
	}
}

// TestDatasetLabelMappingErrors checks the messages of a label mapping the caller gets wrong (duplicate names
// collapse the inverse of an id2label) and of a label the mapping lacks: sorted entries, no Go map syntax, and
// no mention of a label2id the caller may not have used.
func TestDatasetLabelMappingErrors(t *testing.T) {
	tests := []struct {
		name     string
		label2id map[string]int
		want     string
	}{
		{"a collapsed mapping names its entries sorted", map[string]int{"pos": 1, "neg": 1},
			`the label mapping {"neg": 1, "pos": 1} must give each class id 0..1 one name`},
		{"an unknown label lists the known ones", map[string]int{"pos": 1, "neg": 0},
			`:2: unknown label "maybe": the known labels are "neg", "pos" (an integer class id 0..1 is accepted too)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, "a.tsv", "sentence\tlabel\nx\tmaybe\n")
			_, err := LoadDataset(p, DatasetOptions{Label2ID: tt.label2id})
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v\nwant it to name %s and contain %q", err, p, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), "map[") || strings.Contains(err.Error(), "label2id")) {
				t.Errorf("error %q shows a Go map or names label2id", err)
			}
		})
	}
}
