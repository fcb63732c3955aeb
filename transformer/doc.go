// Package transformer holds tune's Transformer models: BERT's configuration, its layers with explicit Forward and
// Backward side by side (llm.c style: outputs, inputs, weights, then sizes; a shape comment on every buffer),
// the sequence-classification head, checkpoint loading and saving in Hugging Face's format, and the hooks LoRA
// uses to replace projections from outside.
//
// Shape legend: B batch, T sequence, N = B·T tokens, C hidden size, H heads, D = C/H head size, I intermediate
// size, V vocabulary, L labels. h is the pass's GEMM dtype: F32, or F16/BF16 under autocast.
//
// The simplest use loads a checkpoint and runs it:
//
//	m, report, err := transformer.LoadPretrained("bert-base-uncased", cpu.New(), transformer.LoadOptions{NumLabels: 2})
//	fmt.Print(report.Notice())                              // heads initialised fresh, unused tensors
//	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true}) // batch: a *loaders.Batch; out.Logits (B, L)
//
// Training is the trainer's job (BertForSequenceClassification is a trainer.Model); by hand one step is
//
//	m.SetPolicy(amp.BF16)
//	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true, Seed: seed})
//	err = m.Backward(1)                       // gradients += d(mean loss)/dθ
//	params, grads, segs := m.Trainable()      // one fused AdamW over flat buffers
//	m.WeightsUpdated()                        // the half weight copies are stale now
//
// Weights changed from outside a step are always seen: every autocast Forward casts the FP32 master weights
// afresh (PyTorch's autocast cache lives for one forward too) unless ForwardOptions.ReuseWeightCasts promises
// that nothing changed since the previous Forward, which only the trainer's accumulation windows and
// evaluation loops do. So a Param's Value edited through the Go API, Load, LoRA Merge/Unmerge or an optimizer
// step never leaves a stale half-precision copy behind; WeightsUpdated remains for callers that reuse casts.
//
// Debugging: ForwardOptions.Observe receives each module's output (bert.embeddings, bert.encoder.layer.i,
// bert.pooler, classifier) in Forward and the gradient with respect to it in Backward; tune debug nan and tune
// debug compare are built on it.
//
// Fresh models for training from scratch: NewBertForSequenceClassification(b, cfg, seed) initialises as
// transformers does (normal(0, initializer_range), zero biases, LayerNorm ones). A BertConfig comes from
// DefaultBertConfig (bert-base) or from a config.json through BertConfigFromHF; Problems lists every key a model
// cannot be built from (sizes, heads dividing hidden_size, dropout in [0, 1), hidden_act gelu), and sizes that
// would not fit in memory are a *SizeError before anything is allocated.
//
// Save writes config.json and model.safetensors with transformers' names, so from_pretrained loads the result;
// Load reads such a directory back into an existing model.
//
// Full control: Projections lists every Linear by its module path and ReplaceProjections swaps in another
// Projection (package lora's adapters); SetTrainable freezes parameters by name. A frozen weight gets no
// gradient, and its GEMM is skipped in backward. NamedParameters gives Hugging Face's names and order.
//
// Numerics (../shared/DESIGN.md, FACTS §1.2): master weights and their gradients are FP32; under autocast the
// GEMMs take half inputs with FP32 accumulation, LayerNorm, softmax and the losses are FP32, attention logits
// and probabilities stay FP32 until the P·V product, GELU/tanh/dropout keep their input's dtype, and residual
// adds of half and FP32 give FP32. Every activation backward needs lives in a step arena (Arena) carved per
// batch shape, so a steady-state training step allocates nothing.
package transformer
