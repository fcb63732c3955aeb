package trainer

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
)

// PredictionOutput is what Predict returns (transformers' PredictionOutput): the logits and labels of every
// example in dataset order and, when the dataset is labelled, test_loss and the MetricsFunc's metrics with a
// "test_" prefix.
type PredictionOutput struct {
	EvalPrediction
	Metrics map[string]float64 // test_loss and test_<metric>; nil for an unlabelled dataset
}

// Evaluate runs the eval dataset through the model (no dropout, no gradients) and returns eval_loss, the
// MetricsFunc's metrics with an "eval_" prefix, eval_runtime (s), eval_samples_per_second and
// eval_steps_per_second; for a causal LM also eval_mean_token_accuracy (TRL's SFTTrainer: per batch the
// supervised next-token targets the arg-max logit predicts over all of them, averaged over the batches) and
// eval_perplexity = exp(eval_loss) (transformers' run_clm.py). It logs them (log_history, metrics.jsonl) and calls the callbacks' OnEvaluate.
// Precision: the training autocast (fp16/bf16), or with fp16_full_eval / bf16_full_eval autocast in that dtype
// (see HalfInference for what that means and for models that hold their weights in half).
func (t *Trainer) Evaluate(ctx context.Context) (map[string]float64, error) {
	if t.eval == nil {
		return nil, fmt.Errorf("trainer: Evaluate needs an eval dataset")
	}
	out, err := t.predict(ctx, t.eval, "eval")
	if err != nil {
		return nil, err
	}
	if t.state == nil { // evaluation outside Train: log into a fresh state, as transformers does
		t.state = t.newState(0, 0)
		t.callbacks = append([]Callback(nil), t.user...)
	}
	if err := t.log(maps.Clone(LogEntry(out.Metrics))); err != nil {
		return nil, err
	}
	err = t.fire(func(cb Callback, e *Event) error { return cb.OnEvaluate(e, out.Metrics) })
	t.control.ShouldEvaluate = false
	return out.Metrics, err
}

// Predict runs ds through the model like Evaluate and returns every example's logits (and labels, with
// test_ metrics, when ds is labelled). It neither logs nor calls callbacks.
func (t *Trainer) Predict(ctx context.Context, ds Dataset) (PredictionOutput, error) {
	if ds == nil {
		return PredictionOutput{}, fmt.Errorf("trainer: Predict needs a dataset")
	}
	return t.predict(ctx, ds, "test")
}

// HalfInference is implemented by a Model that can run its non-training Forward with every weight and
// activation stored in a half dtype and no autocast, as transformers' fp16_full_eval / bf16_full_eval get from
// model.to(dtype) (LayerNorm and softmax outputs are then half too). SetInferenceDType(tensor.F16 or BF16)
// switches it on, SetInferenceDType(tensor.F32) back off.
//
// A model without it (tune's BERT and LoRA models today) is evaluated under fp16_full_eval / bf16_full_eval with
// autocast in that dtype, as when training in it: every GEMM takes half inputs (weights cast once, activations)
// and accumulates in FP32, LayerNorm, softmax and the loss compute in FP32, and the logits are rounded to the
// half dtype. That is at least as accurate as model.to(dtype), but keeps the FP32 master weights in memory.
type HalfInference interface {
	// SetInferenceDType holds the weights in dt (F16 or BF16) for inference, or back in F32; an error for any
	// other dtype.
	SetInferenceDType(dt tensor.DType) error
}

// evalPrecision switches the model to the evaluation precision and returns the function that restores the
// training one.
func (t *Trainer) evalPrecision() (restore func(), err error) {
	dt := tensor.Invalid
	switch {
	case t.args.FP16FullEval:
		dt = tensor.F16
	case t.args.BF16FullEval:
		dt = tensor.BF16
	}
	if dt == tensor.Invalid {
		t.model.SetPolicy(t.policy)
		return func() {}, nil
	}
	if h, ok := t.model.(HalfInference); ok {
		if err := h.SetInferenceDType(dt); err != nil {
			return nil, fmt.Errorf("trainer: full %v evaluation: %w", dt, err)
		}
		return func() { _ = h.SetInferenceDType(tensor.F32); t.model.SetPolicy(t.policy) }, nil
	}
	t.model.SetPolicy(amp.Policy{Enabled: true, DType: dt})
	return func() { t.model.SetPolicy(t.policy) }, nil
}

// predict is the evaluation loop shared by Evaluate and Predict: batches of per_device_eval_batch_size in
// dataset order, loss = Σ n_b·loss_b / Σ n_b over labelled examples.
func (t *Trainer) predict(ctx context.Context, ds Dataset, prefix string) (PredictionOutput, error) {
	restore, err := t.evalPrecision()
	if err != nil {
		return PredictionOutput{}, err
	}
	defer restore()
	start := time.Now()
	bs := t.args.PerDeviceEvalBatchSize
	n := ds.Len()
	var out PredictionOutput
	var lossSum, accSum float64
	labelled, steps, accN := 0, 0, 0
	for i := 0; i < n; i += bs {
		if err := ctx.Err(); err != nil {
			return PredictionOutput{}, fmt.Errorf("trainer: %s interrupted: %w", prefix, err)
		}
		// Sized by the batch, never by per_device_eval_batch_size alone: a batch size far above the
		// number of examples must not allocate for examples that do not exist.
		end := n
		if bs < n-i {
			end = i + bs
		}
		idx := make([]int, 0, end-i)
		for j := i; j < end; j++ {
			idx = append(idx, j)
		}
		b, err := ds.Batch(idx)
		if err != nil {
			return PredictionOutput{}, fmt.Errorf("trainer: %s batch at example %d: %w", prefix, i, err)
		}
		// No user code runs between the batches of one pass, so the weights are cast once per pass.
		o, err := t.model.Forward(b, ForwardOptions{HostLogits: t.metrics != nil || prefix == "test", ReuseWeightCasts: steps > 0})
		if err != nil {
			return PredictionOutput{}, fmt.Errorf("trainer: %s forward at example %d: %w", prefix, i, err)
		}
		steps++
		if t.predictStep != nil {
			t.predictStep(prefix, i+len(idx), n)
		}
		out.Logits = append(out.Logits, o.Logits...)
		out.NumLabels = o.NumLabels
		if b.Labels != nil {
			out.Labels = append(out.Labels, b.Labels...)
		}
		if k := t.model.Supervised(b); k > 0 && (b.Labels != nil || b.Targets != nil) {
			lossSum += float64(o.Loss) * float64(k)
			labelled += k
		}
		if o.Targets > 0 {
			accSum += float64(o.Correct) / float64(o.Targets)
			accN++
		}
	}
	secs := max(time.Since(start).Seconds(), 1e-9)
	out.Metrics = map[string]float64{
		prefix + "_runtime":            secs,
		prefix + "_samples_per_second": float64(n) / secs,
		prefix + "_steps_per_second":   float64(steps) / secs,
	}
	if labelled > 0 {
		out.Metrics[prefix+"_loss"] = lossSum / float64(labelled)
		if accN > 0 { // a causal LM: TRL's mean_token_accuracy (the mean over batches), and exp(loss)
			out.Metrics[prefix+"_mean_token_accuracy"] = accSum / float64(accN)
			out.Metrics[prefix+"_perplexity"] = math.Exp(out.Metrics[prefix+"_loss"])
		}
		if t.metrics != nil {
			for k, v := range t.metrics(out.EvalPrediction) {
				out.Metrics[prefix+"_"+k] = v
			}
		}
	}
	return out, nil
}
