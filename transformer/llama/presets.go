package llama

import (
	"fmt"
	"sort"
	"strings"
)

// presets are decoder shapes built from the published config.json sizes of common checkpoints (no weights):
// for benchmarks and memory planning.
var presets = map[string]func() Config{
	// HuggingFaceTB/SmolLM2-135M: Llama, hidden 576, 30 layers, 9/3 heads, rope_theta 1e5, tied.
	"smollm2-135m": func() Config {
		c, _ := NewConfig("llama", 49152, 576, 1536, 30, 9, 3)
		c.RopeTheta, c.RMSNormEps, c.TieWordEmbeddings, c.MaxPositionEmbeddings = 100000, 1e-5, true, 8192
		return c
	},
	// Qwen/Qwen2.5-0.5B: hidden 896, 24 layers, 14/2 heads, intermediate 4864, vocab 151936, q/k/v biases, tied.
	"qwen2.5-0.5b": func() Config {
		c, _ := NewConfig("qwen2", 151936, 896, 4864, 24, 14, 2)
		c.RopeTheta, c.RMSNormEps, c.TieWordEmbeddings, c.MaxPositionEmbeddings = 1e6, 1e-6, true, 32768
		return c
	},
	// meta-llama/Llama-3.2-1B: hidden 2048, 16 layers, 32/8 heads × 64, intermediate 8192, vocab 128256,
	// llama3 rope scaling (factor 32, 1, 4, 8192), tied.
	"llama-3.2-1b": func() Config {
		c, _ := NewConfig("llama", 128256, 2048, 8192, 16, 32, 8)
		c.RopeTheta, c.RMSNormEps, c.TieWordEmbeddings, c.MaxPositionEmbeddings = 500000, 1e-5, true, 131072
		c.Rope = RopeScaling{Type: RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
		return c
	},
}

// PresetNames lists the preset shapes Preset knows.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the Config of a named checkpoint shape (PresetNames): smollm2-135m, qwen2.5-0.5b,
// llama-3.2-1b.
func Preset(name string) (Config, error) {
	f, ok := presets[strings.ToLower(name)]
	if !ok {
		return Config{}, fmt.Errorf("llama: unknown preset %q: want one of %s", name, strings.Join(PresetNames(), ", "))
	}
	return f(), nil
}
