package loaders

import (
	"fmt"
	"strings"
)

// TensorSpec names a tensor a model expects and its shape.
type TensorSpec struct {
	Name  string // canonical transformers name: "bert.encoder.layer.0.attention.self.query.weight"
	Shape []int  // as PyTorch stores it: Linear weights (out_features, in_features)
}

// bertTensor is one row of the BERT name table: the canonical (transformers) name, with {L} standing for a layer
// index, and the shape as a function of the config.
type bertTensor struct {
	name  string
	shape func(c *BertConfig) []int
}

// Shapes of the table, in transformers/models/bert/modeling_bert.py's notation: H hidden, I intermediate, V vocab, P positions, T token types,
// L labels. Linear weights are [out_features, in_features].
func shapeH(c *BertConfig) []int  { return []int{c.HiddenSize} }
func shapeHH(c *BertConfig) []int { return []int{c.HiddenSize, c.HiddenSize} }
func shapeI(c *BertConfig) []int  { return []int{c.IntermediateSize} }
func shapeIH(c *BertConfig) []int { return []int{c.IntermediateSize, c.HiddenSize} }
func shapeHI(c *BertConfig) []int { return []int{c.HiddenSize, c.IntermediateSize} }
func shapeV(c *BertConfig) []int  { return []int{c.VocabSize} }
func shapeVH(c *BertConfig) []int { return []int{c.VocabSize, c.HiddenSize} }
func shapePH(c *BertConfig) []int { return []int{c.MaxPositionEmbeddings, c.HiddenSize} }
func shapeTH(c *BertConfig) []int { return []int{c.TypeVocabSize, c.HiddenSize} }
func shapeL(c *BertConfig) []int  { return []int{c.NumLabels()} }
func shapeLH(c *BertConfig) []int { return []int{c.NumLabels(), c.HiddenSize} }

// bertEmbeddingTensors, bertLayerTensors, bertPoolerTensors, bertClassifierTensors and bertMLMTensors are the
// name table of transformers' BertForSequenceClassification and BertForMaskedLM (transformers/models/bert/modeling_bert.py, verified with
// save_pretrained).
var (
	bertEmbeddingTensors = []bertTensor{
		{"bert.embeddings.word_embeddings.weight", shapeVH},
		{"bert.embeddings.position_embeddings.weight", shapePH},
		{"bert.embeddings.token_type_embeddings.weight", shapeTH},
		{"bert.embeddings.LayerNorm.weight", shapeH},
		{"bert.embeddings.LayerNorm.bias", shapeH},
	}
	bertLayerTensors = []bertTensor{
		{"bert.encoder.layer.{L}.attention.self.query.weight", shapeHH},
		{"bert.encoder.layer.{L}.attention.self.query.bias", shapeH},
		{"bert.encoder.layer.{L}.attention.self.key.weight", shapeHH},
		{"bert.encoder.layer.{L}.attention.self.key.bias", shapeH},
		{"bert.encoder.layer.{L}.attention.self.value.weight", shapeHH},
		{"bert.encoder.layer.{L}.attention.self.value.bias", shapeH},
		{"bert.encoder.layer.{L}.attention.output.dense.weight", shapeHH},
		{"bert.encoder.layer.{L}.attention.output.dense.bias", shapeH},
		{"bert.encoder.layer.{L}.attention.output.LayerNorm.weight", shapeH},
		{"bert.encoder.layer.{L}.attention.output.LayerNorm.bias", shapeH},
		{"bert.encoder.layer.{L}.intermediate.dense.weight", shapeIH},
		{"bert.encoder.layer.{L}.intermediate.dense.bias", shapeI},
		{"bert.encoder.layer.{L}.output.dense.weight", shapeHI},
		{"bert.encoder.layer.{L}.output.dense.bias", shapeH},
		{"bert.encoder.layer.{L}.output.LayerNorm.weight", shapeH},
		{"bert.encoder.layer.{L}.output.LayerNorm.bias", shapeH},
	}
	bertPoolerTensors = []bertTensor{
		{"bert.pooler.dense.weight", shapeHH},
		{"bert.pooler.dense.bias", shapeH},
	}
	bertClassifierTensors = []bertTensor{
		{"classifier.weight", shapeLH},
		{"classifier.bias", shapeL},
	}
	bertMLMTensors = []bertTensor{
		{"cls.predictions.bias", shapeV},
		{"cls.predictions.transform.dense.weight", shapeHH},
		{"cls.predictions.transform.dense.bias", shapeH},
		{"cls.predictions.transform.LayerNorm.weight", shapeH},
		{"cls.predictions.transform.LayerNorm.bias", shapeH},
		{"cls.predictions.decoder.weight", shapeVH},
		{"cls.predictions.decoder.bias", shapeV},
	}
)

