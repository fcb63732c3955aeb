// Package bench measures tune's training step — the seed table of the project: step time, throughput and peak
// memory for FP32, FP16 and BF16, fully fine-tuned or with LoRA — in a form that lines up with the same
// measurement made in PyTorch (tools/reference/bench_pytorch.py writes the same JSON records).
//
// Simplest use, one configuration on a backend:
//
//	s := bench.DefaultSpec()                    // BERT-base, 32×128, BF16, 5 warm-up + 30 timed steps
//	lc := bench.LoRAConfig(8, []string{"query", "value"}) // r 8, lora_alpha 16 (omit for full fine-tuning)
//	s.LoRA = &lc
//	res, err := bench.Run(ctx, backend, s)      // *Result: median/p10/p90 ms, tokens/s, TFLOP/s, peak bytes
//	bench.WriteTable(os.Stdout, []bench.Result{*res})
//
// Results of several runs and implementations (ReadFile) are lined up per configuration by WriteComparison,
// checked against the goals by Targets, and drawn by Chart.
//
// # What one step is
//
// Run builds a freshly initialised bert.BertForSequenceClassification (random weights, no checkpoint),
// optionally adapted by lora.Apply, on a synthetic batch of B sequences of T real tokens (no padding) with
// random labels, and runs the trainer's optimizer step: Forward in training mode (dropout on), Backward seeded
// with the GradScaler's scale, GradScaler.Unscale (FP16), amp.ClipGradNorm(1.0), trainer.AdamW, GradScaler.Update,
// WeightsUpdated, ZeroGrad. A step is timed from before Forward to after ZeroGrad: with CUDA events on a CUDA
// backend (cuda.Backend.Time), with the wall clock on the CPU. The median of the timed steps is the step time;
// p10 and p90 show the spread (Percentile: numpy's linear interpolation).
//
// # How FLOPs are counted
//
// CountFLOPs counts the GEMMs of one step, 2 FLOPs per multiply-add, from the model as built (each projection's
// rows, shape, trainability and LoRA rank):
//
//	forward        Σ_proj 2·rows·in·out  + Σ_adapters 2·rows·r·(in+out)  + 4·B·L·T²·C  (QKᵀ and P·V)
//	input grads    Σ_proj 2·rows·in·out  + Σ_adapters 2·rows·r·(in+out)  + 8·B·L·T²·C
//	weight grads   Σ_trained 2·rows·in·out + Σ_adapters 2·rows·r·(in+out)
//
// rows is B·T for the encoder's projections and B for the pooler and the classifier. For full fine-tuning of
// BERT (L layers, hidden C, intermediate I, K labels) this is 6·B·T·L·(4C² + 2C·I) + 6·B·(C² + C·K) +
// 12·B·L·T²·C: 6 FLOPs per token per matmul weight, plus 12·L·T²·C per sequence for attention. BERT-base has
// 84.9 M matmul weights in its encoder, so a token costs 0.524 GFLOP at T = 128 and 0.566 GFLOP at T = 512.
// With LoRA the frozen weights lose their weight-gradient GEMM (the input gradient still flows through them,
// but not into the frozen embeddings): BERT-base with r = 8 on query and value costs 0.352 GFLOP per token at
// T = 128 (0.395 at T = 512).
// Elementwise ops, LayerNorm, softmax, the loss and AdamW are not counted (under 1% of the FLOPs; they are
// bandwidth-bound). TFLOP/s is this count over the median step time; the same count divides PyTorch's time.
//
// # How memory is measured
//
// Run reports the peak memory allocated during the warm-up and timed steps — everything live then: weights,
// gradients, optimizer state, activations, scratch — minus what was allocated before the model was built.
// Transient peaks while building the model (LoRA re-packs the parameters) are left out, as PyTorch builds its
// model on the host. On CUDA this is the caching allocator's PeakAllocated (cuda.MemoryStats; like
// torch.cuda.max_memory_allocated it counts size-class-rounded blocks in use, scratch included, not the cached
// free blocks). On the CPU it is the bytes of the tensors allocated through the backend (Meter), which leaves
// out the ops' own short-lived Go scratch. Every buffer a Run allocated is freed before it returns. Plan
// breaks the steady state down (weights, gradients, AdamW moments, activation arena, autocast weight copies)
// without running a step.
//
// # Where the time goes
//
// With Spec.Profile > 0, Run then runs that many steps through a Meter with profiling on: every op runs alone
// between two CUDA events (or Synchronize calls), and its time, GEMM FLOPs and argument bytes are summed per op
// class and per GEMM shape (Result.Breakdown, WriteBreakdown). On CUDA the start event sits behind a gate that
// holds the stream until the host has queued the whole op (cuda.Backend.TimeGated), so an op's time is its
// device time (what a kernel trace shows, and what it costs in a step whose host runs ahead), and the host's
// time to validate and queue it is summed apart (OpStat.HostMS). Ops cannot overlap then and each one's time
// includes its launch latency, which Breakdown.LaunchMS estimates with a 1-element Fill; the per-op sums show
// where the time goes, the unprofiled median shows how long a step takes.
package bench
