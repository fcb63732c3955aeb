package trainer_test

import (
	"context"
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// parity is a toy labelled dataset held in memory: label 1 when the sequence's middle token is odd. Any type
// with Len and Batch is a trainer.Dataset.
type parity struct{ n int }

func (d parity) Len() int { return d.n }

func (d parity) Batch(idx []int) (*loaders.Batch, error) {
	const t = 4
	b := &loaders.Batch{B: len(idx), T: t}
	for _, i := range idx {
		mid := int32(5 + i%20)
		b.InputIDs = append(b.InputIDs, 2, mid, mid+1, 3) // [CLS] x y [SEP]
		b.TokenTypeIDs = append(b.TokenTypeIDs, 0, 0, 0, 0)
		b.AttentionMask = append(b.AttentionMask, 1, 1, 1, 1)
		b.Labels = append(b.Labels, int64(mid%2))
	}
	return b, nil
}

// The package tour's simplest use on a tiny BERT: train, evaluate, save.
func Example() {
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 32, 16, 1, 2, 32
	cfg.MaxPositionEmbeddings = 8
	model, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "trainer-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	args := trainer.DefaultTrainingArguments()
	args.OutputDir, args.MaxSteps, args.PerDeviceTrainBatchSize = dir, 6, 8
	args.LearningRate, args.LoggingSteps, args.SaveStrategy = 1e-3, 3, trainer.IntervalNo
	t, err := trainer.New(model, args, parity{n: 40}, parity{n: 16},
		trainer.WithOutput(io.Discard), trainer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()
	out, err := t.Train(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	metrics, err := t.Evaluate(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := t.SaveModel(dir); err != nil {
		fmt.Println(err)
		return
	}
	_, hasLoss := metrics["eval_loss"]
	_, hasAccuracy := metrics["eval_accuracy"]
	st := t.State()
	fmt.Println("steps:", out.GlobalStep, "logged:", len(st.LogHistory) > 0, "eval:", hasLoss, hasAccuracy)
	for _, name := range []string{trainer.MetricsName, trainer.TrainerStateName, "config.json", "model.safetensors"} {
		_, err := os.Stat(filepath.Join(dir, name))
		fmt.Println(name, err == nil)
	}
	// Output:
	// steps: 6 logged: true eval: true true
	// metrics.jsonl true
	// trainer_state.json true
	// config.json true
	// model.safetensors true
}
