package trainer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
)

// These tests drive each way a run meets a non-finite value on the real BERT model, on every backend (the CPU,
// and CUDA in a -tags cuda build) and in each precision, and check how it ends: the error, its message, and
// what output_dir holds afterwards.

// precisions are the three training precisions.
var precisions = []struct {
	name string
	set  func(a *TrainingArguments)
}{
	{"fp32", func(*TrainingArguments) {}},
	{"bf16", func(a *TrainingArguments) { a.BF16 = true }},
	{"fp16", func(a *TrainingArguments) { a.FP16 = true }},
}

// forEachPrecision runs fn on every backend in every precision.
func forEachPrecision(t *testing.T, fn func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool)) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range precisions {
			t.Run(p.name, func(t *testing.T) { fn(t, b, p.set, p.name == "fp16") })
		}
	})
}

// tinyBert is a freshly initialised 2-layer BERT (V 64, C 16) on b.
func tinyBert(t *testing.T, b tensor.Backend) *bert.BertForSequenceClassification {
	t.Helper()
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 64, 16, 2, 2, 32
	cfg.MaxPositionEmbeddings, cfg.ID2Label = 16, bert.DefaultLabels(2)
	m, err := bert.NewBertForSequenceClassification(b, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nanArgs are a short run: 16 examples, batches of 4, logging every step.
func nanArgs(t *testing.T, set func(*TrainingArguments)) TrainingArguments {
	a := testArgs(t)
	a.NumTrainEpochs = 1
	a.LearningRate = 1e-3
	set(&a)
	return a
}

// trainErr trains and returns the *NonFiniteError Train must end with.
func trainErr(t *testing.T, tr *Trainer) *NonFiniteError {
	t.Helper()
	_, err := tr.Train(context.Background())
	var nf *NonFiniteError
	if !errors.As(err, &nf) || !errors.Is(err, ErrNonFinite) {
		t.Fatalf("Train: %v; want a *NonFiniteError", err)
	}
	t.Logf("%v", err)
	return nf
}

// wantIn fails unless msg holds every part.
func wantIn(t *testing.T, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("message %q lacks %q", msg, p)
		}
	}
}

