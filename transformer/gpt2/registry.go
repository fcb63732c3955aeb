package gpt2

import (
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

var _ transformer.Adaptable = (*GPT2LMHeadModel)(nil)

func init() {
	transformer.Register(transformer.Family{
		Name: "gpt2", ModelTypes: []string{"gpt2"},
		Architectures: []string{"GPT2LMHeadModel", "GPT2Model"},
		Load:          transformer.Loader(LoadPretrained),
		ProjectionPaths: func(dir string) ([]string, error) {
			cfg, err := ReadConfig(dir)
			if err != nil {
				return nil, err
			}
			return ProjectionPaths(cfg), nil
		},
		Check: CheckPretrained,
		Skeleton: func(dir string, b tensor.Backend) (transformer.Adaptable, error) {
			cfg, err := ReadConfig(dir)
			if err != nil {
				return nil, err
			}
			m, err := newModel(b, cfg)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return m, nil
		},
	})
}
