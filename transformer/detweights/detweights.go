package detweights

import (
	"math"
	"strings"
)

// SplitMix64 advances a SplitMix64 state x by one step and returns the output.
func SplitMix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	z := x
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// FNV1a64 is the 64-bit FNV-1a hash of s.
func FNV1a64(s string) uint64 {
	h := uint64(0xCBF29CE484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001B3
	}
	return h
}

// Uniform returns the n draws f_j ∈ [−1, 1) of the named parameter.
func Uniform(seed uint64, name string, n int) []float64 {
	key := SplitMix64(seed ^ FNV1a64(name))
	out := make([]float64, n)
	for j := range out {
		out[j] = float64(SplitMix64(key+uint64(j))>>40)*(1.0/(1<<23)) - 1
	}
	return out
}

// Values returns the named parameter's values (shape row-major) by the role rules in the package comment.
func Values(seed uint64, name string, shape []int) []float32 {
	n := 1
	for _, d := range shape {
		n *= d
	}
	f := Uniform(seed, name, n)
	out := make([]float32, n)
	switch {
	case strings.HasSuffix(name, "LayerNorm.weight"):
		for i, v := range f {
			out[i] = float32(1 + float64(v*0.1))
		}
	case strings.HasSuffix(name, "bias") || len(shape) != 2:
		for i, v := range f {
			out[i] = float32(v * 0.1)
		}
	case strings.Contains(name, "embeddings."):
		for i, v := range f {
			out[i] = float32(v)
		}
	default:
		s := math.Sqrt(3 / float64(shape[1]))
		for i, v := range f {
			out[i] = float32(v * s)
		}
	}
	return out
}

// DecoderValues are the weights of tools/reference/decoder_goldens.py: Values, except that RMSNorm weights
// (names ending in "norm.weight") are 1 + 0.1·f, since a decoder's norms have no "LayerNorm" in their names.
func DecoderValues(seed uint64, name string, shape []int) []float32 {
	if !strings.HasSuffix(name, "norm.weight") {
		return Values(seed, name, shape)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]float32, n)
	for i, v := range Uniform(seed, name, n) {
		out[i] = float32(1 + v*0.1)
	}
	return out
}