// checkpoints lists the checkpoint-N folders of dir.
func checkpoints(t *testing.T, dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if IsCheckpointDir(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// setElement writes v into element i of tensor x.
func setElement(t *testing.T, b tensor.Backend, x *tensor.Tensor, i int, v float32) {
	t.Helper()
	host := make([]float32, x.Numel())
	if err := b.Download(host, x); err != nil {
		t.Fatal(err)
	}
	host[i] = v
	if err := b.Upload(x, host); err != nil {
		t.Fatal(err)
	}
}

// param returns the named parameter of m.
func param(t *testing.T, m Model, name string) NamedParam {
	t.Helper()
	for _, p := range m.NamedParameters() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no parameter %s", name)
	return NamedParam{}
}

// nanLossModel reports a NaN loss on every Forward.
type nanLossModel struct{ Model }

func (m nanLossModel) Forward(b *loaders.Batch, o ForwardOptions) (Output, error) {
	out, err := m.Model.Forward(b, o)
	out.Loss = float32(math.NaN())
	return out, err
}

func TestNaNLossEveryStep(t *testing.T) {
	forEachPrecision(t, func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool) {
		a := nanArgs(t, set)
		tr, out, _ := newTestTrainer(t, nanLossModel{tinyBert(t, b)}, a, toyTask(16, 64, 1), nil)
		nf := trainErr(t, tr)
		if nf.What != NonFiniteLoss || nf.Step != 1 || !math.IsNaN(float64(nf.Value)) {
			t.Errorf("got %+v; want the loss at step 1", nf)
		}
		precision := map[string]string{"no": "(fp32)", "bf16": "(bf16)", "fp16": "(fp16, loss scale"}[a.MixedPrecision()]
		wantIn(t, nf.Error(), "step 1: the loss is NaN", "micro-batch 1 of 1", precision,
			"the weights are finite", "no checkpoint was written", "tune debug nan")
		if fp16 {
			wantIn(t, nf.Error(), "loss scale 65536", "try bf16")
		}
		if tr.State().GlobalStep != 0 || strings.Contains(out.String(), "step 1/") {
			t.Errorf("the failed step was counted or logged: global_step %d, output %q", tr.State().GlobalStep, out)
		}
		if cps := checkpoints(t, a.OutputDir); len(cps) != 0 {
			t.Errorf("checkpoints written: %v", cps)
		}
	})
}

// infGradModel adds +Inf to one element of a parameter's gradient in the Backward calls listed (from 0).
type infGradModel struct {
	Model
	name  string
	at    map[int]bool
	calls int
}

func (m *infGradModel) Backward(seed float32) error {
	if err := m.Model.Backward(seed); err != nil {
		return err
	}
	defer func() { m.calls++ }()
	if !m.at[m.calls] {
		return nil
	}
	for _, p := range m.Model.NamedParameters() {
		if p.Name == m.name {
			host := make([]float32, p.Grad.Numel())
			if err := m.Backend().Download(host, p.Grad); err != nil {
				return err
			}
			host[5] = float32(math.Inf(1))
			return m.Backend().Upload(p.Grad, host)
		}
	}
	return errors.New("no such parameter")
}

// readMetrics returns metrics.jsonl's entries.
func readMetrics(t *testing.T, dir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestInfInOneMicroBatch: the second micro-batch of the first window (gradient_accumulation_steps 2) puts an
// inf into one gradient. fp16 skips that step, backs the scale off, logs it (warning, metrics.jsonl, log
// entry) and trains on; fp32 and bf16, which cannot skip, stop before the optimizer writes it into the weights.
func TestInfInOneMicroBatch(t *testing.T) {
	const name = "bert.encoder.layer.1.intermediate.dense.weight"
	forEachPrecision(t, func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool) {
		a := nanArgs(t, set)
		a.GradientAccumulationSteps = 2
		m := &infGradModel{Model: tinyBert(t, b), name: name, at: map[int]bool{1: true}}
		tr, _, logs := newTestTrainer(t, m, a, toyTask(16, 64, 1), nil)
		if !fp16 {
			nf := trainErr(t, tr)
			if nf.What != NonFiniteGradient || nf.Param != name || nf.Step != 1 || nf.Index != 5 {
				t.Errorf("got %+v; want the gradient of %s at step 1", nf, name)
			}
			wantIn(t, nf.Error(), "step 1: the gradient of "+name+" is +Inf (element 5)", "the step was not taken", "tune debug nan")
			return
		}
		mustTrain(t, tr)
		if got := tr.State().GlobalStep; got != 2 {
			t.Errorf("global_step %d, want 2 (the skipped step counts, as in transformers)", got)
		}
		wantIn(t, logs.String(), "step 1: the gradient of "+name+" (+Inf at element 5) is non-finite under loss scale 65536: step skipped, the scale backs off to 32768 (1 in a row)")
		var skipped []map[string]any
		for _, e := range readMetrics(t, a.OutputDir) {
			if _, ok := e["skipped"]; ok {
				skipped = append(skipped, e)
			}
		}
		if len(skipped) != 1 || skipped[0]["step"] != 1.0 || skipped[0]["loss_scale"] != 65536.0 || skipped[0]["next_loss_scale"] != 32768.0 {
			t.Errorf("metrics.jsonl skipped-step entries %v, want one for step 1 at scale 65536 → 32768", skipped)
		}
		h := trainLogs(tr.State().LogHistory)
		if len(h) != 2 || h[0]["skipped_steps"] != 1 || h[0]["loss_scale"] != 65536 || h[1]["loss_scale"] != 32768 {
			t.Errorf("log history %v: want step 1 skipped at 65536, step 2 at 32768", h)
		}
	})
}

// TestConsecutiveSkipsStop: every step's gradient overflows; fp16 skips and backs off
// max_consecutive_skipped_steps times and then stops, naming the parameter and the scale, with the checkpoint
// written before the skips kept.
func TestConsecutiveSkipsStop(t *testing.T) {
	const name = "classifier.weight"
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		a := nanArgs(t, func(a *TrainingArguments) { a.FP16 = true })
		a.MaxSteps, a.MaxConsecutiveSkippedSteps = 20, 3
		a.SaveStrategy, a.SaveSteps = IntervalSteps, 1
		at := map[int]bool{}
		for i := 1; i < 20; i++ {
			at[i] = true
		}
		m := &infGradModel{Model: tinyBert(t, b), name: name, at: at}
		tr, _, _ := newTestTrainer(t, m, a, toyTask(16, 64, 1), nil)
		nf := trainErr(t, tr)
		if nf.What != NonFiniteSkipped || nf.Step != 4 || nf.Param != name || nf.Scale != 8192 {
			t.Errorf("got %+v; want a stop at step 4 (steps 2-4 skipped), %s named, scale 65536/8", nf, name)
		}
		wantIn(t, nf.Error(), "step 4: the GradScaler skipped too many steps in a row (fp16, loss scale 8192)",
			"3 steps in a row (max_consecutive_skipped_steps)", name, "the last good checkpoint, checkpoint-3, is kept", "try bf16")
		// Steps 2 and 3 were skipped but completed, so their checkpoints exist; the weights are finite.
		if cps := checkpoints(t, a.OutputDir); len(cps) != 3 {
			t.Errorf("checkpoints %v, want checkpoint-1..3", cps)
		}
	})
}

