// Package transformer holds what every model family of tune shares: the one model contract (Model, the
// trainer's and LoRA's view of a model; Adaptable, what LoRA adapts), the family registry keyed by config.json's
// model_type (Register, Lookup, Open), and the layers with explicit Forward and Backward side by side (llm.c
// style: outputs, inputs, weights, then sizes; a shape comment on every buffer): Linear and the Projection hook
// LoRA replaces from outside, LayerNorm, self-attention, the encoder Layer, the parameter packing (ParamGroups)
// and the step arena (Arena). The families live in their own packages: transformer/bert (BERT's sequence
// classifier) and the causal language models.
//
// Shape legend: B batch, T sequence, N = B·T tokens, C hidden size, H heads, D = C/H head size, I intermediate
// size, V vocabulary, L labels. h is the pass's GEMM dtype: F32, or F16/BF16 under autocast.
//
// A checkpoint of any registered family opens through the registry (the family's package must be imported):
//
//	m, report, err := transformer.Open(dir, cpu.New(), transformer.LoadOptions{})
//	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
//
// Weights changed from outside a step are always seen: every autocast Forward casts the FP32 master weights
// afresh (PyTorch's autocast cache lives for one forward too) unless ForwardOptions.ReuseWeightCasts promises
// that nothing changed since the previous Forward, which only the trainer's accumulation windows and
// evaluation loops do. So a Param's Value edited through the Go API, Load, LoRA Merge/Unmerge or an optimizer
// step never leaves a stale half-precision copy behind; WeightsUpdated remains for callers that reuse casts.
//
// Frozen projection weights can instead be stored once in the autocast dtype (ModelCore.StoreFrozenIn, which
// the trainer calls before training under FP16/BF16): the GEMMs read them directly, with no FP32 copy, no
// per-step cast, no gradient and no optimizer state, and compute exactly what the per-step cast computed. Their
// FP32 values are then gone: they save as their rounded values, and a Forward under FP32 or the other half
// dtype refuses (reload the model for that).
//
// Generation: a causal LM that is an IncrementalDecoder decodes with a KVCache it allocates for the caller's
// maximum length (NewKVCache): Decode runs the prompt once, storing each layer's keys and values, then one
// token per call through the same layers, its query attending to the cached keys through the fused op
// (causal, aligned bottom-right for Tq < Tk). Package generate drives it.
//
// Debugging: ForwardOptions.Observe receives each module's output (bert.embeddings, bert.encoder.layer.i,
// bert.pooler, classifier) in Forward and the gradient with respect to it in Backward; tune debug nan and tune
// debug compare are built on it.
//
// Numerics (PyTorch autocast, aten/src/ATen/autocast_mode.cpp): master weights and their gradients are FP32; under autocast the
// GEMMs take half inputs with FP32 accumulation, LayerNorm, softmax and the losses are FP32, attention logits
// and probabilities stay FP32 until the P·V product, GELU/tanh/dropout keep their input's dtype, and residual
// adds of half and FP32 give FP32. Every activation backward needs lives in a step arena (Arena) carved per
// batch shape, so a steady-state training step allocates nothing; Arena.Measure sizes a layout without
// allocating it (tune bench --plan).
//
// Attention (attn_implementation, as transformers names it; AttnChoice): "sdpa", the default, runs the
// backend's fused op (tensor.Backend.Attention, docs/ATTENTION.md) on the projections' outputs in place —
// RowHeads turns (B, T, ld) rows into the op's strided (B, H, T, D) operands, so there is no head permute and
// no (B, H, T, T) buffer; "eager" is the two-pass path (Gemm → Softmax → Dropout → Gemm), the reference, taken
// automatically with one logged warning when the backend answers tensor.ErrUnsupported for a shape. Both draw
// attention dropout from the same Philox elements.
package transformer
