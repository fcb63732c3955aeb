package trainer

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultTrainingArguments checks the defaults against transformers 5.17's table (transformers/training_args.py).
func TestDefaultTrainingArguments(t *testing.T) {
	a := DefaultTrainingArguments()
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"output_dir", a.OutputDir, "trainer_output"},
		{"learning_rate", a.LearningRate, 5e-5},
		{"weight_decay", a.WeightDecay, 0.0},
		{"adam_beta1", a.AdamBeta1, 0.9},
		{"adam_beta2", a.AdamBeta2, 0.999},
		{"adam_epsilon", a.AdamEpsilon, 1e-8},
		{"max_grad_norm", a.MaxGradNorm, 1.0},
		{"num_train_epochs", a.NumTrainEpochs, 3.0},
		{"max_steps", a.MaxSteps, -1},
		{"logging_strategy", a.LoggingStrategy, IntervalSteps},
		{"logging_steps", a.LoggingSteps, 500.0},
		{"save_strategy", a.SaveStrategy, IntervalSteps},
		{"save_steps", a.SaveSteps, 500.0},
		{"eval_strategy", a.EvalStrategy, IntervalNo},
		{"seed", a.Seed, int64(42)},
		{"data_seed", a.DataSeed == nil, true},
		{"warmup_steps", a.WarmupSteps, 0.0},
		{"lr_scheduler_type", a.LRSchedulerType, ScheduleLinear},
		{"gradient_accumulation_steps", a.GradientAccumulationSteps, 1},
		{"per_device_train_batch_size", a.PerDeviceTrainBatchSize, 8},
		{"per_device_eval_batch_size", a.PerDeviceEvalBatchSize, 8},
		{"fp16", a.FP16, false},
		{"bf16", a.BF16, false},
		{"tf32", a.TF32 == nil, true},
		{"gradient_checkpointing", a.GradientCheckpointing, false},
		{"optim", a.Optim, "adamw_torch_fused"},
		{"save_total_limit (0 = HF's None)", a.SaveTotalLimit, 0},
		{"label_smoothing_factor", a.LabelSmoothingFactor, 0.0},
		{"logging_first_step", a.LoggingFirstStep, false},
		{"shuffle (tune extension)", a.Shuffle, true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
	if err := a.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

// TestValidate: each row breaks one rule and expects an *ArgumentError naming the key; the message must carry
// the given fragment.
func TestValidate(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	yes := true
	for _, c := range []struct {
		name   string
		edit   func(a *TrainingArguments)
		key    string // "" = valid
		reason string
	}{
		{"fp16 and bf16 together is an error (bf16 without loss scaling, torch.amp's GradScaler is for float16)", func(a *TrainingArguments) { a.FP16, a.BF16 = true, true }, "bf16", "both true"},
		{"fp16 alone is fine", func(a *TrainingArguments) { a.FP16 = true }, "", ""},
		{"fp16_full_eval and bf16_full_eval together", func(a *TrainingArguments) { a.FP16FullEval, a.BF16FullEval = true, true }, "bf16_full_eval", "both true"},
		{"learning rate .inf parses but is rejected (YAML 1.2 floats such as 1e-5, yaml.v3; PyYAML's YAML 1.1 reads them as strings)", func(a *TrainingArguments) { a.LearningRate = inf }, "learning_rate", "finite"},
		{"learning rate NaN", func(a *TrainingArguments) { a.LearningRate = nan }, "learning_rate", "finite"},
		{"learning rate 0", func(a *TrainingArguments) { a.LearningRate = 0 }, "learning_rate", "> 0"},
		{"negative learning rate", func(a *TrainingArguments) { a.LearningRate = -1e-5 }, "learning_rate", "> 0"},
		{"polynomial needs lr > lr_end", func(a *TrainingArguments) { a.LRSchedulerType, a.LearningRate = "polynomial", 1e-8 }, "learning_rate", "lr_end"},
		{"unknown schedule", func(a *TrainingArguments) { a.LRSchedulerType = "cosine_with_restarts" }, "lr_scheduler_type", "one of linear"},
		{"negative warmup", func(a *TrainingArguments) { a.WarmupSteps = -1 }, "warmup_steps", "≥ 0"},
		{"warmup ratio 0.1 is fine", func(a *TrainingArguments) { a.WarmupSteps = 0.1 }, "", ""},
		// 1e30 became int −9223372036854775808 and the run stopped with "warmup steps (-9223372036854775808) ...".
		{"warmup_steps 1e30 does not fit a step count", func(a *TrainingArguments) { a.WarmupSteps = 1e30 }, "warmup_steps", "at most 1e+15"},
		{"warmup_steps 1e15 is the largest", func(a *TrainingArguments) { a.WarmupSteps = 1e15 }, "", ""},
		{"save_steps 1e30", func(a *TrainingArguments) { a.SaveStrategy, a.SaveSteps = IntervalSteps, 1e30 }, "save_steps", "at most 1e+15"},
		{"num_train_epochs 1e300", func(a *TrainingArguments) { a.MaxSteps, a.NumTrainEpochs = -1, 1e300 }, "num_train_epochs", "at most 1e+15"},
		// max_steps near the int64 limit overflowed the epoch count: 0 steps trained, exit 0 (tester 12).
		{"max_steps at the int64 limit", func(a *TrainingArguments) { a.MaxSteps = math.MaxInt64 }, "max_steps", "at most 1e+15"},
		{"max_steps 1e15 is the largest", func(a *TrainingArguments) { a.MaxSteps = 1e15 }, "", ""},
		// adam_epsilon 0 made a never-used embedding row 0/0 = NaN at step 1, blamed on the learning rate.
		{"adam_epsilon 0", func(a *TrainingArguments) { a.AdamEpsilon = 0 }, "adam_epsilon", "at least"},
		{"negative adam_epsilon", func(a *TrainingArguments) { a.AdamEpsilon = -1e-8 }, "adam_epsilon", "at least 1.18e-38"},
		// 1e-46 is above 0 in float64 and 0 in AdamW's FP32 (a fresh tester): NaN at step 2 again.
		{"adam_epsilon 0 in FP32", func(a *TrainingArguments) { a.AdamEpsilon = 1e-46 }, "adam_epsilon", "FP32's smallest normal"},
		{"adam_epsilon 1e-30 is fine", func(a *TrainingArguments) { a.AdamEpsilon = 1e-30 }, "", ""},
		{"gradient accumulation 0", func(a *TrainingArguments) { a.GradientAccumulationSteps = 0 }, "gradient_accumulation_steps", "≥ 1"},
		{"train batch 0", func(a *TrainingArguments) { a.PerDeviceTrainBatchSize = 0 }, "per_device_train_batch_size", "≥ 1"},
		{"eval batch 0", func(a *TrainingArguments) { a.PerDeviceEvalBatchSize = 0 }, "per_device_eval_batch_size", "≥ 1"},
		{"empty output_dir", func(a *TrainingArguments) { a.OutputDir = " " }, "output_dir", "directory"},
		{"max_steps 0", func(a *TrainingArguments) { a.MaxSteps = 0 }, "max_steps", "-1"},
		{"no epochs and no max_steps", func(a *TrainingArguments) { a.NumTrainEpochs = 0 }, "num_train_epochs", "> 0"},
		{"no epochs but max_steps set is fine", func(a *TrainingArguments) { a.NumTrainEpochs, a.MaxSteps = 0, 10 }, "", ""},
		{"adam_beta2 = 1", func(a *TrainingArguments) { a.AdamBeta2 = 1 }, "adam_beta2", "[0, 1)"},
		{"negative weight decay", func(a *TrainingArguments) { a.WeightDecay = -0.01 }, "weight_decay", "≥ 0"},
		{"negative max_grad_norm", func(a *TrainingArguments) { a.MaxGradNorm = -1 }, "max_grad_norm", "≥ 0"},
		{"another optimizer", func(a *TrainingArguments) { a.Optim = "sgd" }, "optim", "AdamW"},
		{"unknown eval strategy", func(a *TrainingArguments) { a.EvalStrategy = "epochs" }, "eval_strategy", "no, steps, epoch"},
		{"fractional logging_steps above 1", func(a *TrainingArguments) { a.LoggingSteps = 2.5 }, "logging_steps", "integer"},
		{"save_steps 0 under steps", func(a *TrainingArguments) { a.SaveSteps = 0 }, "save_steps", "> 0"},
		{"eval steps unset falls back to logging_steps", func(a *TrainingArguments) { a.EvalStrategy = IntervalSteps }, "", ""},
		{"eval steps and logging steps both unset", func(a *TrainingArguments) {
			a.EvalStrategy, a.LoggingStrategy, a.LoggingSteps = IntervalSteps, IntervalNo, 0
		}, "eval_steps", "neither"},
		{"load_best_model_at_end without eval", func(a *TrainingArguments) { a.LoadBestModelAtEnd = true }, "load_best_model_at_end", "eval_strategy"},
		{"load_best_model_at_end with mismatched strategies", func(a *TrainingArguments) {
			a.LoadBestModelAtEnd, a.EvalStrategy = true, IntervalEpoch
		}, "load_best_model_at_end", "equal"},
		{"load_best_model_at_end with save_steps not a multiple of eval_steps", func(a *TrainingArguments) {
			a.LoadBestModelAtEnd, a.EvalStrategy, a.EvalSteps, a.SaveSteps = true, IntervalSteps, 30, 100
		}, "save_steps", "multiple"},
		{"load_best_model_at_end with matching epoch strategies", func(a *TrainingArguments) {
			a.LoadBestModelAtEnd, a.EvalStrategy, a.SaveStrategy = true, IntervalEpoch, IntervalEpoch
		}, "", ""},
		{"early stopping without eval", func(a *TrainingArguments) { a.EarlyStoppingPatience = 3 }, "early_stopping_patience", "eval_strategy"},
		{"negative skip limit", func(a *TrainingArguments) { a.MaxConsecutiveSkippedSteps = -1 }, "max_consecutive_skipped_steps", "≥ 0"},
		{"negative save_total_limit", func(a *TrainingArguments) { a.SaveTotalLimit = -1 }, "save_total_limit", "≥ 0"},
		{"label smoothing 1", func(a *TrainingArguments) { a.LabelSmoothingFactor = 1 }, "label_smoothing_factor", "[0, 1)"},
		{"tf32 set is fine", func(a *TrainingArguments) { a.TF32 = &yes }, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			c.edit(&a)
			err := a.Validate()
			if c.key == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error on %s, got nil", c.key)
			}
			if !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("error %v does not wrap ErrInvalidArguments", err)
			}
			var ae *ArgumentError
			if !errors.As(err, &ae) || ae.Key != c.key {
				t.Fatalf("want an *ArgumentError for %s, got %v", c.key, err)
			}
			if !strings.Contains(err.Error(), c.reason) || !strings.HasPrefix(err.Error(), "trainer: "+c.key+": ") {
				t.Errorf("message %q: want prefix %q and fragment %q", err, "trainer: "+c.key+": ", c.reason)
			}
		})
	}
}

