package gpt2

import (
	"fmt"
	"math"
	"strings"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// NewGPT2LMHeadModel builds a freshly initialised model for cfg on b, as transformers initialises one for
// training from scratch (GPT2PreTrainedModel._init_weights): Conv1D and embedding weights drawn from
// N(0, initializer_range²), the residual projections' weights (attn.c_proj and mlp.c_proj) from
// N(0, (initializer_range/√(2·n_layer))²) as the GPT-2 paper scales them, biases 0, LayerNorm weight 1 and
// bias 0. The draws come from seed (PCG per parameter, keyed by its index); they do not reproduce PyTorch's
// generator.
func NewGPT2LMHeadModel(b tensor.Backend, cfg Config, seed uint64) (*GPT2LMHeadModel, error) {
	m, err := newModel(b, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.InitWeights(seed); err != nil {
		return nil, err
	}
	return m, nil
}

// InitWeights re-initialises every parameter as NewGPT2LMHeadModel describes.
func (m *GPT2LMHeadModel) InitWeights(seed uint64) error {
	for i, np := range m.namedParameters() {
		if err := m.initParam(np, seed, uint64(i)); err != nil {
			return err
		}
	}
	m.WeightsUpdated()
	return nil
}

// initParam fills one parameter by its role, read from its name.
func (m *GPT2LMHeadModel) initParam(np transformer.NamedParameter, seed, index uint64) error {
	v, name := np.Param.Value, np.Name
	switch {
	case strings.Contains(name, "ln_") && strings.HasSuffix(name, ".weight"):
		return m.Backend().Fill(v, 1)
	case strings.HasSuffix(name, "bias"):
		return m.Backend().Fill(v, 0)
	}
	std := m.Config.InitializerRange
	if strings.HasSuffix(name, "c_proj.weight") {
		std /= math.Sqrt(2 * float64(m.Config.NLayer))
	}
	if err := transformer.InitNormal(m.Backend(), v, std, seed, index, -1); err != nil {
		return fmt.Errorf("gpt2: initialising %s: %w", name, err)
	}
	return nil
}
