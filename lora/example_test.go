package lora_test

import (
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"os"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

// The package tour on a tiny BERT: adapt query and value with r = 4, report what trains, save the adapter in
// PEFT's format, load it onto a fresh base, and merge it.
func Example() {
	b := cpu.New()
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 32, 16, 2, 2, 32
	cfg.MaxPositionEmbeddings = 16
	cfg.ID2Label = []string{"negative", "positive"}
	base, err := bert.NewBertForSequenceClassification(b, cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}

	lc := lora.DefaultConfig()
	lc.R, lc.LoraAlpha = 4, 8 // scaling = lora_alpha/r = 2
	lc.TargetModules = lora.TargetModules{Names: []string{"query", "value"}}
	lc.TaskType = lora.TaskSeqCls        // the classifier is trained and saved with the adapter
	lc.InitLoraWeights = lora.InitRandom // B non-zero, so the merge below changes the weights
	m, err := lora.Apply(base, lc, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, path := range m.Targets() {
		fmt.Println(path)
	}
	fmt.Println(lora.TrainableReport(m))

	dir, err := os.MkdirTemp("", "lora-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := m.Save(dir); err != nil {
		fmt.Println(err)
		return
	}
	labels, _ := lora.SavedLabels(dir)
	fresh, _ := bert.NewBertForSequenceClassification(b, cfg, 1) // the same base weights
	loaded, err := lora.LoadAdapter(fresh, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(labels, len(loaded.Targets()), "adapted modules loaded")

	batch := &loaders.Batch{B: 1, T: 4, InputIDs: []int32{2, 7, 9, 3}, TokenTypeIDs: make([]int32, 4),
		AttentionMask: []int32{1, 1, 1, 1}}
	before, _ := loaded.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err := loaded.Merge(); err != nil {
		fmt.Println(err)
		return
	}
	after, _ := loaded.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	diff := 0.0
	for i := range before.Logits {
		diff = math.Max(diff, math.Abs(float64(before.Logits[i]-after.Logits[i])))
	}
	fmt.Println("merged:", loaded.Merged(), "logits agree:", diff < 1e-5)
	// Output:
	// bert.encoder.layer.0.attention.self.query
	// bert.encoder.layer.0.attention.self.value
	// bert.encoder.layer.1.attention.self.query
	// bert.encoder.layer.1.attention.self.value
	// trainable params: 546 || all params: 6,132 || trainable%: 8.9041
	// [negative positive] 4 adapted modules loaded
	// merged: true logits agree: true
}
