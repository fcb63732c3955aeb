package recipes

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
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
