package transformer_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/meta"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/bert"
	_ "github.com/tune-ml/tune/transformer/gpt2"
	_ "github.com/tune-ml/tune/transformer/llama"
)

// TestProjectionPathsMatchBuiltModel checks that each family's ProjectionPaths, read from config.json alone,
// lists the same module paths, in the same order, as the loaded model's Projections: what a recipe's
// lora.target_modules is checked against before loading is what LoRA will match after.
func TestProjectionPathsMatchBuiltModel(t *testing.T) {
	for _, dir := range [][]string{
		{"bert", "saved_by_tune"},
		{"gpt2", "tiny"},
		{"decoder", "ckpt", "qwen2_v4_f32"},
		{"decoder", "ckpt", "mistral_sharded_f16"},
	} {
		p := testutil.Testdata(t, dir...)
		t.Run(dir[len(dir)-1], func(t *testing.T) {
			got, err := transformer.ProjectionPaths(p)
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := transformer.Open(p, cpu.New(), transformer.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, mp := range m.Projections() {
				want = append(want, mp.Path)
			}
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("ProjectionPaths from config.json:\n%q\nthe built model's Projections:\n%q", got, want)
			}
			// Skeleton, on the meta backend, has the same projections with the same sizes (what lora.CheckRank
			// measures before loading).
			sk, err := transformer.Skeleton(p, meta.New(nil))
			if err != nil {
				t.Fatal(err)
			}
			shape := func(m transformer.Adaptable) (s []string) {
				for _, mp := range m.Projections() {
					s = append(s, fmt.Sprintf("%s %d→%d", mp.Path, mp.Projection.Base().In, mp.Projection.Base().Out))
				}
				return s
			}
			if got, want := shape(sk), shape(m); !slices.Equal(got, want) {
				t.Fatalf("Skeleton's projections:\n%q\nthe built model's:\n%q", got, want)
			}
		})
	}
}
