// Package trainer trains, evaluates and runs tune's models with the semantics of Hugging Face's Trainer
// (transformers 5.17; transformers' trainer.py): TrainingArguments with HF's names and defaults, AdamW with decoupled weight
// decay, the LR schedules, gradient accumulation, clipping after unscaling, FP16 dynamic loss scaling
// (amp.GradScaler), evaluation with metrics, callbacks, early stopping, logging and checkpoints with exact
// resume.
//
// The simplest use trains a model on a dataset with the defaults:
//
//	args := trainer.DefaultTrainingArguments()
//	args.OutputDir, args.BF16, args.EvalStrategy = "runs/sst2", true, trainer.IntervalEpoch
//	t, err := trainer.New(model, args, train, eval) // model: a trainer.Model; train, eval: trainer.Datasets
//	out, err := t.Train(ctx)                        // out.TrainingLoss, out.Metrics
//	metrics, err := t.Evaluate(ctx)                 // eval_loss, eval_accuracy, eval_f1, eval_matthews_correlation
//	err = t.SaveModel(args.OutputDir)
//	pred, err := t.Predict(ctx, test)               // pred.Logits (N, L), pred.Predictions(), test_ metrics
//	t.Close()                                       // frees the optimizer state; the model stays the caller's
//
// The model is anything that implements Model (a BERT, or a LoRA-adapted one: lora.Model); the datasets are
// anything that implements Dataset (datasets.Text adapts a loaders.Dataset and its Collator). Arguments
// are checked by New: every bad value is an *ArgumentError naming its HF key, all wrapping ErrInvalidArguments.
//
// The device is the model's: the Trainer runs on the tensor.Backend the model's tensors live on
// (Model.Backend), so the backend is chosen when the model is built or loaded, not here:
//
//	b := cpu.New()                  // tensor/cpu: the pure-Go reference backend, always there
//	b, err := cuda.Open(0)          // package cuda: GPU 0; built with -tags cuda, else an error wrapping tensor.ErrNoDevice
//	b, err := recipes.OpenDevice("auto") // CUDA device 0 when cuda.Available(), else the CPU (a recipe's device:)
//	model, _, err := bert.LoadPretrained(dir, b, transformer.LoadOptions{})
//
// package recipes builds all of this from a YAML recipe (recipes.Build), and `tune finetune` runs it.
//
// # The step
//
// One optimizer step (one global_step) runs N = gradient_accumulation_steps micro-batches (fewer at the end of
// an epoch). Micro-batch i's backward is seeded with scale·n_i/Σn, where n_i counts its labelled examples, so
// the accumulated gradient is that of the mean loss over every labelled example of the window, whatever the
// split (loss normalisation by num_items_in_batch, transformers' trainer.py; transformers 5.17 sums the micro-batch means instead, see
// TrainingArguments.GradientAccumulationSteps). Then, once: GradScaler.Unscale with its fused inf/NaN check,
// amp.ClipGradNorm (its pre-clip norm is the logged grad_norm, clipping after unscale_, torch/amp/grad_scaler.py; one clip per optimizer step, transformers' trainer.py), the AdamW step with the LR the
// schedule gives (the logged learning_rate), LRScheduler.Step, GradScaler.Update, Model.ZeroGrad. An FP16 step
// with inf/NaN gradients is skipped: no update, the schedule holds (the schedule holding on a skipped step, transformers' trainer.py), the scale backs off; it still
// counts in global_step, as in transformers, and is logged with skipped_steps and a null grad_norm, and at once
// as a warning naming the parameter whose gradient overflowed and a metrics.jsonl line.
//
// On an asynchronous backend (CUDA) a BF16 or FP32 step makes no host wait (unless TUNE_SYNC_FREE=0): the loss and the gradient norm stay
// on the device (the clip is applied there, and AdamW skips a non-finite step by a device flag) and are read,
// once for all the steps since the last read, when the Trainer logs, evaluates, saves or ends the run, or every
// 64 steps — as transformers' Trainer keeps tr_loss and grad_norm as tensors until it logs. Everything logged and
// every weight is bit for bit what a step that reads them at once gives; a non-finite loss or gradient is
// reported at the next read, naming its step (without it each step is checked at once, naming the parameter
// of a non-finite gradient). FP16 steps do too when every loss scale is a power of two (PyTorch's defaults):
// the GradScaler's scale, growth tracker and found-inf flag live on the device, AdamW skips by the flag and
// takes its learning rate and bias correction from a table indexed by the device's count of steps taken, and
// the host replays the skips, the schedule and the scale when it reads (deferred16.go); a skipped step's
// warning then says "a gradient" rather than naming the parameter.
//
// With cuda_graphs (TrainingArguments.CUDAGraphs) such steps run as one CUDA graph each on CUDA after a short
// warm-up (graphs.go): the trainer writes the step's Philox base and AdamW scalars to the device before it,
// the step's scalars go through fixed staging into the rings after it, and steps of another batch shape run
// eagerly with the reason logged. Results are bit for bit those without graphs, resumed runs included.
//
// # Non-finite values
//
// A run that cannot make progress stops with a *NonFiniteError (ErrNonFinite) naming the step, what was
// non-finite (the loss, or the first parameter's gradient or value by Hugging Face name), the loss scale and
// what to try: a non-finite loss in any precision, an inf/NaN gradient in an fp32 or bf16 run (before the
// optimizer applies it), max_consecutive_skipped_steps fp16 steps in a row skipped, non-finite weights before
// the first step. A checkpoint or SaveModel is refused when the weights are non-finite, so the last good
// checkpoint stays (docs/DEBUGGING.md).
//
// # Data and randomness
//
// Each epoch visits the training set in an order drawn from (data_seed or seed, epoch), or in file order with
// shuffle: false (loaders.EpochOrder; a Dataset may choose its own order by implementing Orderer), cut into
// micro-batches of per_device_train_batch_size, the last one short. Dropout draws Philox numbers at an offset
// that advances by a fixed stride per micro-batch, so no state beyond these counters is needed to continue a
// run exactly.
//
// # Outputs
//
// Under output_dir: metrics.jsonl (every log entry, one JSON line each, appended), trainer_state.json (HF's
// keys, log_history included), training_curve.png (loss and the eval metric against the step) and
// checkpoint-N directories holding the model (Model.Save), optimizer.safetensors, scheduler.json,
// scaler.json (FP16, PyTorch's keys), rng_state.json (the data and dropout position), training_args.json and
// trainer_state.json. A checkpoint is written into a temporary directory and renamed, so a crash never leaves
// half of one; save_total_limit deletes the oldest, never the best (their own files only: what else a user put
// in the folder stays). resume_from_checkpoint (a directory, or "true"/"latest") continues bit for bit as the
// uninterrupted run would have. A run interrupted before its first checkpoint leaves only its metrics.jsonl; a
// new run there starts from the beginning and keeps that file as metrics.jsonl.1 (then .2, ...).
//
// # Full control
//
// Callbacks (Callback, embedding CallbackBase) see every step, log, evaluation and save and may stop training
// through TrainerControl; EarlyStopping is one. WithComputeMetrics replaces the metrics, WithGradScalerOptions
// the scaler's settings, WithOutput and WithLogger where progress and warnings go. A Model that implements
// Loader can be resumed and reloaded at the end (load_best_model_at_end); one that implements HalfInference
// holds its weights in half precision under fp16_full_eval / bf16_full_eval, which otherwise evaluate under
// autocast in that dtype.
package trainer
