package generate

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/gpt2"
)

// openModel opens a checkpoint directory of the repository (a path relative to its root) on b.
func openModel(t testing.TB, b tensor.Backend, rel ...string) transformer.Model {
	t.Helper()
	dir := filepath.Join(append([]string{".."}, rel...)...)
	m, _, err := transformer.Open(dir, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCachedGreedyEqualsUncached: on the embedded tiny-chat Llama, the tiny Llama of testdata/sft and the tiny
// GPT-2, greedy generation with the key/value cache gives the tokens of generation without it, on every
// backend the tokens the CPU gives (FP32), over long continuations (the GPT-2 one up to its n_positions) from
// prompts of one and several tokens.
func TestCachedGreedyEqualsUncached(t *testing.T) {
	for _, c := range []struct {
		rel    []string
		prompt []int32
		n      int
	}{
		{[]string{"recipes", "data", "tiny-chat"}, []int32{1, 40, 41, 300, 7, 12}, 60},
		{[]string{"recipes", "data", "tiny-chat"}, []int32{1}, 40},
		{[]string{"testdata", "sft", "tiny-llama"}, []int32{1, 5, 9}, 50},
		{[]string{"testdata", "gpt2", "tiny"}, []int32{3, 17, 40}, 29},
	} {
		t.Run(fmt.Sprintf("%s/prompt%d", c.rel[len(c.rel)-1], len(c.prompt)), func(t *testing.T) {
			o := Options{MaxNewTokens: c.n}
			ref, err := Generate(openModel(t, cpu.New(), c.rel...), c.prompt, o, nil)
			if err != nil || len(ref) != c.n {
				t.Fatalf("CPU without the cache: %v %v", ref, err)
			}
			tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
				m := openModel(t, b, c.rel...)
				if _, ok := m.(transformer.IncrementalDecoder); !ok {
					t.Fatalf("%T has no key/value cache", m)
				}
				for _, cached := range []bool{true, false} {
					o.UseCache = cached
					out, err := Generate(m, c.prompt, o, nil)
					if err != nil || !slices.Equal(out, ref) {
						t.Errorf("use_cache %v: %v (%v)\nCPU uncached %v", cached, out, err, ref)
					}
				}
			})
		})
	}
}

// BenchmarkGenerate measures greedy generation of 64 tokens after a 32-token prompt with the tiny-chat Llama
// on every backend, FP32 and BF16 autocast, with the key/value cache and without it (each step rerunning
// the whole sequence): tokens/s.
//
//	go test ./generate -run '^$' -bench Generate
func BenchmarkGenerate(b *testing.B) {
	prompt := make([]int32, 32)
	for i := range prompt {
		prompt[i] = int32(3 + 7*i%700)
	}
	for _, f := range tensor.Backends() {
		bk, err := f.Open()
		if err != nil {
			continue
		}
		m := openModel(b, bk, "recipes", "data", "tiny-chat")
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
			for _, cached := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/%s", f.Name, pol.Precision(), map[bool]string{true: "cache", false: "nocache"}[cached])
				b.Run(name, func(b *testing.B) {
					m.SetPolicy(pol)
					o := Options{MaxNewTokens: 64, UseCache: cached}
					if _, err := Generate(m, prompt, Options{MaxNewTokens: 2, UseCache: cached}, nil); err != nil {
						b.Fatal(err) // warm-up outside the timing (b.Loop resets the timer)
					}
					n := 0
					for b.Loop() {
						out, err := Generate(m, prompt, o, nil)
						if err != nil {
							b.Fatal(err)
						}
						n += len(out)
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
				})
			}
		}
	}
}
