package trainer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// fakeGraph stands in for cuda.StepGraph on a backend without CUDA graphs: it runs each step as given, so
// the CPU runs the cuda_graphs code paths (the Philox base and AdamW scalars set before the step, the
// scalars staged and copied into the rings after it).
type fakeGraph struct{ runs, bases int }

func (f *fakeGraph) SetPhiloxBase(base uint64) error { f.bases++; return nil }
func (f *fakeGraph) Run(fn func() error) error       { f.runs++; return fn() }
func (f *fakeGraph) Stats() cuda.GraphStats          { return cuda.GraphStats{Eager: f.runs} }
func (f *fakeGraph) Close()                          {}

// fixedLength pads every batch of d to T tokens (padding: max_length), so that every full batch has one
// shape.
type fixedLength struct {
	*sliceDataset
	T int
}

func (d fixedLength) Batch(idx []int) (*loaders.Batch, error) {
	b, err := d.sliceDataset.Batch(idx)
	if err != nil {
		return nil, err
	}
	p := &loaders.Batch{B: b.B, T: d.T, Labels: b.Labels, InputIDs: make([]int32, b.B*d.T), TokenTypeIDs: make([]int32, b.B*d.T),
		AttentionMask: make([]int32, b.B*d.T)}
	for r := range b.B {
		copy(p.InputIDs[r*d.T:], b.InputIDs[r*b.T:(r+1)*b.T])
		copy(p.AttentionMask[r*d.T:], b.AttentionMask[r*b.T:(r+1)*b.T])
	}
	return p, nil
}

// withGraphs turns cuda_graphs on: the real graphs on CUDA, fakeGraph elsewhere; stats reports how the
// steps of the last Train call ran and whether they were real graphs.
func withGraphs(b tensor.Backend) (opt Option, stats func(*Trainer) (cuda.GraphStats, bool)) {
	real := false
	if g, err := cuda.NewStepGraph(b, 0); err == nil {
		g.Close()
		real = true
	}
	var last graphRunner
	opt = func(t *Trainer) {
		t.args.CUDAGraphs = true
		if !real {
			t.graphRunner = func(tensor.Backend) graphRunner { last = &fakeGraph{}; return last }
		} else {
			t.graphRunner = func(b tensor.Backend) graphRunner {
				g, _ := cuda.NewStepGraph(b, graphWarmup)
				last = g
				return g
			}
		}
	}
	return opt, func(*Trainer) (cuda.GraphStats, bool) {
		if last == nil {
			return cuda.GraphStats{}, real
		}
		return last.Stats(), real
	}
}

// TestCUDAGraphStepsAreBitIdentical: steps run as CUDA graphs (on CUDA; the same code paths on the CPU)
// train and log bit for bit as steps without (weights, every loss, grad_norm, learning_rate), over
// accumulation windows with a short last one (run eagerly), dropout, clipping, evaluation and checkpoints,
// in BF16, FP32 and FP16 (its found-inf flags staged too);
// on CUDA steps replay. A second configuration (full windows, no evaluation) replays every step after
// the capture without updating a graph node.
func TestCUDAGraphStepsAreBitIdentical(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		w := asyncBackend(t, b)
		for _, c := range []struct {
			name     string
			set      func(*TrainingArguments)
			examples int
			unpatch  bool
		}{
			{"bf16 windows of 2", func(a *TrainingArguments) { a.BF16, a.MaxSteps = true, 14 }, 20, false},
			{"fp32", func(a *TrainingArguments) { a.MaxSteps = 10 }, 20, false},
			{"fp16 (the GradScaler on the device)", func(a *TrainingArguments) { a.FP16, a.MaxSteps = true, 10 }, 20, false},
			{"bf16 full windows", func(a *TrainingArguments) {
				a.BF16, a.GradientAccumulationSteps, a.PerDeviceTrainBatchSize, a.MaxSteps = true, 1, 4, 12
				a.EvalStrategy, a.SaveStrategy, a.LoggingSteps = IntervalNo, IntervalNo, 6
			}, 16, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				data, eval := fixedLength{toyTask(c.examples, 64, 11), 8}, toyTask(7, 64, 5)
				graphs, stats := withGraphs(w)
				run := func(opts ...Option) (*Trainer, []float32, *logCapture) {
					m := tinyBert(t, w)
					tr, _, logs := newTestTrainer(t, m, deferredArgs(t, c.set), data, eval, append([]Option{deferSteps(true)}, opts...)...)
					mustTrain(t, tr)
					params, _, _ := m.Trainable()
					return tr, tensortest.Download(t, w, params), logs
				}
				eager, ew, _ := run()
				graphed, gw, logs := run(graphs)
				st, real := stats(graphed)
				t.Logf("%+v (real graphs: %v)", st, real)
				if !slices.Equal(ew, gw) {
					t.Fatalf("weights with cuda_graphs differ from those without (%+v)", st)
				}
				compareTrainLogs(t, eager.State().LogHistory, graphed.State().LogHistory)
				if !strings.Contains(logs.String(), "cuda_graphs: steps") {
					t.Errorf("no cuda_graphs report in the log:\n%s", logs.String())
				}
				if !real {
					return
				}
				// Train closes its graph before returning (Off "closed"). An evaluation between steps carves the
				// activation arena for its own batch shape and back, which moves the pass buffers: the next step's
				// uploads go elsewhere, so it runs eagerly and the one after captures again.
				if off := strings.TrimPrefix(st.Off, "closed"); off != "" || st.Replays < 1 {
					t.Errorf("stats %+v: want graphs on and replays", st)
				}
				if c.unpatch && (st.Patched != 0 || st.Replays != 12-graphWarmup-2) { // 12 steps: warm-up, probe, capture
					t.Errorf("stats %+v: want %d replays, no node patched", st, 12-graphWarmup-2)
				}
			})
		}
	})
}

