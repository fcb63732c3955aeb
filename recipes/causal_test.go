package recipes

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer/gpt2"
)

// TestTinyChatRecipe builds the embedded SFT default (a tiny Llama on chat data) and trains a few steps: the
// data are messages with assistant-only labels, packed, and the loss falls.
func TestTinyChatRecipe(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	r, err := Load("tiny-chat", []string{"training.output_dir=" + out, "training.max_steps=12", "training.logging_steps=4",
		"training.eval_strategy=no", "data.eval=null"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckFiles(); err != nil {
		t.Fatal(err)
	}
	if !r.IsCausalLM() {
		t.Fatal("tiny-chat is not recognised as a causal LM recipe")
	}
	run, err := Build(r, cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Trainer.Close()
	if run.Causal == nil || run.Base != nil || run.SFTTrain == nil || run.SFTTrain.Format != "messages" {
		t.Fatalf("run %+v", run)
	}
	if run.TrainLen() >= len(run.SFTTrain.Examples) {
		t.Fatalf("packing left %d rows for %d examples", run.TrainLen(), len(run.SFTTrain.Examples))
	}
	res, err := run.Trainer.Train(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, l := range run.Trainer.State().LogHistory {
		if v, ok := l["loss"]; ok {
			losses = append(losses, v)
		}
	}
	if len(losses) < 2 || math.IsNaN(res.TrainingLoss) || !(losses[len(losses)-1] < losses[0]) {
		t.Fatalf("losses %v (train_loss %v)", losses, res.TrainingLoss)
	}
	t.Logf("losses %v", losses)
}

// TestDecoderRecipes runs llama-lora, qwen-lora and gpt2-full for a few steps on tiny checkpoints in place of
// the real ones (the tiny Llama of data/tiny-chat; a random 1-layer GPT-2 with the tiny GPT-2 tokenizer).
func TestDecoderRecipes(t *testing.T) {
	gpt := t.TempDir()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NPositions, cfg.NEmbd, cfg.NLayer, cfg.NHead = 702, 1024, 32, 1, 2
	m, err := gpt2.NewGPT2LMHeadModel(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(gpt); err != nil {
		t.Fatal(err)
	}
	tj, err := os.ReadFile(filepath.Join("..", "testdata", "bpe", "tiny-gpt2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(gpt, "tokenizer.json"), tj, 0o644)
	os.WriteFile(filepath.Join(gpt, "tokenizer_config.json"), []byte(`{"eos_token":"<|endoftext|>"}`), 0o644)
	for _, c := range []struct{ name, model, format string }{
		{"llama-lora", filepath.Join("data", "tiny-chat"), "text"},
		{"qwen-lora", filepath.Join("data", "tiny-chat"), "messages"},
		{"gpt2-full", gpt, "text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Load(c.name, []string{"model.path=" + c.model, "training.output_dir=" + filepath.Join(t.TempDir(), "out"),
				"training.max_steps=3", "training.bf16=false", "training.eval_strategy=no", "data.eval=null",
				"training.save_strategy=no", "data.max_length=128", "training.logging_steps=1"})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.CheckFiles(); err != nil {
				t.Fatal(err)
			}
			run, err := Build(r, cpu.New())
			if err != nil {
				t.Fatal(err)
			}
			defer run.Trainer.Close()
			if run.SFTTrain.Format != c.format {
				t.Errorf("format %q, want %q", run.SFTTrain.Format, c.format)
			}
			res, err := run.Trainer.Train(context.Background())
			if err != nil || math.IsNaN(res.TrainingLoss) || res.GlobalStep != 3 {
				t.Fatalf("%+v %v", res, err)
			}
		})
	}
}