// bertPrefix is transformers' base_model_prefix for BERT: head models hold the encoder under it.
const bertPrefix = "bert."

// bertLegacyRenames rewrites the TF-era LayerNorm parameter names of older checkpoints (hub bert-base-uncased) to
// today's, as transformers' conversion_mapping "legacy" renamings do; only LayerNorm keys are touched
// (transformers PR #35615).
var bertLegacyRenames = []struct{ suffix, replacement string }{
	{"LayerNorm.gamma", "LayerNorm.weight"},
	{"LayerNorm.beta", "LayerNorm.bias"},
}

// bertBuffers are non-persistent buffers some older checkpoints saved (position_ids is I64); they are ignored.
var bertBuffers = []string{"embeddings.position_ids", "embeddings.token_type_ids"}

// bertPretrainingHeads are the heads of BertForPreTraining: unexpected in a fine-tuning model but harmless.
var bertPretrainingHeads = []string{"cls.predictions.", "cls.seq_relationship."}

// bertTies lists tensors transformers ties to another and does not save (BertForMaskedLM._tied_weights_keys): a
// checkpoint lacking them is complete. The decoder weight is tied only when tie_word_embeddings is true.
var bertTies = []struct {
	name, source       string
	needsTieEmbeddings bool
}{
	{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight", true},
	{"cls.predictions.decoder.bias", "cls.predictions.bias", false},
}

// BertSequenceClassificationTensors returns the tensors of transformers' BertForSequenceClassification for cfg, in
// module order, with their canonical names and shapes: 5 embedding tensors, 16 per layer, the pooler and the
// classifier ([num_labels, hidden] and [num_labels]), 5 + 16·layers + 4 in all.
func BertSequenceClassificationTensors(cfg *BertConfig) []TensorSpec {
	return bertSpecs(cfg, bertEmbeddingTensors, bertLayerTensors, bertPoolerTensors, bertClassifierTensors)
}

// BertMaskedLMTensors returns the tensors of transformers' BertForMaskedLM for cfg (no pooler; the MLM head with
// its decoder, which is tied to the word embeddings when cfg.TieWordEmbeddings), 5 + 16·layers + 7 in all.
func BertMaskedLMTensors(cfg *BertConfig) []TensorSpec {
	return bertSpecs(cfg, bertEmbeddingTensors, bertLayerTensors, bertMLMTensors)
}

func bertSpecs(cfg *BertConfig, embeddings, layer []bertTensor, heads ...[]bertTensor) []TensorSpec {
	var out []TensorSpec
	for _, t := range embeddings {
		out = append(out, TensorSpec{t.name, t.shape(cfg)})
	}
	for l := range cfg.NumHiddenLayers {
		for _, t := range layer {
			out = append(out, TensorSpec{strings.Replace(t.name, "{L}", fmt.Sprint(l), 1), t.shape(cfg)})
		}
	}
	for _, h := range heads {
		for _, t := range h {
			out = append(out, TensorSpec{t.name, t.shape(cfg)})
		}
	}
	return out
}

// bertCandidates returns the canonical names a checkpoint key may stand for, most likely first: the key with
// legacy LayerNorm names rewritten, then the same with the "bert." prefix added or removed.
func bertCandidates(key string) []string {
	k := key
	for _, r := range bertLegacyRenames {
		if strings.HasSuffix(k, r.suffix) {
			k = strings.TrimSuffix(k, r.suffix) + r.replacement
		}
	}
	if rest, ok := strings.CutPrefix(k, bertPrefix); ok {
		return []string{k, rest}
	}
	return []string{k, bertPrefix + k}
}

// bertIgnoreReason says why an unmatched checkpoint key is harmless, or "" when it is not.
func bertIgnoreReason(key string) string {
	base := strings.TrimPrefix(key, bertPrefix)
	for _, b := range bertBuffers {
		if base == b {
			return "buffer"
		}
	}
	for _, p := range bertPretrainingHeads {
		if strings.HasPrefix(base, p) {
			return "pretraining head " + strings.TrimSuffix(p, ".")
		}
	}
	return ""
}
