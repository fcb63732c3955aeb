// Package llama is tune's Llama family of decoder-only causal language models in one parameterised model,
// ForCausalLM: transformers' LlamaForCausalLM, Qwen2ForCausalLM (q/k/v biases), Qwen3ForCausalLM (q/k RMSNorm
// before RoPE, explicit head_dim) and MistralForCausalLM (a sliding window no shorter than the sequence). It
// registers itself for config.json's model_type llama, qwen2, qwen3 and mistral (transformer.Open).
//
// Shape legend: B batch, T sequence, N = B·T tokens, C hidden size, Hq query heads, Hkv key/value heads, D head
// size (head_dim), I intermediate size, V vocabulary. h is the pass's GEMM dtype: F32, or F16/BF16 under
// autocast.
//
// The model (models/llama/modeling_llama.py): embed_tokens; per layer x += o_proj(attn(input_layernorm(x))),
// x += down_proj(silu(gate_proj(n))·up_proj(n)) with n = post_attention_layernorm(x); norm; lm_head (tied to
// embed_tokens when tie_word_embeddings, the shared weight's gradient summing both uses). Attention is causal
// grouped-query attention through the fused op (tensor.Backend.Attention with Causal set; padding is an
// additive key mask, packed rows are segments); rotary embeddings rotate halves (apply_rotary_pos_emb) with
// cos/sin tables computed in FP32 on the host for the default and llama3 rope types.
//
// Numerics under autocast follow PyTorch's: the residual stream and RMSNorm are FP32 (RMSNorm rounds its
// normalised value to the input's dtype before the weight multiply, as LlamaRMSNorm does); projections,
// attention and SwiGLU run in the GEMM dtype with FP32 accumulation; the loss reads the half logits in FP32.
//
// Loss: labels are (B, T) token ids with −100 for tokens without loss; the model shifts them (position t
// predicts label t+1, as ForCausalLMLoss does) and the loss is the sum over supervised tokens divided by
// Supervised(batch), which the trainer sums over an accumulation window. The LM head runs chunk by chunk
// (transformer.CausalLMHead: ChunkElems logits at a time), so the (N, V) logits are never held whole; Backward recomputes each chunk's
// logits instead of keeping them.
//
// Checkpoints: config.json in transformers 4's layout (rope_theta, rope_scaling, torch_dtype) or 5's
// (rope_parameters, dtype); model.safetensors or a sharded index, F32/F16/BF16. Save writes F32 weights,
// sharded above DefaultMaxShardBytes (SaveSharded takes the limit), and keeps generation_config.json.
// Unsupported options (another rope type, partial rotary, attention dropout, hidden_act other than silu) and
// weights that do not match the config are errors naming the key or tensors.
//
//	m, report, err := llama.LoadPretrained(dir, cpu.New(), transformer.LoadOptions{})
//	out, err := m.Forward(batch, transformer.ForwardOptions{Train: true}) // batch.Labels (B, T)
//	err = m.Backward(1)
package llama
