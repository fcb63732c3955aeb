package trainer

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
)

// ids returns a dataset with one single-token example per id, all labelled 0.
func ids(k ...int32) *sliceDataset {
	d := &sliceDataset{}
	for _, id := range k {
		d.ids = append(d.ids, []int32{id})
		d.labels = append(d.labels, 0)
	}
	return d
}

func closeRel(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), 1e-30)
}

// TestB29WindowLossNormalisedByLabelledExamples: loss normalisation by num_items_in_batch (transformers' trainer.py). A window of two micro-batches with 6 and 2 labelled
// examples (per-example losses 0.5 ×6, then 1.0 and 3.0) logs 7/8 = 0.875, not the per-micro-batch mean 1.25,
// and accumulates the gradient of one batch of all 8 examples.
func TestB29WindowLossNormalisedByLabelledExamples(t *testing.T) {
	a := map[int32]float32{1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5, 6: 0.5, 7: 1.0, 8: 3.0}
	g := map[int32][]float32{}
	for k := range a {
		g[k] = []float32{float32(k), float32(k%3) - 1, 1 / float32(k)}
	}
	data := ids(1, 2, 3, 4, 5, 6, 7, 8)
	run := func(bs, ga int) (loss float64, grad []float32) {
		args := testArgs(t)
		args.PerDeviceTrainBatchSize, args.GradientAccumulationSteps = bs, ga
		args.MaxSteps, args.MaxGradNorm, args.Shuffle = 1, 0, false
		m := newScriptModel(3, a, g)
		tr, _, _ := newTestTrainer(t, m, args, data, nil)
		mustTrain(t, tr)
		return trainLogs(tr.State().LogHistory)[0]["loss"], m.zeroed[0]
	}
	loss, grad := run(6, 2) // micro-batches of 6 and 2 in one window
	if math.Abs(loss-0.875) > 1e-6 {
		t.Errorf("window loss %v, want 0.875 (the buggy per-micro-batch mean is 1.25)", loss)
	}
	oneLoss, oneGrad := run(8, 1)
	if math.Abs(oneLoss-0.875) > 1e-6 {
		t.Errorf("single-batch loss %v, want 0.875", oneLoss)
	}
	for i := range grad {
		if !closeRel(float64(grad[i]), float64(oneGrad[i]), 1e-6) {
			t.Errorf("grad[%d] = %v with GA, %v in one batch", i, grad[i], oneGrad[i])
		}
	}
}

// TestB29BagModelGradientIndependentOfSplit checks B29 on a model with a real cross-entropy: GA over unequal
// micro-batches gives the single-batch gradient (≤ 1e-6 relative).
func TestB29BagModelGradientIndependentOfSplit(t *testing.T) {
	data := toyTask(10, 16, 5)
	run := func(bs, ga int) []float32 {
		a := testArgs(t)
		a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps = bs, ga
		a.MaxSteps, a.MaxGradNorm, a.Shuffle = 1, 0, false
		m := newBagModel(16, 4, 2, 0)
		tr, _, _ := newTestTrainer(t, m, a, data, nil)
		mustTrain(t, tr)
		return m.zeroed[0]
	}
	split, whole := run(4, 3), run(10, 1) // micro-batches of 4, 4, 2
	worst := 0.0
	for i := range whole {
		if d := math.Abs(float64(split[i] - whole[i])); d > worst {
			worst = d
		}
		if math.Abs(float64(split[i]-whole[i])) > 1e-6*math.Max(math.Abs(float64(whole[i])), 1e-3) {
			t.Fatalf("grad[%d] = %v split, %v whole", i, split[i], whole[i])
		}
	}
	t.Logf("worst absolute difference %g", worst)
}

