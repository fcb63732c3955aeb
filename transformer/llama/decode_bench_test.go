package llama

import (
	"fmt"
	"os"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/generate"
	"github.com/tune-ml/tune/tensor"
)

// BenchmarkGenerate measures greedy generation with a preset decoder shape (random weights) under BF16
// autocast: a 128-token prompt, then 128 new tokens, with the key/value cache and without it (each step
// rerunning the whole sequence); it reports the new tokens/s (prefill included). The backend is
// TUNE_BENCH_BACKEND (default "cuda", falling back to "cpu"), the preset TUNE_BENCH_PRESETS (default
// smollm2-135m). On the GPU machine, with a -tags cuda test binary:
//
//	llama.test -test.run '^$' -test.bench BenchmarkGenerate -test.benchtime 3x
func BenchmarkGenerate(b *testing.B) {
	want := os.Getenv("TUNE_BENCH_BACKEND")
	if want == "" {
		want = "cuda"
	}
	var bk tensor.Backend
	for _, f := range tensor.Backends() {
		if f.Name == want || (bk == nil && f.Name == "cpu") {
			if x, err := f.Open(); err == nil {
				bk = x
			}
		}
	}
	name := os.Getenv("TUNE_BENCH_PRESETS")
	if name == "" {
		name = "smollm2-135m"
	}
	cfg, err := Preset(name)
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(bk, cfg, 1)
	if err != nil {
		b.Skip(err)
	}
	m.SetPolicy(amp.BF16)
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32((i * 7919) % cfg.VocabSize)
	}
	for _, cached := range []bool{true, false} {
		b.Run(fmt.Sprintf("%s/%s/%s", bk.Name(), name, map[bool]string{true: "cache", false: "nocache"}[cached]), func(b *testing.B) {
			o := generate.Options{MaxNewTokens: 128, UseCache: cached}
			// Warm-up outside the timing (b.Loop resets the timer): kernels compile, casts and the arena settle.
			if _, err := generate.Generate(m, prompt, generate.Options{MaxNewTokens: 2, UseCache: cached}, nil); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				out, err := generate.Generate(m, prompt, o, nil)
				if err != nil {
					b.Fatal(err)
				}
				n += len(out)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
