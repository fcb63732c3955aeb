package trainer

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// waitCounter is the CPU backend posing as an asynchronous one (tensor.HostWaitCounter): it counts the calls
// that would make a host wait for a device — those that hand device data to the host.
type waitCounter struct {
	tensor.Backend
	mu sync.Mutex
	n  map[string]int64
}

func newWaitCounter() *waitCounter { return &waitCounter{Backend: cpu.New(), n: map[string]int64{}} }

func (w *waitCounter) count(op string) {
	w.mu.Lock()
	w.n[op]++
	w.mu.Unlock()
}

func (w *waitCounter) HostWaits() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int64{}
	for k, v := range w.n {
		out[k] = v
	}
	return out
}

func (w *waitCounter) Download(dst any, src *tensor.Tensor) error {
	w.count("Download")
	return w.Backend.Download(dst, src)
}

func (w *waitCounter) Synchronize() error {
	w.count("Synchronize")
	return w.Backend.Synchronize()
}

func (w *waitCounter) GlobalNorm(ts []*tensor.Tensor) (float64, error) {
	w.count("GlobalNorm")
	return w.Backend.GlobalNorm(ts)
}

func (w *waitCounter) NonFiniteCheckAndUnscale(ts []*tensor.Tensor, inv float32) (bool, error) {
	w.count("NonFiniteCheckAndUnscale")
	return w.Backend.NonFiniteCheckAndUnscale(ts, inv)
}

// totalWaits is the sum of a HostWaitCounter's counts.
func totalWaits(w tensor.HostWaitCounter) int64 {
	var n int64
	for _, v := range w.HostWaits() {
		n += v
	}
	return n
}

// stepWaits records the backend's host waits at each step's end.
type stepWaits struct {
	CallbackBase
	w     tensor.HostWaitCounter
	at    []int64
	steps []int
}

func (s *stepWaits) OnStepEnd(e *Event) error {
	s.at, s.steps = append(s.at, totalWaits(s.w)), append(s.steps, e.State.GlobalStep)
	return nil
}

// asyncBackend returns b when it counts its host waits (CUDA), and the CPU posing as asynchronous otherwise.
func asyncBackend(t *testing.T, b tensor.Backend) tensor.Backend {
	if _, ok := b.(tensor.HostWaitCounter); ok {
		if k, ok := b.(interface{ SetKeepIDs(bool) }); ok { // CUDA: the id ops check Upload's host copy
			k.SetKeepIDs(true)
			t.Cleanup(func() { k.SetKeepIDs(false) })
		}
		return b
	}
	return newWaitCounter()
}

// deferredArgs: accumulation 2 with a short last window, dropout, warmup and decay, clipping that acts,
// logging every 3 steps, a checkpoint every 4, evaluation every 5, over an epoch boundary.
func deferredArgs(t *testing.T, set func(*TrainingArguments)) TrainingArguments {
	a := testArgs(t)
	a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps = 3, 2
	a.MaxSteps, a.WarmupSteps, a.WeightDecay, a.MaxGradNorm = 9, 2, 0.01, 0.5
	a.LoggingSteps, a.SaveStrategy, a.SaveSteps = 3, IntervalSteps, 4
	a.EvalStrategy, a.EvalSteps = IntervalSteps, 5
	a.LearningRate = 1e-3
	if set != nil {
		set(&a)
	}
	return a
}

// TestDeferredStepsAreBitIdentical: steps that leave their loss and gradient norm on the device train and log
// bit for bit as steps that read them at once (weights, every log entry, train_loss), in FP32 and BF16, with
// clipping on and off — and a step between logs makes no host wait. On CUDA the backend's own count is used.
func TestDeferredStepsAreBitIdentical(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) { deferredBitIdentical(t, asyncBackend(t, b)) })
}

func deferredBitIdentical(t *testing.T, w tensor.Backend) {
	for _, p := range []struct {
		name string
		set  func(*TrainingArguments)
	}{
		{"fp32", nil},
		{"bf16", func(a *TrainingArguments) { a.BF16 = true }},
		{"bf16 without clipping", func(a *TrainingArguments) { a.BF16, a.MaxGradNorm = true, 0 }},
	} {
		t.Run(p.name, func(t *testing.T) {
			data, eval := toyTask(20, 64, 11), toyTask(7, 64, 5)
			run := func(deferred bool) (*Trainer, []float32, *stepWaits) {
				m := tinyBert(t, w)
				sw := &stepWaits{w: w.(tensor.HostWaitCounter)}
				tr, _, _ := newTestTrainer(t, m, deferredArgs(t, p.set), data, eval, deferSteps(deferred), WithCallbacks(sw))
				mustTrain(t, tr)
				params, _, _ := m.Trainable()
				return tr, tensortest.Download(t, w, params), sw
			}
			eager, ew, _ := run(false)
			deferred, dw, sw := run(true)
			if !slices.Equal(ew, dw) {
				t.Fatal("the deferred run's weights differ from the eager run's")
			}
			eh, dh := eager.State().LogHistory, deferred.State().LogHistory
			if len(eh) != len(dh) || len(trainLogs(eh)) != 3 {
				t.Fatalf("%d and %d log entries (%d training logs, want 3)", len(eh), len(dh), len(trainLogs(eh)))
			}
			for i := range eh {
				for k, v := range eh[i] {
					if k == "train_runtime" || k == "train_samples_per_second" || k == "train_steps_per_second" || k == "eval_runtime" ||
						k == "eval_samples_per_second" || k == "eval_steps_per_second" {
						continue
					}
					if got := dh[i][k]; got != v && !(math.IsNaN(got) && math.IsNaN(v)) {
						t.Errorf("log %d %s: deferred %v, eager %v", i, k, got, v)
					}
				}
			}
			// Between two logging, saving or evaluating steps the host never waits.
			busy := map[int]bool{3: true, 4: true, 5: true, 6: true, 8: true, 9: true}
			for i := 1; i < len(sw.at); i++ {
				if step := sw.steps[i-1]; !busy[step] && sw.at[i] != sw.at[i-1] {
					t.Errorf("step %d: %d host waits (%v)", sw.steps[i], sw.at[i]-sw.at[i-1], sw.w.HostWaits())
				}
			}
		})
	}
}