// TestValidateReportsAll: several bad fields are reported together, not one per run.
func TestValidateReportsAll(t *testing.T) {
	a := DefaultTrainingArguments()
	a.LearningRate, a.PerDeviceTrainBatchSize, a.FP16, a.BF16 = math.Inf(1), 0, true, true
	err := a.Validate()
	for _, key := range []string{"learning_rate", "per_device_train_batch_size", "bf16"} {
		if err == nil || !strings.Contains(err.Error(), "trainer: "+key+":") {
			t.Errorf("error %v does not name %s", err, key)
		}
	}
}

// TestNumWarmupSteps follows transformers 5.17's get_warmup_steps: ≥ 1 a count, < 1 ceil(T·x) (transformers/optimization.py).
func TestNumWarmupSteps(t *testing.T) {
	for _, c := range []struct {
		name   string
		warmup float64
		total  int
		want   int
	}{
		{"no warmup", 0, 100, 0},
		{"a count", 10, 100, 10},
		{"a count keeps its integer part", 1, 4, 1},
		{"a ratio rounds up: ceil(100·0.06) = 6", 0.06, 100, 6},
		{"a ratio rounds up: ceil(1055·0.1) = 106", 0.1, 1055, 106},
		{"a tiny ratio still gives one step", 0.001, 10, 1},
		{"a count may exceed the run", 50, 10, 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			a.WarmupSteps = c.warmup
			if got := a.NumWarmupSteps(c.total); got != c.want {
				t.Errorf("NumWarmupSteps(%d) with warmup_steps %v = %d, want %d", c.total, c.warmup, got, c.want)
			}
		})
	}
}

