package bert

import (
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

var _ transformer.Adaptable = (*BertForSequenceClassification)(nil)

func init() {
	transformer.Register(transformer.Family{
		Name: "bert", ModelTypes: []string{"bert"},
		Architectures: []string{"BertForSequenceClassification", "BertModel", "BertForMaskedLM", "BertForPreTraining"},
		Load:          transformer.Loader(LoadPretrained),
		ProjectionPaths: func(dir string) ([]string, error) {
			h, err := loaders.ReadBertConfig(dir)
			if err != nil {
				return nil, err
			}
			return ProjectionPaths(BertConfig{NumHiddenLayers: h.NumHiddenLayers}), nil
		},
		Check: CheckPretrained,
		Skeleton: func(dir string, b tensor.Backend) (transformer.Adaptable, error) {
			h, err := loaders.ReadBertConfig(dir)
			if err != nil {
				return nil, err
			}
			cfg, err := BertConfigFromHF(h)
			if err != nil {
				return nil, err
			}
			m, err := newBert(b, cfg)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return m, nil
		},
	})
}
