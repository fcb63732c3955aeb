package recipes

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/sft"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

// TestSFTTokenAccuracyLogged: a causal-LM run logs TRL's mean_token_accuracy and num_tokens (the tokens
// trained on so far) with every training loss and
// eval_mean_token_accuracy and eval_perplexity = exp(eval_loss) with the evaluation; the eval accuracy is the
// mean over the eval batches of sft.TokenAccuracy on the host logits of the trained model.
func TestSFTTokenAccuracyLogged(t *testing.T) {
	r, err := Load("tiny-chat", []string{"training.output_dir=" + t.TempDir(), "training.max_steps=6",
		"training.logging_steps=3", "training.eval_strategy=steps", "training.eval_steps=6",
		"training.per_device_eval_batch_size=8", "training.save_strategy=no"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := Build(r, cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Trainer.Close()
	if _, err := run.Trainer.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var train, eval int
	var evalAcc, evalLoss, ppl, tokens float64
	for _, l := range run.Trainer.State().LogHistory {
		if _, ok := l["loss"]; ok {
			train++
			if l["num_tokens"] <= tokens {
				t.Errorf("step %v: num_tokens %v after %v", l["step"], l["num_tokens"], tokens)
			}
			tokens = l["num_tokens"]
			if a, ok := l["mean_token_accuracy"]; !ok || a < 0 || a > 1 {
				t.Errorf("step %v: mean_token_accuracy %v (logged %v)", l["step"], a, ok)
			}
		}
		if v, ok := l["eval_mean_token_accuracy"]; ok {
			eval++
			evalAcc, evalLoss, ppl = v, l["eval_loss"], l["eval_perplexity"]
		}
	}
	if train != 2 || eval != 1 {
		t.Fatalf("%d training logs with mean_token_accuracy (want 2), %d evaluations (want 1)", train, eval)
	}
	if seen := run.Trainer.State().NumInputTokensSeen; tokens != float64(seen) {
		t.Errorf("num_tokens %v at the last log, %d tokens seen", tokens, seen)
	}
	jsonl, err := os.ReadFile(filepath.Join(r.Training.OutputDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"mean_token_accuracy":`, `"eval_mean_token_accuracy":`, `"eval_perplexity":`} {
		if n := strings.Count(string(jsonl), key); n != map[bool]int{true: 2, false: 1}[key == `"mean_token_accuracy":`] {
			t.Errorf("metrics.jsonl has %s %d times", key, n)
		}
	}
	if math.Abs(ppl-math.Exp(evalLoss)) > 1e-9*ppl {
		t.Errorf("eval_perplexity %v, exp(eval_loss %v) = %v", ppl, evalLoss, math.Exp(evalLoss))
	}
	// The host's count, batch by batch in eval order, from the trained model's logits.
	ds, bs := run.SFTEval, r.Training.PerDeviceEvalBatchSize
	var sum float64
	batches := 0
	for i := 0; i < ds.Len(); i += bs {
		var idx []int
		for j := i; j < min(i+bs, ds.Len()); j++ {
			idx = append(idx, j)
		}
		b, err := ds.Batch(idx)
		if err != nil {
			t.Fatal(err)
		}
		out, err := run.Model.Forward(b, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		correct, total := sft.TokenAccuracy(out.Logits, b.Labels, b.B, b.T, out.NumLabels)
		if total != out.Targets || correct != out.Correct {
			t.Errorf("batch at %d: the head counts %d of %d, the host %d of %d", i, out.Correct, out.Targets, correct, total)
		}
		sum += float64(correct) / float64(total)
		batches++
	}
	if want := sum / float64(batches); math.Abs(evalAcc-want) > 1e-12 || want == 0 {
		t.Errorf("eval_mean_token_accuracy %v, host %v over %d batches", evalAcc, want, batches)
	}
	t.Logf("eval_loss %.4f  eval_perplexity %.3f  eval_mean_token_accuracy %.4f over %d batches", evalLoss, ppl, evalAcc, batches)
}

// TestCausalLMMetricForBestModel: a causal LM's metric_for_best_model is one of loss, mean_token_accuracy and
// perplexity (a classifier's accuracy is refused with the list), with or without the eval_ prefix.
func TestCausalLMMetricForBestModel(t *testing.T) {
	for m, ok := range map[string]bool{"eval_mean_token_accuracy": true, "perplexity": true, "loss": true, "accuracy": false, "mean_token_acc": false} {
		_, err := Load("tiny-chat", []string{"training.output_dir=" + t.TempDir(), "training.metric_for_best_model=" + m})
		if ok != (err == nil) || !ok && !strings.Contains(fmt.Sprint(err), "the evaluation of a causal language model reports (loss, mean_token_accuracy, perplexity") {
			t.Errorf("metric_for_best_model %s: %v", m, err)
		}
	}
}
