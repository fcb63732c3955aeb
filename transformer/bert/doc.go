// Package bert is tune's BERT family: transformers' BertForSequenceClassification with its configuration
// (BertConfig and its codec from config.json), the embeddings with token types, the pooler and the
// classification head, checkpoint loading and saving in Hugging Face's format, and the builder. The layers it is
// made of (Linear, LayerNorm, self-attention, the encoder Layer, the step arena) are package transformer's; the
// family registers itself for config.json's model_type "bert" (transformer.Open).
//
// Shape legend: B batch, T sequence, N = B·T tokens, C hidden size, H heads, D = C/H head size, I intermediate
// size, V vocabulary, L labels. h is the pass's GEMM dtype: F32, or F16/BF16 under autocast.
//
// The simplest use loads a checkpoint and runs it:
//
//	m, report, err := bert.LoadPretrained("bert-base-uncased", cpu.New(), transformer.LoadOptions{NumLabels: 2})
//	fmt.Print(report.Notice())                                                 // heads initialised fresh, unused tensors
//	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true}) // batch: a *loaders.Batch; out.Logits (B, L)
//
// Training is the trainer's job (BertForSequenceClassification is a transformer.Model); by hand one step is
//
//	m.SetPolicy(amp.BF16)
//	out, err := m.Forward(batch, transformer.ForwardOptions{Train: true, Seed: seed})
//	err = m.Backward(1)                       // gradients += d(mean loss)/dθ
//	params, grads, segs := m.Trainable()      // one fused AdamW over flat buffers
//	m.WeightsUpdated()                        // the half weight copies are stale now
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
// gradient, and its GEMM is skipped in backward. NamedParameters gives Hugging Face's names and order; only the
// flat buffers order them otherwise: each layer's query, key and value weights lie together, then their biases,
// so that attention runs them as one packed GEMM each way (transformer.LinearStack, LoRA adapters included).
package bert
