package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer/bert"
	"github.com/tune-ml/tune/transformer/detweights"
	"github.com/tune-ml/tune/transformer/llama"
)

// fp16Result is what a run of the FP16 comparisons left: everything the host path and the deferred path must
// agree on bit for bit.
type fp16Result struct {
	tr      *Trainer
	weights []float32
	metrics []map[string]any // metrics.jsonl without the timings
	err     error
}

// runFP16 trains tinyBert on b under a, with +Inf put into a gradient at the Backward calls of at, the
// GradScaler's growth_interval 2 (growth inside the run), steps deferred or not.
func runFP16(t *testing.T, b tensor.Backend, a TrainingArguments, at map[int]bool, deferred bool, opts ...Option) fp16Result {
	t.Helper()
	a.FP16 = true
	so := amp.DefaultGradScalerOptions()
	so.GrowthInterval = 2
	m := newInfGrad(t, b, at)
	opts = append([]Option{deferSteps(deferred), WithGradScalerOptions(so)}, opts...)
	tr, _, _ := newTestTrainer(t, m, a, toyTask(20, 64, 11), toyTask(7, 64, 5), opts...)
	_, err := tr.Train(context.Background())
	params, _, _ := m.Trainable()
	var metrics []map[string]any
	for _, e := range readMetrics(t, a.OutputDir) {
		for _, k := range []string{"train_runtime", "train_samples_per_second", "train_steps_per_second", "eval_runtime",
			"eval_samples_per_second", "eval_steps_per_second"} {
			delete(e, k)
		}
		metrics = append(metrics, e)
	}
	return fp16Result{tr: tr, weights: tensortest.Download(t, b, params), metrics: metrics, err: err}
}

// loadableInf is infGradModel over a BERT that reads checkpoints back (Loader), for the resume test.
type loadableInf struct {
	*infGradModel
	base *bert.BertForSequenceClassification
}

func (m loadableInf) Load(dir string) error { return m.base.Load(dir) }

// newInfGrad is a tinyBert on b whose Backward calls listed in at put +Inf into a gradient.
func newInfGrad(t *testing.T, b tensor.Backend, at map[int]bool) loadableInf {
	base := tinyBert(t, b)
	return loadableInf{&infGradModel{Model: base, name: "bert.encoder.layer.1.intermediate.dense.weight", at: at}, base}
}

// sameFP16 fails unless the two runs agree: weights, log history, metrics.jsonl (skipped-step and growth
// entries included), the GradScaler's state, AdamW's step count, the schedule's position and the error.
func sameFP16(t *testing.T, host, dev fp16Result) {
	t.Helper()
	if !slices.Equal(host.weights, dev.weights) {
		t.Error("the deferred run's weights differ from the host-decided run's")
	}
	if fmt.Sprint(host.metrics) != fmt.Sprint(dev.metrics) {
		t.Errorf("metrics.jsonl:\nhost     %v\ndeferred %v", host.metrics, dev.metrics)
	}
	eh, dh := host.tr.State().LogHistory, dev.tr.State().LogHistory
	if len(eh) != len(dh) {
		t.Errorf("%d and %d log entries", len(eh), len(dh))
	}
	for i := range min(len(eh), len(dh)) {
		for k, v := range eh[i] {
			if k == "train_runtime" || k == "train_samples_per_second" || k == "train_steps_per_second" || k == "eval_runtime" ||
				k == "eval_samples_per_second" || k == "eval_steps_per_second" {
				continue
			}
			if got := dh[i][k]; got != v && !(math.IsNaN(got) && math.IsNaN(v)) {
				t.Errorf("log %d %s: deferred %v, host %v", i, k, got, v)
			}
		}
	}
	if hs, ds := host.tr.scaler.StateDict(), dev.tr.scaler.StateDict(); fmt.Sprint(hs) != fmt.Sprint(ds) {
		t.Errorf("GradScaler state: host %+v, deferred %+v", hs, ds)
	}
	if h, d := host.tr.opt.Steps(), dev.tr.opt.Steps(); h != d {
		t.Errorf("AdamW steps: host %d, deferred %d", h, d)
	}
	if h, d := host.tr.sched.LastEpoch, dev.tr.sched.LastEpoch; h != d {
		t.Errorf("schedule position: host %d, deferred %d", h, d)
	}
	var he, de *NonFiniteError
	switch {
	case (host.err == nil) != (dev.err == nil):
		t.Errorf("errors: host %v, deferred %v", host.err, dev.err)
	case errors.As(host.err, &he) != errors.As(dev.err, &de):
		t.Errorf("errors: host %v, deferred %v", host.err, dev.err)
	case he != nil && (he.What != de.What || he.Step != de.Step || he.Scale != de.Scale):
		t.Errorf("errors: host %+v, deferred %+v", he, de)
	}
}