// TestDeferredResumeIsBitIdentical: a deferred run stopped after its checkpoint and resumed ends with the
// weights and logs of an uninterrupted eager run.
func TestDeferredResumeIsBitIdentical(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) { deferredResume(t, b, asyncBackend(t, b)) })
}

// deferredResume runs the eager reference on plain and the deferred runs on async.
func deferredResume(t *testing.T, plain, async tensor.Backend) {
	data := toyTask(20, 64, 11)
	bf16 := func(a *TrainingArguments) { a.BF16, a.EvalStrategy, a.LoggingSteps = true, IntervalNo, 2 } // step 4 logs: same windows after the resume
	full := tinyBert(t, plain)
	trFull, _, _ := newTestTrainer(t, full, deferredArgs(t, bf16), data, nil)
	mustTrain(t, trFull)

	dir := t.TempDir()
	args := func() TrainingArguments {
		a := deferredArgs(t, bf16)
		a.OutputDir = dir
		return a
	}
	ctx, cancel := context.WithCancel(context.Background())
	first, _, _ := newTestTrainer(t, tinyBert(t, async), args(), data, nil, deferSteps(true),
		WithCallbacks(&stopAfterSave{step: 4, cancel: cancel}))
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v, want context.Canceled", err)
	}
	a := args()
	a.ResumeFromCheckpoint = "true"
	resumed := tinyBert(t, async)
	trRes, _, _ := newTestTrainer(t, resumed, a, data, nil, deferSteps(true))
	mustTrain(t, trRes)
	fp, _, _ := full.Trainable()
	rp, _, _ := resumed.Trainable()
	if !slices.Equal(tensortest.Download(t, full.Backend(), fp), tensortest.Download(t, resumed.Backend(), rp)) {
		t.Fatal("resumed deferred weights differ from the uninterrupted eager run's")
	}
	fl, rl := trainLogs(trFull.State().LogHistory), trainLogs(trRes.State().LogHistory)
	if len(fl) != len(rl) || len(fl) != 4 { // steps 2, 4, 6, 8
		t.Fatalf("%d and %d training logs", len(fl), len(rl))
	}
	for i := range fl {
		for _, k := range []string{"loss", "learning_rate", "grad_norm", "epoch", "step"} {
			if fl[i][k] != rl[i][k] {
				t.Errorf("log %d %s: uninterrupted %v, resumed %v", i, k, fl[i][k], rl[i][k])
			}
		}
	}
}

// TestDeferredNonFinite: a NaN planted in a weight after step 2 makes step 3's loss NaN; the deferred run
// reports it at its next read (step 3 logs) naming step 3 and the weight, and the bad step was not applied.
// A gradient made non-finite is reported as a non-finite gradient norm of its step.
func TestDeferredNonFinite(t *testing.T) {
	const name = "bert.encoder.layer.0.attention.self.value.weight"
	for _, p := range []string{"fp32", "bf16"} {
		t.Run(p, func(t *testing.T) {
			a := deferredArgs(t, func(a *TrainingArguments) {
				a.BF16, a.EvalStrategy, a.SaveStrategy, a.LoggingSteps = p == "bf16", IntervalNo, IntervalNo, 5
			})
			m := tinyBert(t, newWaitCounter())
			tr, _, _ := newTestTrainer(t, m, a, toyTask(20, 64, 11), nil, deferSteps(true), WithCallbacks(&plantNaN{name: name, at: 2}))
			nf := trainErr(t, tr)
			if nf.What != NonFiniteLoss || nf.Step != 3 || nf.Param != name {
				t.Errorf("got %+v; want the loss of step 3, naming %s", nf, name)
			}
			if tr.opt.Steps() != 5 {
				t.Errorf("the host counted %d AdamW steps, want 5 (the read at step 5)", tr.opt.Steps())
			}

			g := &infGradModel{Model: tinyBert(t, newWaitCounter()), name: "classifier.weight", at: map[int]bool{4: true}} // micro-batch 5: step 3
			a.OutputDir = t.TempDir()
			tr2, _, _ := newTestTrainer(t, g, a, toyTask(20, 64, 11), nil, deferSteps(true))
			nf = trainErr(t, tr2)
			if nf.What != NonFiniteGradient || nf.Step != 3 {
				t.Errorf("got %+v; want the gradient of step 3", nf)
			}
			wantIn(t, nf.Error(), "step 3: the gradient norm is +Inf", "the step was not applied")
		})
	}
}