// TestLRBlowsUp: a learning rate of 1e30 throws the weights to ~1e30 in one AdamW step; the next forward
// overflows and the run stops at step 2, saying the weights diverged, with checkpoint-1 (finite) kept.
func TestLRBlowsUp(t *testing.T) {
	forEachPrecision(t, func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool) {
		a := nanArgs(t, set)
		a.LearningRate, a.MaxGradNorm = 1e30, 0
		a.LRSchedulerType = ScheduleConstant
		a.SaveStrategy, a.SaveSteps = IntervalSteps, 1
		m := tinyBert(t, b)
		tr, _, _ := newTestTrainer(t, m, a, toyTask(16, 64, 1), nil)
		nf := trainErr(t, tr)
		if nf.What != NonFiniteLoss || nf.Step != 2 {
			t.Errorf("got %+v; want the loss at step 2", nf)
		}
		wantIn(t, nf.Error(), "step 2: the loss is", "lower learning_rate", "the last good checkpoint, checkpoint-1, is kept")
		if !strings.Contains(nf.Error(), "the weights are finite but large") && !strings.Contains(nf.Error(), "the weights are non-finite") {
			t.Errorf("message %q does not say the weights diverged", nf.Error())
		}
		if cps := checkpoints(t, a.OutputDir); len(cps) != 1 || cps[0] != "checkpoint-1" {
			t.Errorf("checkpoints %v, want checkpoint-1 only", cps)
		}
	})
}

// plantNaN is a callback that writes a NaN into a trainable weight at the end of step `at`, as a diverged
// update would, before that step's checkpoint is saved.
type plantNaN struct {
	CallbackBase
	name string
	at   int
}

func (p *plantNaN) OnStepEnd(e *Event) error {
	if e.State.GlobalStep != p.at {
		return nil
	}
	for _, np := range e.Model.NamedParameters() {
		if np.Name == p.name {
			host := make([]float32, np.Value.Numel())
			if err := e.Model.Backend().Download(host, np.Value); err != nil {
				return err
			}
			host[2] = float32(math.NaN())
			return e.Model.Backend().Upload(np.Value, host)
		}
	}
	return errors.New("no such parameter")
}

