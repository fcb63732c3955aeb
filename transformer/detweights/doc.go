// Package detweights generates deterministic test weights for a model from (seed, parameter name), bit for bit
// the same as tools/reference/detweights.py computes them with numpy. Golden files made by transformers then
// need to store only inputs and outputs: both sides regenerate the weights.
//
// The recipe, for a parameter with full Hugging Face name `name` and shape `shape` (n elements, row-major):
//
//	key  = splitmix64(seed XOR fnv1a64(name))
//	u_j  = splitmix64(key + j)                      (uint64 wrapping arithmetic), j = 0 … n−1
//	f_j  = float64(u_j >> 40)·2⁻²³ − 1              exactly representable, uniform on [−1, 1)
//
// and the value by the parameter's role (all arithmetic in float64, one rounding to float32 at the end):
//
//	*LayerNorm.weight             1 + f·0.1
//	*bias (any other 1-D bias)    f·0.1
//	*embeddings.* (2-D tables)    f
//	other 2-D (Linear (Out, In))  f·sqrt(3/In)        (unit-variance outputs for unit-variance inputs)
//
// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser (the state increment 0x9E3779B97F4A7C15 followed
// by the two xor-shift-multiply rounds); fnv1a64 is 64-bit FNV-1a over the name's UTF-8 bytes.
package detweights