// TestTotalSteps follows the Trainer's count: ceil(batches/GA) steps per epoch, max_steps winning.
func TestTotalSteps(t *testing.T) {
	for _, c := range []struct {
		name                  string
		epochs                float64
		maxSteps, ga, batches int
		steps, spans          int
	}{
		{"3 epochs of 10 batches", 3, -1, 1, 10, 30, 3},
		{"GA 4 over 10 batches: 3 steps per epoch (last window short)", 2, -1, 4, 10, 6, 2},
		{"half an epoch rounds up", 0.5, -1, 1, 11, 6, 1},
		{"max_steps wins over epochs", 3, 25, 1, 10, 25, 3},
		{"an epoch shorter than one window still gives a step", 1, -1, 8, 3, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			a.NumTrainEpochs, a.MaxSteps, a.GradientAccumulationSteps = c.epochs, c.maxSteps, c.ga
			steps, epochs := a.TotalSteps(c.batches)
			if steps != c.steps || epochs != c.spans {
				t.Errorf("TotalSteps(%d) = %d steps over %d epochs, want %d over %d", c.batches, steps, epochs, c.steps, c.spans)
			}
		})
	}
}

// TestIntervals: the logging, eval and save intervals read fractions as HF does, and eval falls back to logging.
func TestIntervals(t *testing.T) {
	a := DefaultTrainingArguments()
	a.LoggingSteps, a.SaveSteps = 0.25, 40
	if got := a.LoggingInterval(10); got != 3 {
		t.Errorf("logging_steps 0.25 of 10 steps = %d, want ceil(2.5) = 3", got)
	}
	if got := a.EvalInterval(10); got != 3 {
		t.Errorf("eval_steps unset should fall back to logging_steps: got %d, want 3", got)
	}
	if got := a.SaveInterval(10); got != 40 {
		t.Errorf("save_steps 40 = %d", got)
	}
}