// TestB31ClipOncePerOptimizerStep: one clip per optimizer step (transformers' trainer.py). Micro-batch gradients [2, 0] then [0, 2] with max_grad_norm 1:
// the step uses [0.70710653, 0.70710653] (clipping per micro-batch would give [0.4472132, 0.8944269]) and logs
// the pre-clip norm 2.828427.
func TestB31ClipOncePerOptimizerStep(t *testing.T) {
	// Each micro-batch holds one of the window's two examples, so its share n_i/Σn is 1/2: per-example
	// gradients [4, 0] and [0, 4] contribute [2, 0] and [0, 2].
	m := newScriptModel(2, map[int32]float32{1: 0, 2: 0}, map[int32][]float32{1: {4, 0}, 2: {0, 4}})
	a := testArgs(t)
	a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps, a.MaxSteps, a.Shuffle = 1, 2, 1, false
	tr, _, _ := newTestTrainer(t, m, a, ids(1, 2), nil)
	mustTrain(t, tr)
	got := m.zeroed[0]
	if math.Abs(float64(got[0])-0.70710653) > 1e-7 || math.Abs(float64(got[1])-0.70710653) > 1e-7 {
		t.Errorf("clipped gradient %v, want [0.70710653 0.70710653]", got)
	}
	if gn := trainLogs(tr.State().LogHistory)[0]["grad_norm"]; math.Abs(gn-2.828427) > 1e-6 {
		t.Errorf("logged grad_norm %v, want the pre-clip 2.828427", gn)
	}
}

// TestB09ClipAfterUnscale: clipping after unscale_ (torch/amp/grad_scaler.py). Gradient [1.2, 1.6] (norm 2) under FP16 loss scaling at 65536 with
// max_grad_norm 1: the logged norm is 2.0 (not 131072) and the step uses [0.5999997, 0.7999997], the
// parameter change SGD with lr 1 would make.
func TestB09ClipAfterUnscale(t *testing.T) {
	m := newScriptModel(2, map[int32]float32{1: 0}, map[int32][]float32{1: {1.2, 1.6}})
	a := testArgs(t)
	a.FP16, a.MaxSteps, a.PerDeviceTrainBatchSize = true, 1, 1
	tr, _, _ := newTestTrainer(t, m, a, ids(1), nil)
	mustTrain(t, tr)
	if m.seeds[0] != 65536 {
		t.Errorf("backward seed %v, want the loss scale 65536", m.seeds[0])
	}
	log := trainLogs(tr.State().LogHistory)[0]
	if math.Abs(log["grad_norm"]-2) > 1e-6 {
		t.Errorf("logged grad_norm %v, want 2.0 (unscaled)", log["grad_norm"])
	}
	if got := m.zeroed[0]; math.Abs(float64(got[0])-0.5999997) > 1e-7 || math.Abs(float64(got[1])-0.7999997) > 1e-7 {
		t.Errorf("clipped gradient %v, want [0.5999997 0.7999997]", got)
	}
}

// TestB11SchedulerDoesNotAdvanceOnSkippedSteps: the schedule holding on a skipped step (transformers' trainer.py). The first 3 FP16 steps overflow and are skipped,
// the next 3 are clean. With constant_with_warmup (W=10, base LR 1, so f(s) = s/10 during warmup) the LR after
// each iteration is 0, 0, 0, 0.1, 0.2, 0.3: the case's 0.1, 0.1, 0.1, 0.2, 0.3, 0.4 for its lambda (s+1)/10.
// global_step counts the skipped steps, as transformers does; the optimizer does not.
func TestB11SchedulerDoesNotAdvanceOnSkippedSteps(t *testing.T) {
	m := newBagModel(16, 4, 2, 0)
	m.infAtCall = map[int]bool{0: true, 1: true, 2: true}
	a := testArgs(t)
	a.FP16, a.MaxSteps, a.LearningRate, a.WarmupSteps = true, 6, 1, 10
	a.LRSchedulerType = ScheduleConstantWithWarmup
	tr, _, _ := newTestTrainer(t, m, a, toyTask(32, 16, 7), nil)
	mustTrain(t, tr)
	logs := trainLogs(tr.State().LogHistory)
	after := []float64{}
	for _, l := range logs[1:] {
		after = append(after, l["learning_rate"]) // the LR step k+1 used is the LR after iteration k
	}
	after = append(after, tr.sched.LR())
	want := []float64{0, 0, 0, 0.1, 0.2, 0.3}
	wantScale := []float64{65536, 32768, 16384, 8192, 8192, 8192}
	skipped := 0.0
	for i := range want {
		if math.Abs(after[i]-want[i]) > 1e-12 {
			t.Errorf("LR after iteration %d = %v, want %v", i+1, after[i], want[i])
		}
		if logs[i]["loss_scale"] != wantScale[i] {
			t.Errorf("step %d loss_scale %v, want %v", i+1, logs[i]["loss_scale"], wantScale[i])
		}
		skipped += logs[i]["skipped_steps"]
	}
	if skipped != 3 || tr.State().GlobalStep != 6 || tr.opt.Steps() != 3 {
		t.Errorf("skipped %v (want 3), global_step %d (want 6), optimizer steps %d (want 3)", skipped, tr.State().GlobalStep, tr.opt.Steps())
	}
	if !math.IsInf(logs[0]["grad_norm"], 0) && !math.IsNaN(logs[0]["grad_norm"]) {
		t.Errorf("the overflowing step logged a finite grad_norm %v", logs[0]["grad_norm"])
	}
}

