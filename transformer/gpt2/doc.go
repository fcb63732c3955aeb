// Package gpt2 is tune's GPT-2 family: transformers' GPT2LMHeadModel (learned position embeddings,
// pre-LayerNorm blocks with a fused c_attn projection and tanh-approximate GELU, a language-model head tied to
// the token embeddings) with its configuration (Config, read from and written to config.json), checkpoint
// loading and saving in Hugging Face's format, and the builder. It registers itself for config.json's
// model_type "gpt2" (transformer.Open).
//
// Shape legend: B batch, T sequence, N = B·T tokens, C = n_embd, H = n_head, D = C/H, I = n_inner (4·C),
// V = vocab_size, P = n_positions. h is the pass's GEMM dtype: F32, or F16/BF16 under autocast.
//
// The simplest use loads a checkpoint and runs it:
//
//	m, report, err := gpt2.LoadPretrained("gpt2", cpu.New(), transformer.LoadOptions{})
//	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true}) // out.Logits (B, T, V)
//
// With (B, T) labels in the batch Forward also returns the shifted next-token loss (labels[:, 1:] predicted
// from positions :−1, −100 ignored), and Backward(seed) back-propagates it; training is the trainer's job
// (GPT2LMHeadModel is a transformer.Model).
//
// Attention is the fused op (tensor.Backend.Attention) with the causal flag, reading Q, K and V in place from
// c_attn's (N, 3C) output; a backend without a kernel for the head size returns an error wrapping
// tensor.ErrUnsupported. The loss is transformer.CausalLMHead's chunked cross-entropy, so the (N, V) logits are
// never held in FP32 at once.
//
// Conv1D weights (c_attn, c_proj, c_fc) are stored (in, out) in checkpoints, as transformers stores them, and
// held (out, in) in memory like every transformer.Linear; LoRA adapters (PEFT's default target for GPT-2 is
// c_attn, with fan_in_fan_out) are therefore the same code as for any Linear.
package gpt2
