// Package amp holds tune's mixed-precision machinery, with PyTorch's semantics (aten/src/ATen/autocast_mode.cpp, torch/amp/grad_scaler.py, transformers' trainer.py):
// the autocast Policy (which op class computes in which dtype), the per-step WeightCache, the GradScaler
// (dynamic loss scaling with PyTorch's exact update rule and state dict) and ClipGradNorm.
//
// # Choosing a precision
//
// A recipe's precision maps to a Policy, and the policy to the scaler it needs:
//
//	p, err := amp.ParsePrecision("fp16")   // amp.FP32, amp.FP16 or amp.BF16
//	s, err := amp.NewGradScalerFor(b, p)   // PyTorch's defaults for fp16; disabled (scale 1) for bf16 and fp32
//
// # Autocast
//
// Under an enabled Policy, GEMM-class ops (OpClass LowerPrecision: Linear, the attention products, the
// classifier) take p.GemmDType() inputs and accumulate in FP32; FP32-class ops (LayerNorm, softmax, the losses,
// norms) compute in and return FP32; everything else keeps its input dtype, with mixed inputs promoted to the
// wider type. ClassOf maps each tensor.Backend op to its class and Policy.OutputDType gives the dtype an op
// returns. The attention logits and softmax stay in FP32 under every policy (Policy.AttentionScoresDType). A
// numerically sensitive layer is handed p.Disabled(), PyTorch's autocast(enabled=False).
//
// A layer casts its FP32 master weight through the step's WeightCache, so each weight is cast once per optimizer
// step however often forward and backward use it:
//
//	wh, err := cache.Get(layer.W)          // (out, in) in p.DType, cast at most once per step
//	...
//	cache.Invalidate()                     // whenever a master weight may have changed
//
// tune's models invalidate at every Forward unless told that nothing changed (the trainer's accumulation
// windows), so a weight edited, loaded or merged from outside a step is never read through a stale copy.
//
// # One optimizer step under FP16
//
//	for each of the N micro-batches:
//	    forward; backward seeded with s.Scale()/N    // weight gradients accumulate (+=) in FP32
//	s.Unscale(grads)                                 // once per optimizer step: grads /= scale, inf/NaN check
//	norm, err := amp.ClipGradNorm(b, grads, maxNorm) // after Unscale: the true norm
//	skipped, err := s.Step(optimizer.Step)           // skipped when any gradient was inf/NaN
//	s.Update()                                       // back off, or grow after growth_interval clean steps
//	if !skipped { scheduler.Step() }
//
// The same code runs unchanged under BF16 and FP32, where the scaler is disabled: Scale() is 1, Unscale does
// nothing and Step always steps.
//
// # The same step without host waits
//
// On an asynchronous backend the scaler's state can live on the device (DeviceScaler, for scales that are
// powers of two: GradScaler.PowersOfTwo), so that nothing in the step waits for the found-inf flag:
//
//	d, err := s.OnDevice()                           // scale, growth tracker, found flag, steps taken
//	for each micro-batch: forward with ForwardOptions.LossScale = d.Scale; backward seeded with 1/N
//	d.Unscale(grads)                                 // grads /= *d.Scale, *d.Found set on inf/NaN
//	amp.GradNormOnDevice(b, grads, norm, nil)        // or ClipGradNormOnDevice, clipping in memory
//	AdamW with Skip = d.Found, Table/Row = the lr and t of the k-th step taken, k = *d.Steps,
//	      GradNorm = norm, MaxGradNorm = maxNorm       // clips the gradients as it reads them
//	d.Update(record)                                 // _amp_update_scale_ on the device; flag → record
//	later: s.UpdateFound(flag read from record)      // the host's scaler follows, bit for bit
package amp