// TestDeferredFP16IsBitIdentical: FP16 steps whose GradScaler lives on the device (found-inf flag, skip,
// scale update, the AdamW step count and learning rate read from device memory) train, log, skip, grow the
// scale and stop exactly as steps whose host reads the flag after each step: skipped steps in single
// micro-batches and whole windows (gradient accumulation 2, a short last window), growth every 2 clean
// steps, warmup and decay, clipping on and off, evaluation and checkpoints in between, and the
// max_consecutive_skipped_steps stop.
func TestDeferredFP16IsBitIdentical(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		w := asyncBackend(t, b)
		for _, c := range []struct {
			name string
			set  func(*TrainingArguments)
			at   map[int]bool
		}{
			{"skips and growth", nil, map[int]bool{1: true, 6: true, 7: true, 12: true}},
			{"without clipping", func(a *TrainingArguments) { a.MaxGradNorm = 0 }, map[int]bool{0: true, 9: true}},
			{"a long run read at the end", func(a *TrainingArguments) {
				a.MaxSteps, a.LoggingSteps, a.SaveStrategy, a.EvalStrategy = 30, 100, IntervalNo, IntervalNo
			}, map[int]bool{3: true, 4: true, 5: true, 20: true, 41: true}},
			{"consecutive skips stop", func(a *TrainingArguments) {
				a.MaxSteps, a.LoggingSteps, a.SaveStrategy, a.EvalStrategy, a.MaxConsecutiveSkippedSteps = 20, 100, IntervalNo, IntervalNo, 3
			}, map[int]bool{2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true, 11: true}},
		} {
			t.Run(c.name, func(t *testing.T) {
				host := runFP16(t, w, deferredArgs(t, c.set), c.at, false)
				dev := runFP16(t, w, deferredArgs(t, c.set), c.at, true)
				sameFP16(t, host, dev)
				skipped, grown := 0, 0
				for _, e := range dev.metrics {
					if e["skipped"] != nil {
						skipped++
					} else if e["next_loss_scale"] != nil {
						grown++
					}
				}
				if skipped == 0 || (grown == 0 && c.name != "consecutive skips stop") {
					t.Errorf("%d skipped steps and %d growths: the test exercises neither", skipped, grown)
				}
				var nf *NonFiniteError
				if stop := c.name == "consecutive skips stop"; stop != errors.As(dev.err, &nf) || (stop && (nf.What != NonFiniteSkipped || nf.Step != 4)) {
					t.Errorf("error %v, want the stop at step 4 only in the stop case", dev.err)
				}
			})
		}
	})
}

// TestDeferredFP16HostWaits: between two logging, saving or evaluating steps an FP16 step makes no host wait.
func TestDeferredFP16HostWaits(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		w := asyncBackend(t, b)
		sw := &stepWaits{w: w.(tensor.HostWaitCounter)}
		dev := runFP16(t, w, deferredArgs(t, nil), nil, true, WithCallbacks(sw))
		if dev.err != nil {
			t.Fatal(dev.err)
		}
		busy := map[int]bool{3: true, 4: true, 5: true, 6: true, 8: true, 9: true}
		quiet := 0
		for i := 1; i < len(sw.at); i++ {
			if step := sw.steps[i-1]; !busy[step] {
				quiet++
				if sw.at[i] != sw.at[i-1] {
					t.Errorf("step %d: %d host waits (%v)", sw.steps[i], sw.at[i]-sw.at[i-1], sw.w.HostWaits())
				}
			}
		}
		if quiet < 2 {
			t.Fatalf("only %d steps between reads", quiet)
		}
	})
}

// TestDeferredFP16Resume: a deferred FP16 run stopped after its checkpoint at step 4 (after a skipped step and
// a growth) and resumed deferred ends with the weights, logs and GradScaler state of an uninterrupted
// host-decided run.
func TestDeferredFP16Resume(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		w := asyncBackend(t, b)
		at := map[int]bool{1: true, 9: true}
		set := func(a *TrainingArguments) { a.EvalStrategy, a.LoggingSteps = IntervalNo, 2 }
		full := runFP16(t, w, deferredArgs(t, set), at, false)
		if full.err != nil {
			t.Fatal(full.err)
		}
		dir := t.TempDir()
		args := func() TrainingArguments {
			a := deferredArgs(t, set)
			a.OutputDir = dir
			return a
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a := args()
		a.FP16 = true
		so := amp.DefaultGradScalerOptions()
		so.GrowthInterval = 2
		first, _, _ := newTestTrainer(t, newInfGrad(t, w, at), a,
			toyTask(20, 64, 11), nil, deferSteps(true), WithGradScalerOptions(so), WithCallbacks(&stopAfterSave{step: 4, cancel: cancel}))
		if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run returned %v, want context.Canceled", err)
		}
		a = args()
		a.ResumeFromCheckpoint = "true"
		// The resumed run's Backward calls count from 0 again: step 5 begins at call 7 of the full run (an epoch
		// of 7 micro-batches is windows of 2, 2, 2 and 1).
		later := map[int]bool{}
		for k := range at {
			if k >= 7 {
				later[k-7] = true
			}
		}
		res := runFP16(t, w, a, later, true)
		if res.err != nil {
			t.Fatal(res.err)
		}
		if !slices.Equal(full.weights, res.weights) {
			t.Error("resumed deferred weights differ from the uninterrupted host run's")
		}
		if hs, ds := full.tr.scaler.StateDict(), res.tr.scaler.StateDict(); fmt.Sprint(hs) != fmt.Sprint(ds) {
			t.Errorf("GradScaler state: uninterrupted %+v, resumed %+v", hs, ds)
		}
		if full.tr.opt.Steps() != res.tr.opt.Steps() || full.tr.sched.LastEpoch != res.tr.sched.LastEpoch {
			t.Errorf("AdamW steps %d / %d, schedule %d / %d", full.tr.opt.Steps(), res.tr.opt.Steps(), full.tr.sched.LastEpoch, res.tr.sched.LastEpoch)
		}
		fl, rl := trainLogs(full.tr.State().LogHistory), trainLogs(res.tr.State().LogHistory)
		if len(fl) != len(rl) || len(fl) != 4 {
			t.Fatalf("%d and %d training logs", len(fl), len(rl))
		}
		for i := range fl {
			for _, k := range []string{"loss", "learning_rate", "grad_norm", "epoch", "step", "loss_scale", "skipped_steps"} {
				if fl[i][k] != rl[i][k] {
					t.Errorf("log %d %s: uninterrupted %v, resumed %v", i, k, fl[i][k], rl[i][k])
				}
			}
		}
	})
}

