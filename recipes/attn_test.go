package recipes

import (
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// TestAttnImplementation: model.attn_implementation reaches the model ("sdpa" by default, "eager" when set,
// for a new model), and an unknown value is a problem naming the key and the values.
func TestAttnImplementation(t *testing.T) {
	if _, err := decode(minimal(""), "model.attn_implementation=flash_attention_2"); err == nil ||
		!strings.Contains(err.Error(), `model.attn_implementation: "flash_attention_2" is not supported: use "sdpa"`) {
		t.Fatalf("an unknown attn_implementation: %v", err)
	}
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0", "1", "0")
	for _, impl := range []string{"", transformer.AttnEager, transformer.AttnSDPA} {
		r := labelRecipe(t, dir, "")
		r.Model.AttnImplementation = impl
		run, err := Build(r, cpu.New(), trainer.WithOutput(nil))
		if err != nil {
			t.Fatal(err)
		}
		want := impl
		if want == "" {
			want = transformer.AttnSDPA
		}
		if got := run.Base.AttnImplementation(); got != want {
			t.Errorf("model.attn_implementation %q: the model runs %q", impl, got)
		}
		run.Trainer.Close()
	}
}