// TestB15LoggedLossIsUnscaled: the unscaled logged loss (transformers' trainer.py). Micro-batch 1, GA 8, one optimizer step, in FP32 and in FP16 at scale
// 65536: the logged loss is the mean unscaled loss of the window (within 1e-2 relative of FP32), and so is the
// grad norm; neither is multiplied by the scale or the GA count.
func TestB15LoggedLossIsUnscaled(t *testing.T) {
	data := toyTask(8, 16, 9)
	run := func(fp16 bool) LogEntry {
		a := testArgs(t)
		a.FP16, a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps, a.MaxSteps, a.Shuffle = fp16, 1, 8, 1, false
		tr, _, _ := newTestTrainer(t, newBagModel(16, 8, 2, 0), a, data, nil)
		mustTrain(t, tr)
		return trainLogs(tr.State().LogHistory)[0]
	}
	fp32, fp16 := run(false), run(true)
	// The window mean equals the loss of one forward over all 8 examples.
	whole, err := newBagModel(16, 8, 2, 0).Forward(mustBatch(t, data, 0, 8), ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	if !closeRel(fp32["loss"], float64(whole.Loss), 1e-6) {
		t.Errorf("fp32 logged loss %v, want the mean over the window %v", fp32["loss"], whole.Loss)
	}
	if !closeRel(fp16["loss"], fp32["loss"], 1e-2) || !closeRel(fp16["grad_norm"], fp32["grad_norm"], 1e-2) {
		t.Errorf("fp16 logged loss %v grad_norm %v; fp32 %v %v", fp16["loss"], fp16["grad_norm"], fp32["loss"], fp32["grad_norm"])
	}
	if fp16["loss_scale"] != 65536 {
		t.Errorf("fp16 loss_scale %v, want 65536", fp16["loss_scale"])
	}
}

// TestB13BF16HasNoScaler: a bf16 run has no loss scaler (torch.amp's GradScaler is for float16 only): its logs
// carry no loss_scale (it printed a meaningless "scale 1") and no skipped_steps; the backward seed is 1.
func TestB13BF16HasNoScaler(t *testing.T) {
	m := newBagModel(16, 4, 2, 0)
	a := testArgs(t)
	a.BF16, a.MaxSteps = true, 3
	tr, _, _ := newTestTrainer(t, m, a, toyTask(16, 16, 4), nil)
	mustTrain(t, tr)
	for _, l := range trainLogs(tr.State().LogHistory) {
		if v, ok := l["loss_scale"]; ok {
			t.Errorf("bf16 step %v reports loss_scale %v; bf16 has no loss scale", l["step"], v)
		}
		if _, ok := l["skipped_steps"]; ok {
			t.Errorf("bf16 step %v reports skipped_steps", l["step"])
		}
	}
	if tr.Scaler().Enabled() || m.seeds[0] != 1 || m.policy != amp.BF16 {
		t.Errorf("scaler enabled %v, seed %v, policy %v", tr.Scaler().Enabled(), m.seeds[0], m.policy)
	}
}

func mustBatch(t *testing.T, d Dataset, from, to int) *loaders.Batch {
	t.Helper()
	idx := []int{}
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	b, err := d.Batch(idx)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
