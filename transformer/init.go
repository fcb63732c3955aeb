package transformer

import (
	"math/rand/v2"

	"github.com/tune-ml/tune/tensor"
)

// InitNormal fills v with draws from N(0, std²), as transformers' _init_weights initialises a weight
// (normal_(mean=0, std)), from a PCG stream keyed by (seed, index) (a family passes the parameter's index in its
// list, so each parameter has its own stream; they do not reproduce PyTorch's generator). Row padRow ≥ 0 (a
// word embedding's padding_idx) is zeroed, as nn.Embedding zeroes it. On the meta backend it draws nothing.
func InitNormal(b tensor.Backend, v *tensor.Tensor, std float64, seed, index uint64, padRow int) error {
	if tensor.IsMeta(b) { // a memory plan: no values to draw
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, index))
	host := make([]float32, v.Numel())
	for i := range host {
		host[i] = float32(rng.NormFloat64() * std)
	}
	if padRow >= 0 && len(v.Shape) == 2 {
		c := v.Shape[1]
		clear(host[padRow*c : (padRow+1)*c])
	}
	return b.Upload(v, host)
}