// TestBestMetric: HF's defaults for metric_for_best_model and greater_is_better.
func TestBestMetric(t *testing.T) {
	no := false
	for _, c := range []struct {
		name    string
		metric  string
		greater *bool
		want    string
		better  bool
	}{
		{"unset is the loss, lower is better", "", nil, "loss", false},
		{"eval_ prefix is dropped", "eval_accuracy", nil, "accuracy", true},
		{"explicit greater_is_better wins", "f1", &no, "f1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			a.MetricForBestModel, a.GreaterIsBetter = c.metric, c.greater
			if a.BestMetric() != c.want || a.IsGreaterBetter() != c.better {
				t.Errorf("BestMetric %q greater %v, want %q %v", a.BestMetric(), a.IsGreaterBetter(), c.want, c.better)
			}
		})
	}
}

// TestEpochsTimesStepsBeyondTheCount (tester3's residual): num_train_epochs passes Validate up to 1e15, but
// times the steps of an epoch the count passed 2^63 ("total steps (-9223372036854775808) must be >= 0" with
// 1e15 epochs of 60,614 steps). Train refuses a total above MaxStepCount, naming num_train_epochs, before it
// writes anything.
func TestEpochsTimesStepsBeyondTheCount(t *testing.T) {
	a := testArgs(t)
	a.MaxSteps, a.NumTrainEpochs, a.PerDeviceTrainBatchSize = -1, 1e15, 1
	a.OutputDir = filepath.Join(t.TempDir(), "out")
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(30, 16, 17), nil)
	_, err := tr.Train(context.Background())
	var ae *ArgumentError
	if !errors.As(err, &ae) || ae.Key != "num_train_epochs" || !strings.Contains(err.Error(), "1e+15 epochs of 30 steps make 3e+16 steps") {
		t.Fatalf("Train: %v, want an ArgumentError on num_train_epochs", err)
	}
	if _, err := os.Stat(a.OutputDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output_dir written: %v", err)
	}
}
