package loaders

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// tinyConfig is the small BERT the name tests and the testdata fixtures use: vocab 16, hidden 8, 2 layers,
// 2 heads, intermediate 12, 16 positions, labels NEG/NEU/POS.
func tinyConfig(t testing.TB) *BertConfig {
	t.Helper()
	c := DefaultBertConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads = 16, 8, 2, 2
	c.IntermediateSize, c.MaxPositionEmbeddings = 12, 16
	c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0, 0
	c.Architectures = []string{"BertForSequenceClassification"}
	if err := c.SetLabels([]string{"NEG", "NEU", "POS"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// infos turns specs into checkpoint infos, renaming each name with rename (nil keeps it) and dropping those
// rename maps to "".
func infos(specs []TensorSpec, rename func(string) string) []TensorInfo {
	var out []TensorInfo
	for _, s := range specs {
		name := s.Name
		if rename != nil {
			name = rename(name)
		}
		if name != "" {
			out = append(out, TensorInfo{Name: name, DType: "F32", Shape: s.Shape})
		}
	}
	return out
}

// legacyName spells a canonical name as the hub bert-base-uncased checkpoint does (LayerNorm.gamma/beta).
func legacyName(n string) string {
	n = strings.Replace(n, "LayerNorm.weight", "LayerNorm.gamma", 1)
	return strings.Replace(n, "LayerNorm.bias", "LayerNorm.beta", 1)
}

// TestBertTensorTable checks the table against transformers/models/bert/modeling_bert.py's counts and a few shapes.
func TestBertTensorTable(t *testing.T) {
	c := tinyConfig(t)
	seq := BertSequenceClassificationTensors(c)
	if len(seq) != 5+16*2+2+2 {
		t.Errorf("%d sequence-classification tensors, want 5 + 16·2 + 2 + 2 = 41", len(seq))
	}
	mlm := BertMaskedLMTensors(c)
	if len(mlm) != 5+16*2+7 {
		t.Errorf("%d masked-LM tensors, want 44", len(mlm))
	}
	shapes := map[string][]int{}
	for _, s := range append(seq, mlm...) {
		shapes[s.Name] = s.Shape
	}
	for name, want := range map[string][]int{
		"bert.embeddings.word_embeddings.weight":               {16, 8},
		"bert.embeddings.position_embeddings.weight":           {16, 8},
		"bert.embeddings.token_type_embeddings.weight":         {2, 8},
		"bert.encoder.layer.1.intermediate.dense.weight":       {12, 8},
		"bert.encoder.layer.1.output.dense.weight":             {8, 12},
		"bert.encoder.layer.0.attention.output.LayerNorm.bias": {8},
		"classifier.weight":                                    {3, 8},
		"classifier.bias":                                      {3},
		"cls.predictions.decoder.weight":                       {16, 8},
	} {
		if !reflect.DeepEqual(shapes[name], want) {
			t.Errorf("%s: shape %v, want %v", name, shapes[name], want)
		}
	}
}

// TestMapBertCheckpoint matches checkpoints in the naming variants transformers accepts, and reports what does
// not match by name.
func TestMapBertCheckpoint(t *testing.T) {
	c := tinyConfig(t)
	seq := BertSequenceClassificationTensors(c)
	withoutPrefix := func(n string) string {
		if strings.HasPrefix(n, "classifier.") {
			return ""
		}
		return strings.TrimPrefix(n, "bert.")
	}
	fiveLabels := append(infos(seq, nil)[:39:39],
		TensorInfo{Name: "classifier.weight", Shape: []int{5, 8}}, TensorInfo{Name: "classifier.bias", Shape: []int{5}})
	tests := []struct {
		name       string
		ckpt       []TensorInfo
		matched    int
		renamed    int
		missing    []string
		unexpected []string
		ignored    []string // reasons
		mismatched []string
	}{
		{"canonical names", infos(seq, nil), 41, 0, nil, nil, nil, nil},
		{"BertModel checkpoint (no prefix): only the classifier is missing", infos(seq, withoutPrefix), 39, 39,
			[]string{"classifier.weight", "classifier.bias"}, nil, nil, nil},
		{"legacy gamma/beta", infos(seq, legacyName), 41, 2 + 4*2, nil, nil, nil, nil},
		{"hub pretraining checkpoint: gamma/beta, position_ids buffer, cls heads",
			append(infos(seq, func(n string) string {
				if strings.HasPrefix(n, "classifier.") {
					return ""
				}
				return legacyName(n)
			}), append(infos(BertMaskedLMTensors(c)[37:], legacyName),
				TensorInfo{Name: "bert.embeddings.position_ids", DType: "I64", Shape: []int{1, 16}},
				TensorInfo{Name: "cls.seq_relationship.weight", DType: "F32", Shape: []int{2, 8}},
				TensorInfo{Name: "cls.seq_relationship.bias", DType: "F32", Shape: []int{2}})...),
			39, 10, []string{"classifier.weight", "classifier.bias"}, nil,
			[]string{"buffer", "pretraining head cls.predictions", "pretraining head cls.seq_relationship"}, nil},
		{"classifier with another label count", fiveLabels, 39, 0, nil, nil, nil, []string{"classifier.weight", "classifier.bias"}},
		{"an unknown tensor and a duplicate under the legacy name", append(infos(seq, nil),
			TensorInfo{Name: "foo.bar", Shape: []int{1}}, TensorInfo{Name: "bert.embeddings.LayerNorm.gamma", Shape: []int{8}}),
			41, 0, nil, []string{"bert.embeddings.LayerNorm.gamma", "foo.bar"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mapping, r := MapBertCheckpoint(seq, tt.ckpt, c)
			if r.Matched != tt.matched || len(r.Renamed) != tt.renamed || !reflect.DeepEqual(r.Missing, tt.missing) ||
				!reflect.DeepEqual(r.Unexpected, tt.unexpected) {
				t.Errorf("report:\n%s\nwant %d matched, %d renamed, missing %v, unexpected %v", r, tt.matched, tt.renamed, tt.missing, tt.unexpected)
			}
			var reasons, mis []string
			for _, ig := range r.Ignored {
				if !strings.Contains(strings.Join(reasons, "|"), ig.Reason) {
					reasons = append(reasons, ig.Reason)
				}
			}
			for _, m := range r.Mismatched {
				mis = append(mis, m.Name)
				if _, ok := mapping[m.Name]; ok {
					t.Errorf("mis-shaped %s is in the mapping", m.Name)
				}
			}
			if !reflect.DeepEqual(reasons, tt.ignored) || !reflect.DeepEqual(mis, tt.mismatched) {
				t.Errorf("ignored %v mismatched %v, want %v %v", reasons, mis, tt.ignored, tt.mismatched)
			}
			if len(mapping) != tt.matched {
				t.Errorf("mapping has %d entries, want %d", len(mapping), tt.matched)
			}
			if r.OK() != (len(tt.missing) == 0 && len(tt.mismatched) == 0) {
				t.Errorf("OK() = %v with report %s", r.OK(), r)
			}
		})
	}
}

// TestB23TiedDecoder checks the loading half of tied weights in safetensors (shared tensors in safetensors/torch.py): a masked-LM checkpoint without
// cls.predictions.decoder.weight (as transformers saves it) gives no missing-key report because the decoder is tied
// to the word embeddings, while a missing non-tied key is reported by name.
func TestB23TiedDecoder(t *testing.T) {
	c := tinyConfig(t)
	mlm := BertMaskedLMTensors(c)
	dropDecoderWeight := func(n string) string {
		if n == "cls.predictions.decoder.weight" {
			return ""
		}
		return n
	}
	t.Run("tied decoder weight not reported missing", func(t *testing.T) {
		mapping, r := MapBertCheckpoint(mlm, infos(mlm, dropDecoderWeight), c)
		if !r.OK() || len(r.Missing) != 0 || r.Err() != nil {
			t.Fatalf("report:\n%s", r)
		}
		want := []TiedTensor{{Name: "cls.predictions.decoder.weight", Source: "bert.embeddings.word_embeddings.weight"}}
		if !reflect.DeepEqual(r.Tied, want) || !strings.Contains(r.String(), "tied: cls.predictions.decoder.weight shares bert.embeddings.word_embeddings.weight") {
			t.Errorf("Tied = %v, report:\n%s", r.Tied, r)
		}
		if _, ok := mapping["cls.predictions.decoder.weight"]; ok {
			t.Error("the tied decoder weight is in the mapping; the model must re-tie it instead")
		}
	})
	t.Run("a missing non-tied key is reported by name", func(t *testing.T) {
		missing := "bert.encoder.layer.1.output.dense.bias"
		_, r := MapBertCheckpoint(mlm, infos(mlm, func(n string) string {
			if n == missing {
				return ""
			}
			return dropDecoderWeight(n)
		}), c)
		if !reflect.DeepEqual(r.Missing, []string{missing}) {
			t.Errorf("Missing = %v, want [%s]", r.Missing, missing)
		}
		err := r.Err()
		if !errors.Is(err, ErrMissingTensors) || !strings.Contains(err.Error(), missing) || !strings.Contains(r.String(), "missing: "+missing) {
			t.Errorf("Err = %v, report:\n%s", err, r)
		}
	})
	t.Run("untied embeddings: the decoder weight is a real parameter", func(t *testing.T) {
		untied := *c
		untied.TieWordEmbeddings = false
		_, r := MapBertCheckpoint(mlm, infos(mlm, dropDecoderWeight), &untied)
		if !reflect.DeepEqual(r.Missing, []string{"cls.predictions.decoder.weight"}) {
			t.Errorf("Missing = %v, want the decoder weight", r.Missing)
		}
	})
	t.Run("only the alias saved: it stands for the word embeddings", func(t *testing.T) {
		mapping, r := MapBertCheckpoint(mlm, infos(mlm, func(n string) string {
			if n == "bert.embeddings.word_embeddings.weight" {
				return ""
			}
			return n
		}), c)
		if !r.OK() || mapping["bert.embeddings.word_embeddings.weight"] != "cls.predictions.decoder.weight" {
			t.Errorf("mapping %v, report:\n%s", mapping["bert.embeddings.word_embeddings.weight"], r)
		}
	})
}

// TestMismatchReport checks the wording of a mis-shaped tensor in String and Err.
func TestMismatchReport(t *testing.T) {
	c := tinyConfig(t)
	seq := BertSequenceClassificationTensors(c)
	ckpt := infos(seq, nil)
	ckpt[len(ckpt)-2].Shape = []int{2, 8}
	_, r := MapBertCheckpoint(seq, ckpt, c)
	want := "classifier.weight: checkpoint [2 8], model [3 8]"
	if !strings.Contains(r.String(), "mis-shaped: "+want) || !errors.Is(r.Err(), ErrShapeMismatch) || !strings.Contains(r.Err().Error(), want) {
		t.Errorf("report:\n%s\nerr: %v", r, r.Err())
	}
}

// TestMapSharedTinyBert matches the shared tiny-bert-random checkpoint against the table built from its own
// config.json and reads every tensor through the mapping.
func TestMapSharedTinyBert(t *testing.T) {
	dir := testutil.SharedData(t, "tiny-bert-random")
	cfg, err := ReadBertConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	expected := BertSequenceClassificationTensors(cfg)
	mapping, r := MapBertCheckpoint(expected, ck.Infos(), cfg)
	if r.Matched != 41 || !r.OK() || len(r.Unexpected)+len(r.Ignored)+len(r.Renamed) != 0 {
		t.Fatalf("report:\n%s", r)
	}
	total := 0
	for _, e := range expected {
		ht, err := ck.Get(mapping[e.Name])
		if err != nil {
			t.Fatal(err)
		}
		v, err := ht.Float32()
		if err != nil {
			t.Fatal(err)
		}
		total += len(v)
	}
	if total != 2057666 {
		t.Errorf("%d parameters, want 2,057,666", total)
	}
}

func TestSummarizeNames(t *testing.T) {
	cfg := DefaultBertConfig()
	cfg.NumHiddenLayers = 2
	var layer1 []string
	for _, s := range BertSequenceClassificationTensors(cfg) {
		if strings.HasPrefix(s.Name, "bert.encoder.layer.1.") {
			layer1 = append(layer1, s.Name)
		}
	}
	tests := []struct {
		name  string
		names []string
		limit int
		want  string
	}{
		{"a layer's 16 tensors fold into one entry", layer1, 8, "bert.encoder.layer.1.* (16 tensors)"},
		{"names outside numbered modules are kept, in order", []string{"cls.seq_relationship.weight", "bert.encoder.layer.3.output.dense.bias", "cls.seq_relationship.bias"}, 0,
			"cls.seq_relationship.weight, bert.encoder.layer.3.output.dense.bias, cls.seq_relationship.bias"},
		{"two layers give two entries", append(append([]string{}, layer1...), strings.ReplaceAll(layer1[0], ".1.", ".2."), strings.ReplaceAll(layer1[1], ".1.", ".2.")), 0,
			"bert.encoder.layer.1.* (16 tensors), bert.encoder.layer.2.* (2 tensors)"},
		{"past the limit the rest are counted", []string{"a", "b", "c", "d"}, 2, "a, b, and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SummarizeNames(tt.names, tt.limit); got != tt.want {
				t.Errorf("SummarizeNames = %q, want %q", got, tt.want)
			}
		})
	}
}