// TestNoCheckpointWithNaNWeights: weights that turn NaN at step 2 are never saved: checkpoint-2 is refused,
// checkpoint-1 stays, and SaveModel refuses too.
func TestNoCheckpointWithNaNWeights(t *testing.T) {
	const name = "bert.encoder.layer.0.attention.self.value.weight"
	forEachPrecision(t, func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool) {
		a := nanArgs(t, set)
		a.SaveStrategy, a.SaveSteps = IntervalSteps, 1
		tr, _, _ := newTestTrainer(t, tinyBert(t, b), a, toyTask(16, 64, 1), nil, WithCallbacks(&plantNaN{name: name, at: 2}))
		nf := trainErr(t, tr)
		if nf.What != NonFiniteWeights || nf.Param != name || nf.Index != 2 || nf.Step != 2 {
			t.Errorf("got %+v; want the weights of %s at step 2", nf, name)
		}
		wantIn(t, nf.Error(), "step 2: the weights of "+name+" are NaN (element 2)", "refusing to write checkpoint-2",
			"the last good checkpoint, checkpoint-1, is kept")
		if cps := checkpoints(t, a.OutputDir); len(cps) != 1 || cps[0] != "checkpoint-1" {
			t.Errorf("checkpoints %v, want checkpoint-1 only", cps)
		}
		dir := filepath.Join(a.OutputDir, "final")
		if err := tr.SaveModel(dir); !errors.Is(err, ErrNonFinite) {
			t.Errorf("SaveModel: %v, want ErrNonFinite", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
			t.Error("SaveModel wrote model.safetensors with NaN weights")
		}
	})
}

// TestNaNInCheckpointWeights: a checkpoint whose model.safetensors holds a NaN (fine-tuning from it, and
// resuming from it) stops before the first step, naming the tensor; nothing is written.
func TestNaNInCheckpointWeights(t *testing.T) {
	const name = "bert.encoder.layer.1.attention.output.LayerNorm.weight"
	forEachPrecision(t, func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool) {
		// A run saves checkpoint-2; its weights are then replaced by a copy with a NaN.
		a := nanArgs(t, set)
		a.MaxSteps, a.SaveStrategy, a.SaveSteps = 2, IntervalSteps, 2
		m := tinyBert(t, b)
		tr, _, _ := newTestTrainer(t, m, a, toyTask(16, 64, 1), nil)
		mustTrain(t, tr)
		ck := filepath.Join(a.OutputDir, "checkpoint-2")
		setElement(t, b, param(t, m, name).Value, 7, float32(math.NaN()))
		if err := m.Save(ck); err != nil {
			t.Fatal(err)
		}
		if err := WriteCheckpointManifest(ck); err != nil { // a checkpoint saved with the NaN, not altered after
			t.Fatal(err)
		}

		t.Run("load", func(t *testing.T) {
			loaded, _, err := bert.LoadPretrained(ck, b, transformer.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a2 := nanArgs(t, set)
			tr, _, _ := newTestTrainer(t, loaded, a2, toyTask(16, 64, 1), nil)
			nf := trainErr(t, tr)
			if nf.What != NonFiniteWeights || nf.Param != name || nf.Index != 7 || nf.Step != 1 {
				t.Errorf("got %+v; want the weights of %s before step 1", nf, name)
			}
			wantIn(t, nf.Error(), "step 1: the weights of "+name+" are NaN (element 7)", "training did not start, and nothing was written",
				"checkpoint the model was loaded from is corrupt", "tune debug nan --model DIR")
			if !badinput.Is(nf) { // the input must change: exit status 2, not 1 (tester 12)
				t.Error("non-finite weights as loaded are not a bad-input error")
			}
		})
		t.Run("resume", func(t *testing.T) {
			a.MaxSteps, a.ResumeFromCheckpoint = 4, ck
			tr, _, _ := newTestTrainer(t, tinyBert(t, b), a, toyTask(16, 64, 1), nil)
			nf := trainErr(t, tr)
			if nf.What != NonFiniteWeights || nf.Param != name || nf.Step != 3 {
				t.Errorf("got %+v; want the weights of %s before the resumed step 3", nf, name)
			}
			if !badinput.Is(nf) {
				t.Error("non-finite weights in the checkpoint resumed from are not a bad-input error")
			}
			if cps := checkpoints(t, a.OutputDir); len(cps) != 1 {
				t.Errorf("checkpoints %v, want checkpoint-2 only", cps)
			}
		})
	})
}

