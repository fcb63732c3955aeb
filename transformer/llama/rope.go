package llama

import "math"

// invFreq returns the rotary inverse frequencies (D/2) as transformers computes them in FP32
// (modeling_rope_utils.py: _compute_default_rope_parameters, then _compute_llama3_parameters for llama3): every
// intermediate is rounded to float32 as the torch float32 tensor ops round it.
func invFreq(c *Config) []float32 {
	d := c.HeadDim
	base := c.RopeTheta
	inv := make([]float32, d/2)
	for i := range inv {
		// 1.0 / (base ** (arange(0, dim, 2).float() / dim))
		e := float32(2*i) / float32(d)
		p := float32(math.Pow(base, float64(e)))
		inv[i] = float32(1 / float64(p))
	}
	if c.Rope.Type != RopeLlama3 {
		return inv
	}
	r := c.Rope
	factor := float32(r.Factor)
	lowF, highF := float32(r.LowFreqFactor), float32(r.HighFreqFactor)
	old := float32(r.OriginalMaxPositionEmbeddings)
	lowWavelen := float32(float64(old) / float64(lowF))
	highWavelen := float32(float64(old) / float64(highF))
	for i, f := range inv {
		wavelen := float32(2 * math.Pi / float64(f))
		scaled := f
		if wavelen > lowWavelen {
			scaled = f / factor
		}
		if !(wavelen < highWavelen) && !(wavelen > lowWavelen) { // medium frequencies: interpolate
			smooth := (old/wavelen - lowF) / (highF - lowF)
			scaled = (1-smooth)*scaled/factor + smooth*scaled
		}
		inv[i] = scaled
	}
	return inv
}

// ropeTables returns cos and sin (P, D/2) F32 for positions 0…P−1: freqs = position·inv_freq in FP32, then the
// cosine and sine of the FP32 angle, as LlamaRotaryEmbedding.forward computes them (autocast disabled; its
// emb = cat(freqs, freqs) repeats the D/2 angles, which the RoPE op reads once per pair). attention_scaling is
// 1 for the default and llama3 types.
func ropeTables(inv []float32, p int) (cos, sin []float32) {
	h := len(inv)
	cos, sin = make([]float32, p*h), make([]float32, p*h)
	for pos := range p {
		for i, f := range inv {
			a := float64(float32(pos) * f)
			cos[pos*h+i] = float32(math.Cos(a))
			sin[pos*h+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}
