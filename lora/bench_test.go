package lora

import (
	"github.com/tune-ml/tune/transformer/bert"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/trainer"
)

// memBackend tracks the bytes of the live buffers allocated through it.
type memBackend struct {
	tensor.Backend
	live  map[*tensor.Tensor]int
	bytes int
}

func newMemBackend(b tensor.Backend) *memBackend {
	return &memBackend{Backend: b, live: map[*tensor.Tensor]int{}}
}

func (m *memBackend) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	t, err := m.Backend.Alloc(dt, shape...)
	if err == nil {
		m.live[t] = t.Bytes()
		m.bytes += t.Bytes()
	}
	return t, err
}

func (m *memBackend) Free(t *tensor.Tensor) {
	if n, ok := m.live[t]; ok {
		m.bytes -= n
		delete(m.live, t)
	}
	m.Backend.Free(t)
}

// benchConfig is tiny-bert-random's shape (../shared/data/tiny-bert-random): V 30522, C 64, 2 layers, 4 heads,
// I 128, 2 labels, with BERT's default dropout 0.1 on.
func benchConfig() bert.BertConfig {
	c := bert.DefaultBertConfig()
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 64, 2, 4, 128
	return c
}

// benchStep measures one optimizer step (zero-grad, forward, backward, AdamW) on a batch of 8 × 64 tokens, and
// reports the step time, tokens/s, and the backend bytes of parameters + gradients + AdamW state ("state-B",
// measured before the first step) and of everything live after a step ("live-B": that plus the activation arena).
func benchStep(b *testing.B, adapt bool) {
	mem := newMemBackend(cpuBackend())
	cfg := benchConfig()
	base, err := bert.NewBertForSequenceClassification(mem, cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	var m trainer.Model = base
	if adapt {
		lm, err := Apply(base, seqCls(), 1)
		if err != nil {
			b.Fatal(err)
		}
		m = lm
	}
	opt, err := trainer.NewAdamW(m, 0.9, 0.999, 1e-8, 0.01)
	if err != nil {
		b.Fatal(err)
	}
	state := mem.bytes
	batch := testBatch(8, 64, cfg.VocabSize, []int{64, 60, 52, 64, 33, 48, 64, 17})
	run := func(i int) {
		if err := m.ZeroGrad(); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Forward(batch, trainer.ForwardOptions{Train: true, Seed: uint64(i)}); err != nil {
			b.Fatal(err)
		}
		if err := m.Backward(1); err != nil {
			b.Fatal(err)
		}
		if err := opt.Step(1e-4); err != nil {
			b.Fatal(err)
		}
		m.WeightsUpdated()
	}
	run(0) // carves the arena
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(i + 1)
	}
	b.StopTimer()
	trainable, all := 0, 0
	for _, np := range m.NamedParameters() {
		all += np.Value.Numel()
		if np.Trainable {
			trainable += np.Value.Numel()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/step")
	b.ReportMetric(float64(8*64*b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(state), "state-B")
	b.ReportMetric(float64(mem.bytes), "live-B")
	b.ReportMetric(float64(trainable), "trainable-params")
	b.ReportMetric(float64(all), "params")
}

// BenchmarkLoRAStep is a training step of tiny-bert-random's shape with LoRA r 4 on query/value and the head
// (SEQ_CLS with the classifier in modules_to_save, peft/utils/save_and_load.py): only the adapters and the classifier have gradients and AdamW state.
func BenchmarkLoRAStep(b *testing.B) { benchStep(b, true) }

// BenchmarkFullStep is the same step with every parameter trained (the baseline for BenchmarkLoRAStep).
func BenchmarkFullStep(b *testing.B) { benchStep(b, false) }