// causalRows is a Dataset of n random token rows of length t (vocabulary v), labelled with themselves.
type causalRows struct{ ids [][]int32 }

func newCausalRows(n, t, v int) causalRows {
	var d causalRows
	for i := range n {
		row := make([]int32, t)
		for j := range row {
			row[j] = int32((i*7 + j*j*3 + 1) % v)
		}
		d.ids = append(d.ids, row)
	}
	return d
}

func (d causalRows) Len() int { return len(d.ids) }

func (d causalRows) Batch(idx []int) (*loaders.Batch, error) {
	t := len(d.ids[0])
	b := &loaders.Batch{B: len(idx), T: t}
	for k, i := range idx {
		b.InputIDs = append(b.InputIDs, d.ids[i]...)
		for j := range t {
			b.AttentionMask = append(b.AttentionMask, 1)
			l := int64(d.ids[i][j])
			if k == 0 && j < 3 {
				l = -100 // a masked prompt
			}
			b.Labels = append(b.Labels, l)
		}
	}
	return b, nil
}

// TestDeferredFP16Decoder: a causal LM (the tiny Llama of testdata/decoder), whose LM head back-propagates
// during Forward with the seed scaled on the device, trains bit for bit the same with the GradScaler on the
// device as with the host deciding, skipped steps and growth included.
func TestDeferredFP16Decoder(t *testing.T) {
	ck, err := loaders.OpenCheckpoint(testutil.Testdata(t, "decoder", "llama_rope3.safetensors"))
	if err != nil {
		t.Skipf("testdata/decoder/llama_rope3.safetensors: %v", err)
	}
	cfg, err := llama.ParseConfig([]byte(ck.Metadata()["config"]))
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		w := asyncBackend(t, b)
		run := func(deferred bool) fp16Result {
			m, err := llama.New(w, cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, np := range m.NamedParameters() {
				if err := w.Upload(np.Value, detweights.DecoderValues(20261201, np.Name, np.Value.Shape)); err != nil {
					t.Fatal(err)
				}
			}
			m.WeightsUpdated()
			inf := &infGradModel{Model: m, name: m.NamedParameters()[3].Name, at: map[int]bool{2: true, 5: true, 6: true}}
			a := testArgs(t)
			a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps, a.MaxSteps = 2, 2, 8
			a.LearningRate, a.WarmupSteps, a.MaxGradNorm, a.LoggingSteps, a.FP16 = 1e-3, 2, 1, 3, true
			a.SaveStrategy, a.EvalStrategy = IntervalNo, IntervalNo
			so := amp.DefaultGradScalerOptions()
			so.GrowthInterval = 2
			tr, _, _ := newTestTrainer(t, inf, a, newCausalRows(12, 9, cfg.VocabSize), nil, deferSteps(deferred), WithGradScalerOptions(so))
			_, err = tr.Train(context.Background())
			params, _, _ := m.Trainable()
			var metrics []map[string]any
			for _, e := range readMetrics(t, a.OutputDir) {
				delete(e, "train_runtime")
				delete(e, "train_samples_per_second")
				delete(e, "train_steps_per_second")
				metrics = append(metrics, e)
			}
			return fp16Result{tr: tr, weights: tensortest.Download(t, w, params), metrics: metrics, err: err}
		}
		host, dev := run(false), run(true)
		if host.err != nil {
			t.Fatal(host.err)
		}
		sameFP16(t, host, dev)
		if dev.tr.run.skippedTotal == 0 {
			t.Error("no step was skipped")
		}
	})
}
