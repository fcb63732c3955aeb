package bert_test

import (
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"os"
	"slices"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

// A fresh tiny BERT saved in Hugging Face's format, loaded back with LoadPretrained, run forward, and trained
// for one step by hand (the trainer's job otherwise).
func Example() {
	b := cpu.New()
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 32, 16, 2, 2, 32
	cfg.MaxPositionEmbeddings = 8
	cfg.ID2Label = []string{"negative", "positive"}
	m, err := bert.NewBertForSequenceClassification(b, cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "transformer-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := m.Save(dir); err != nil { // config.json + model.safetensors
		fmt.Println(err)
		return
	}

	loaded, report, err := bert.LoadPretrained(dir, b, transformer.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d parameters loaded, notice %q, labels %v\n", len(loaded.NamedParameters()), report.Notice(),
		loaded.Config.ID2Label)

	batch := &loaders.Batch{B: 2, T: 4, InputIDs: []int32{2, 7, 9, 3, 2, 11, 3, 0},
		TokenTypeIDs: make([]int32, 8), AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0}, Labels: []int64{1, 0}}
	a, _ := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	c, _ := loaded.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	fmt.Println("logits (B, L):", len(c.Logits), "=", batch.B, "×", c.NumLabels,
		"same as saved:", slices.Equal(a.Logits, c.Logits))

	loaded.SetPolicy(amp.BF16)
	out, err := loaded.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true, Seed: 7})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := loaded.Backward(1); err != nil { // gradients += d(mean loss)/dθ
		fmt.Println(err)
		return
	}
	params, grads, segs := loaded.Trainable()
	fmt.Println("loss > 0:", out.Loss > 0, "flat buffers:", params.Numel() == grads.Numel(), len(segs) > 0)
	// Output:
	// 41 parameters loaded, notice "", labels [negative positive]
	// logits (B, L): 4 = 2 × 2 same as saved: true
	// loss > 0: true flat buffers: true true
}
