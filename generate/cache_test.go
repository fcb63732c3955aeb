package generate

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/gpt2"
)

// openModel opens a checkpoint directory of the repository on the CPU.
func openModel(t testing.TB, rel ...string) (transformer.Model, string) {
	t.Helper()
	dir := filepath.Join(append([]string{".."}, rel...)...)
	m, _, err := transformer.Open(dir, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// TestCachedGreedyEqualsUncached: on the embedded tiny-chat Llama, the tiny GPT-2 and the tiny Llama of
// testdata/sft, greedy generation with the key/value cache gives the tokens of generation without it, over
// long continuations (the GPT-2 one up to its n_positions), from prompts of one and several tokens.
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
			m, _ := openModel(t, c.rel...)
			if _, ok := m.(transformer.IncrementalDecoder); !ok {
				t.Fatalf("%T has no key/value cache", m)
			}
			o := Options{MaxNewTokens: c.n}
			plain, err := Generate(m, c.prompt, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			o.UseCache = true
			cached, err := Generate(m, c.prompt, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(plain) != c.n || !slices.Equal(plain, cached) {
				t.Errorf("cached %v\nuncached %v", cached, plain)
			}
		})
	}
}

// BenchmarkGenerate measures greedy generation of 64 tokens after a 32-token prompt with the tiny-chat Llama
// on the CPU, with the key/value cache and without it (each step rerunning the whole sequence): tokens/s.
func BenchmarkGenerate(b *testing.B) {
	m, _ := openModel(b, "recipes", "data", "tiny-chat")
	prompt := make([]int32, 32)
	for i := range prompt {
		prompt[i] = int32(3 + 7*i%700)
	}
	for _, cached := range []bool{true, false} {
		b.Run(map[bool]string{true: "cache", false: "nocache"}[cached], func(b *testing.B) {
			o := Options{MaxNewTokens: 64, UseCache: cached}
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