// TestScaleChangesInMetrics: every change of the fp16 loss scale is a metrics.jsonl line, the backoff of a
// skipped step and a growth after growth_interval clean steps alike, so the scale of every step can be read
// from metrics.jsonl.
func TestScaleChangesInMetrics(t *testing.T) {
	a := nanArgs(t, func(a *TrainingArguments) { a.FP16 = true })
	a.MaxSteps, a.LoggingSteps = 4, 10
	o := amp.DefaultGradScalerOptions()
	o.GrowthInterval = 2
	m := &infGradModel{Model: tinyBert(t, cpu.New()), name: "classifier.weight", at: map[int]bool{0: true}}
	tr, _, _ := newTestTrainer(t, m, a, toyTask(16, 64, 1), nil, WithGradScalerOptions(o))
	mustTrain(t, tr)
	var got [][2]float64
	for _, e := range readMetrics(t, a.OutputDir) {
		if v, ok := e["next_loss_scale"]; ok {
			got = append(got, [2]float64{e["step"].(float64), v.(float64)})
		}
	}
	want := [][2]float64{{1, 32768}, {3, 65536}} // step 1 skipped; steps 2 and 3 clean: growth after step 3
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("scale changes (step, new scale) %v, want %v", got, want)
	}
}

// regressionSet turns toyTask's labels into regression targets, with +Inf as the target of example inf.
type regressionSet struct {
	*sliceDataset
	inf int
}

func (d regressionSet) Batch(idx []int) (*loaders.Batch, error) {
	b, err := d.sliceDataset.Batch(idx)
	if err != nil {
		return nil, err
	}
	b.Targets = make([]float32, len(idx))
	for r, i := range idx {
		b.Targets[r] = float32(b.Labels[r])
		if i == d.inf {
			b.Targets[r] = float32(math.Inf(1))
		}
	}
	b.Labels = nil
	return b, nil
}

// TestInfTargetInOneMicroBatch: a regression target of +Inf in the second micro-batch of the first window
// makes that micro-batch's loss inf; the run stops at step 1 naming the micro-batch, the row and the value, in
// every precision.
func TestInfTargetInOneMicroBatch(t *testing.T) {
	forEachPrecision(t, func(t *testing.T, b tensor.Backend, set func(*TrainingArguments), fp16 bool) {
		cfg := bert.DefaultBertConfig()
		cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 64, 16, 2, 2, 32
		cfg.MaxPositionEmbeddings, cfg.ID2Label = 16, bert.DefaultLabels(1)
		m, err := bert.NewBertForSequenceClassification(b, cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		a := nanArgs(t, set)
		a.GradientAccumulationSteps, a.Shuffle = 2, false
		tr, _, _ := newTestTrainer(t, m, a, regressionSet{toyTask(16, 64, 1), 5}, nil)
		nf := trainErr(t, tr)
		if nf.What != NonFiniteLoss || nf.Step != 1 || !math.IsInf(float64(nf.Value), 0) {
			t.Errorf("got %+v; want an inf loss at step 1", nf)
		}
		wantIn(t, nf.Error(), "step 1: the loss is +Inf", "micro-batch 2 of 2 has the regression target +Inf in row 2",
			"the training data holds a non-finite value", "no checkpoint was written", "fix that example")
	})
}

// TestNonFiniteErrorNamesThePrecision: the message names the precision as recipes do (fp32, bf16, fp16) and
// the loss scale only where there is one (fp16); it read "(precision no, loss scale 1)" for an fp32 run.
func TestNonFiniteErrorNamesThePrecision(t *testing.T) {
	for _, tt := range []struct{ precision, want string }{
		{"no", "step 3: the loss is NaN (fp32): "},
		{"bf16", "step 3: the loss is NaN (bf16): "},
		{"fp16", "step 3: the loss is NaN (fp16, loss scale 1024): "},
	} {
		e := &NonFiniteError{Step: 3, What: NonFiniteLoss, Value: float32(math.NaN()), Scale: 1024, Precision: tt.precision, Detail: "d"}
		if got := e.Error(); got != "trainer: "+tt.want+"d" {
			t.Errorf("%s: %q, want %q", tt.precision, got, "trainer: "+tt.want+"d")
		}
	}
}
