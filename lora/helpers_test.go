package lora

import (
	"github.com/tune-ml/tune/transformer/bert"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer/detweights"
)

// tinyConfig is the reference goldens' tiny BERT shape (tools/reference) with a small vocabulary: C 64, 2 layers, 4 heads, I 128 (so
// intermediate.dense is the non-square 64→128 of B28), V 96, 2 labels, dropout off.
func tinyConfig() bert.BertConfig {
	c := bert.DefaultBertConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 96, 64, 2, 4, 128
	c.MaxPositionEmbeddings = 32
	c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0, 0
	return c
}

// newBase builds a tiny BERT on b with detweights values from seed in every parameter.
func newBase(t testing.TB, b tensor.Backend, cfg bert.BertConfig, seed uint64) *bert.BertForSequenceClassification {
	t.Helper()
	m, err := bert.NewBertForSequenceClassification(b, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.NamedParameters() {
		if err := b.Upload(np.Value, detweights.Values(seed, np.Name, np.Value.Shape)); err != nil {
			t.Fatalf("%s: %v", np.Name, err)
		}
	}
	m.WeightsUpdated()
	return m
}

// seqCls returns the reference goldens' LoRA config: r 4, alpha 8, target [query, value], task SEQ_CLS.
func seqCls() Config {
	c := DefaultConfig()
	c.R, c.LoraAlpha, c.TaskType = 4, 8, TaskSeqCls
	c.TargetModules = TargetModules{Names: []string{"query", "value"}}
	return c
}

// setParams overwrites every parameter of m whose name passes pick with detweights values from seed (a
// "trained" adapter: B non-zero, a changed head).
func setParams(t testing.TB, m trainer.Model, seed uint64, pick func(name string) bool) {
	t.Helper()
	for _, np := range m.NamedParameters() {
		if pick(np.Name) {
			if err := m.Backend().Upload(np.Value, detweights.Values(seed, np.Name, np.Value.Shape)); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.WeightsUpdated()
}

// trained reports the parameters a training run changes in a LoRA model: the adapters and the head.
func trained(name string) bool {
	return strings.Contains(name, ".lora_") || strings.HasPrefix(name, "classifier.")
}

// testBatch returns a (b, t) batch whose row i has lens[i] real tokens ([CLS] … [SEP] shape not needed: ids
// drawn deterministically from [1, vocab)), then padding id 0, token types 1 on the second half, labels i%2.
func testBatch(b, t, vocab int, lens []int) *loaders.Batch {
	bt := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), TokenTypeIDs: make([]int32, b*t),
		AttentionMask: make([]int32, b*t), Labels: make([]int64, b)}
	x := uint64(4242)
	for i := range b {
		for j := range lens[i] {
			x = detweights.SplitMix64(x)
			bt.InputIDs[i*t+j] = int32(1 + x%uint64(vocab-1))
			bt.AttentionMask[i*t+j] = 1
			if j >= lens[i]/2 {
				bt.TokenTypeIDs[i*t+j] = 1
			}
		}
		bt.Labels[i] = int64(i % 2)
	}
	return bt
}

// forward runs an evaluation forward and returns the logits.
func forward(t testing.TB, m trainer.Model, batch *loaders.Batch) []float32 {
	t.Helper()
	out, err := m.Forward(batch, trainer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	return out.Logits
}

// step zeroes the gradients, runs a training Forward and Backward(1), and returns the loss.
func step(t testing.TB, m trainer.Model, batch *loaders.Batch, seed uint64) float32 {
	t.Helper()
	if err := m.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(batch, trainer.ForwardOptions{HostLogits: true, Train: true, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	return out.Loss
}

// param returns the named parameter of m.
func param(t testing.TB, m trainer.Model, name string) trainer.NamedParam {
	t.Helper()
	for _, np := range m.NamedParameters() {
		if np.Name == name {
			return np
		}
	}
	t.Fatalf("no parameter %s", name)
	return trainer.NamedParam{}
}

// relErr is max|a−b| / max|b| (the absolute difference when b is all zero); see tensortest.RelErr.
func relErr(a, b []float32) float64 {
	e, _ := tensortest.RelErr(a, b)
	return e
}

func cpuBackend() tensor.Backend { return cpu.New() }
