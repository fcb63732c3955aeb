package bert

import (
	"fmt"
	"github.com/tune-ml/tune/transformer"
	"strings"

	"github.com/tune-ml/tune/tensor"
)

// NewBertForSequenceClassification builds a freshly initialised model for cfg on b, as transformers initialises
// one for training from scratch (PreTrainedModel._init_weights and BERT's, transformers/models/bert/modeling_bert.py): every Linear and
// Embedding weight drawn from N(0, initializer_range²), the word embeddings' padding_idx row zeroed, biases 0,
// LayerNorm weight 1 and bias 0. The draws come from seed (PCG per parameter, keyed by its index), so the same
// seed gives the same model on any backend; they do not reproduce PyTorch's generator.
func NewBertForSequenceClassification(b tensor.Backend, cfg BertConfig, seed uint64) (*BertForSequenceClassification, error) {
	m, err := newBert(b, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.InitWeights(seed); err != nil {
		return nil, err
	}
	return m, nil
}

// InitWeights re-initialises every parameter as NewBertForSequenceClassification describes.
func (m *BertForSequenceClassification) InitWeights(seed uint64) error {
	for i, np := range m.namedParameters() {
		if err := m.initParam(np, seed, uint64(i)); err != nil {
			return err
		}
	}
	m.WeightsUpdated()
	return nil
}

// InitClassifier re-initialises only the classifier (a checkpoint without one, e.g. a BertModel or a
// BertForMaskedLM, gets a fresh head as transformers gives it).
func (m *BertForSequenceClassification) InitClassifier(seed uint64) error {
	for i, np := range m.namedParameters() {
		if strings.HasPrefix(np.Name, "classifier.") {
			if err := m.initParam(np, seed, uint64(i)); err != nil {
				return err
			}
		}
	}
	m.WeightsUpdated()
	return nil
}

// initParam fills one parameter by its role, read from its name: LayerNorm weight 1 / bias 0, other biases 0,
// 2-D weights N(0, initializer_range²) with the padding row of the word embeddings zeroed.
func (m *BertForSequenceClassification) initParam(np transformer.NamedParameter, seed, index uint64) error {
	v := np.Param.Value
	name := np.Name
	switch {
	case strings.HasSuffix(name, "LayerNorm.weight"):
		return m.Backend().Fill(v, 1)
	case strings.HasSuffix(name, "bias") || len(v.Shape) != 2:
		return m.Backend().Fill(v, 0)
	}
	pad := -1
	if strings.HasSuffix(name, "word_embeddings.weight") {
		pad = m.Config.PadTokenID
	}
	if err := transformer.InitNormal(m.Backend(), v, m.Config.InitializerRange, seed, index, pad); err != nil {
		return fmt.Errorf("bert: initialising %s: %w", name, err)
	}
	return nil
}
