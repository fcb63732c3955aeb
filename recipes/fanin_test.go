package recipes

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer/gpt2"
)

// TestFanInFanOutFollowsTheModel: on GPT-2, whose projections are Conv1D, fan_in_fan_out true (what PEFT
// prescribes there) got PEFT's Linear warning "Setting fan_in_fan_out to False" from the recipe, then the
// opposite Conv1D note from lora.Apply (findings5 #24). The recipe now normalizes for the model's module kind:
// true on GPT-2 passes silently, false gets the Conv1D note once; on BERT, true gets the Linear warning.
func TestFanInFanOutFollowsTheModel(t *testing.T) {
	gpt := t.TempDir()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NPositions, cfg.NEmbd, cfg.NLayer, cfg.NHead = 756, 64, 32, 1, 2
	m, err := gpt2.NewGPT2LMHeadModel(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(gpt); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join("data", "tiny-chat")
	for _, c := range []struct {
		recipe, model, fan, want string
	}{
		{"gpt2-full", gpt, "true", ""},
		{"gpt2-full", gpt, "false", lora.FanInFanOutConv1DWarning},
		{"bert", "", "true", lora.FanInFanOutWarning},
	} {
		over := []string{"lora={r: 4, lora_alpha: 8, target_modules: [c_attn], task_type: CAUSAL_LM, fan_in_fan_out: " + c.fan + "}",
			"training.output_dir=" + filepath.Join(t.TempDir(), "o")}
		if c.model != "" {
			over = append(over, "model.path="+c.model, "tokenizer.path="+tiny)
		} else {
			over[0] = "lora={r: 4, lora_alpha: 8, target_modules: [query], task_type: SEQ_CLS, fan_in_fan_out: " + c.fan + "}"
			over = append(over, "model.path="+filepath.Join("..", "testdata", "safetensors", "bert-tiny"), "tokenizer.path="+filepath.Join("data", "tiny", "vocab.txt"))
		}
		r, err := Load(c.recipe, over)
		if err != nil {
			t.Fatalf("%s fan_in_fan_out %s: %v", c.recipe, c.fan, err)
		}
		has := c.want != "" && slices.Contains(r.Warnings, c.want)
		if (c.want == "" && len(r.Warnings) > 0) || (c.want != "" && !has) || r.LoRA.FanInFanOut != (c.recipe == "gpt2-full") {
			t.Errorf("%s fan_in_fan_out %s: warnings %q, fan_in_fan_out now %v", c.recipe, c.fan, r.Warnings, r.LoRA.FanInFanOut)
		}
	}
}