// compareTrainLogs compares the training log entries of two runs that must be bit-identical.
func compareTrainLogs(t *testing.T, want, got []LogEntry) {
	t.Helper()
	wl, gl := trainLogs(want), trainLogs(got)
	if len(wl) != len(gl) || len(wl) == 0 {
		t.Fatalf("%d and %d training logs", len(wl), len(gl))
	}
	for i := range wl {
		for _, k := range []string{"loss", "learning_rate", "grad_norm", "epoch", "step"} {
			if wl[i][k] != gl[i][k] {
				t.Errorf("log %d %s: %v without cuda_graphs, %v with", i, k, wl[i][k], gl[i][k])
			}
		}
	}
}

// TestCUDAGraphResumeIsBitIdentical: a run with cuda_graphs stopped after its checkpoint and resumed with
// cuda_graphs ends with the weights and logs of an uninterrupted run without graphs.
func TestCUDAGraphResumeIsBitIdentical(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		async := asyncBackend(t, b)
		data := fixedLength{toyTask(24, 64, 11), 8}
		set := func(a *TrainingArguments) {
			a.BF16, a.EvalStrategy, a.LoggingSteps, a.MaxSteps = true, IntervalNo, 2, 12
			a.GradientAccumulationSteps, a.PerDeviceTrainBatchSize, a.SaveSteps = 1, 4, 6
		}
		full := tinyBert(t, async)
		trFull, _, _ := newTestTrainer(t, full, deferredArgs(t, set), data, nil, deferSteps(true))
		mustTrain(t, trFull)

		dir := t.TempDir()
		args := func() TrainingArguments {
			a := deferredArgs(t, set)
			a.OutputDir = dir
			return a
		}
		graphs, stats := withGraphs(async)
		ctx, cancel := context.WithCancel(context.Background())
		first, _, _ := newTestTrainer(t, tinyBert(t, async), args(), data, nil, deferSteps(true), graphs,
			WithCallbacks(&stopAfterSave{step: 6, cancel: cancel}))
		if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run returned %v, want context.Canceled", err)
		}
		a := args()
		a.ResumeFromCheckpoint = "true"
		resumed := tinyBert(t, async)
		trRes, _, _ := newTestTrainer(t, resumed, a, data, nil, deferSteps(true), graphs)
		mustTrain(t, trRes)
		st, real := stats(trRes)
		t.Logf("resumed: %+v (real graphs: %v)", st, real)
		fp, _, _ := full.Trainable()
		rp, _, _ := resumed.Trainable()
		if !slices.Equal(tensortest.Download(t, full.Backend(), fp), tensortest.Download(t, resumed.Backend(), rp)) {
			t.Fatal("resumed weights with cuda_graphs differ from the uninterrupted run's without")
		}
		compareTrainLogs(t, trFull.State().LogHistory, trRes.State().LogHistory)
		if real && st.Replays < 1 {
			t.Errorf("the resumed run replayed no step: %+v", st)
		}
	})
}

// TestCUDAGraphsOffWithAReason: with steps that read their scalars on the host, cuda_graphs logs why the
// steps run eagerly and trains as without it.
func TestCUDAGraphsOffWithAReason(t *testing.T) {
	for _, c := range []struct {
		deferred bool
		why      string
		b        tensor.Backend
	}{{false, "read their loss or gradient norm on the host", newWaitCounter()}, {true, "need a CUDA", newWaitCounter()},
		{false, "the cpu backend has no CUDA graphs", cpu.New()}} {
		m := tinyBert(t, c.b)
		a := deferredArgs(t, func(a *TrainingArguments) { a.CUDAGraphs, a.MaxSteps, a.EvalStrategy = true, 3, IntervalNo })
		tr, _, logs := newTestTrainer(t, m, a, toyTask(20, 64, 11), nil, deferSteps(c.deferred))
		mustTrain(t, tr)
		if l := logs.String(); !strings.Contains(l, "cuda_graphs: the steps run eagerly") || !strings.Contains(l, c.why) {
			t.Errorf("deferred %v: no reason %q logged:\n%s", c.deferred, c.why, l)
		}
	}
}
