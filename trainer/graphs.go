package trainer

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// One CUDA graph per optimizer step (TrainingArguments.CUDAGraphs).
//
// A deferred step (deferred.go) waits for nothing, so on CUDA it can run as one graph (cuda.StepGraph): the
// first graphWarmup steps run eagerly, the next is a probe, the one after is captured, and later steps replay
// it, each checked against the capture by re-running its host code with the operations recorded. For the
// replays to launch the same kernel arguments, what changes from step to step is written to the device
// before the step, outside the graph: the Philox base of the step's dropout (its first micro-batch's offset,
// cuda.StepGraph.SetPhiloxBase) and AdamW's scalars for the step's learning rate and bias corrections
// (AdamW.StepUnlessFrom; FP16 steps take theirs from the deferred table). The values a step leaves for the
// host — each micro-batch's per-row losses, the gradient norm, the FP16 found-inf flag — go to fixed staging
// buffers in the graph and are copied into their ring slots after it. The batches' bytes reach the graph
// through its upload slots. Every step under cuda_graphs takes these paths, replayed or not, so the weights
// are bit for bit those of a run without graphs; a step whose batches have another shape than the captured
// step's (a short last batch, per-batch padding) runs eagerly, the first such reason logged.

// graphWarmup is the eager steps before the probe: kernel compilation, GEMM plans and the allocator's
// first allocations happen there.
const graphWarmup = 2

// graphRunner is what the trainer needs of a step graph: cuda.StepGraph, or a stand-in in tests.
type graphRunner interface {
	SetPhiloxBase(base uint64) error
	Run(fn func() error) error
	Stats() cuda.GraphStats
	Close()
}

// stepGraph is the CUDA graph state of a Train call.
type stepGraph struct {
	g         graphRunner
	scal, row *tensor.Tensor // AdamW's scalars of the step (F32 (1, 3)) and their row (I32 (1), 0)
	shape     string         // the batch shapes of the steps the graph runs (the first graph step's)
	eager     map[string]bool
	reported  bool
}

// newStepGraph sets up cuda_graphs for this Train call; it returns nil, with the reason logged, when the
// steps cannot run as graphs.
func (t *Trainer) newStepGraph() (*stepGraph, error) {
	b := t.model.Backend()
	if _, async := b.(tensor.HostWaitCounter); !async && t.graphRunner == nil {
		t.logger.Warn(fmt.Sprintf("cuda_graphs: the steps run eagerly: the %s backend has no CUDA graphs (device: cuda runs them)", b.Name()))
		return nil, nil
	}
	if t.deferred == nil {
		t.logger.Warn("cuda_graphs: the steps run eagerly: they read their loss or gradient norm on the host (TUNE_SYNC_FREE=0, or FP16 loss scales that are not powers of two)")
		return nil, nil
	}
	var g graphRunner
	if t.graphRunner != nil {
		g = t.graphRunner(b)
	} else {
		cg, err := cuda.NewStepGraph(b, graphWarmup)
		if err != nil {
			t.logger.Warn("cuda_graphs: the steps run eagerly", "reason", err.Error())
			return nil, nil
		}
		g = cg
	}
	sg := &stepGraph{g: g, eager: map[string]bool{}}
	d := t.deferred
	var err error
	alloc := func(x **tensor.Tensor, dt tensor.DType, shape ...int) {
		if err == nil {
			*x, err = b.Alloc(dt, shape...)
		}
	}
	alloc(&sg.scal, tensor.F32, 1, 3)
	alloc(&sg.row, tensor.I32, 1)
	alloc(&d.stage, tensor.F32, t.args.GradientAccumulationSteps*t.args.PerDeviceTrainBatchSize)
	alloc(&d.normStage, tensor.I64, 1)
	if d.fp16 != nil {
		alloc(&d.foundStage, tensor.I32, 1)
	}
	if err == nil {
		err = b.Upload(sg.row, []int32{0})
	}
	if err != nil {
		sg.free(b, d)
		return nil, fmt.Errorf("trainer: cuda_graphs: %w", err)
	}
	d.stageRows = t.args.PerDeviceTrainBatchSize
	t.logger.Info("cuda_graphs: each optimizer step runs as one CUDA graph after the warm-up", "warmup_steps", graphWarmup)
	return sg, nil
}

func (sg *stepGraph) free(b tensor.Backend, d *deferredSteps) {
	if sg == nil {
		return
	}
	if sg.g != nil {
		sg.g.Close()
	}
	for _, x := range []**tensor.Tensor{&sg.scal, &sg.row, &d.stage, &d.normStage, &d.foundStage} {
		if *x != nil {
			b.Free(*x)
			*x = nil
		}
	}
}

// batchShapes describes what a step's kernels depend on in its batches: their count and each one's
// dimensions and optional inputs.
func batchShapes(batches []*loaders.Batch) string {
	var sb strings.Builder
	for i, b := range batches {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%dx%d", b.B, b.T)
		for _, x := range []struct {
			on   bool
			what string
		}{{b.AttentionMask != nil, "m"}, {b.TokenTypeIDs != nil, "t"}, {b.PositionIDs != nil, "p"}, {b.SegmentIDs != nil, "s"},
			{b.Labels != nil, "l"}, {b.Targets != nil, "y"}} {
			if x.on {
				sb.WriteString(x.what)
			}
		}
	}
	return sb.String()
}

// step runs one optimizer step (run: its windows' forward and backward, then optimizerStep) through the
// graph, or eagerly when its batches' shapes differ from the graph's; then the copies of its scalars into
// the rings.
func (sg *stepGraph) step(t *Trainer, batches []*loaders.Batch, run func() error) error {
	b := t.model.Backend()
	if err := sg.g.SetPhiloxBase(t.run.dropoutOffset); err != nil {
		return fmt.Errorf("trainer: step %d: %w", t.state.GlobalStep+1, err)
	}
	if t.deferred.fp16 == nil {
		r := t.opt.NextScalars(t.sched.LR())
		if err := b.Upload(sg.scal, r[:]); err != nil {
			return fmt.Errorf("trainer: step %d: AdamW scalars: %w", t.state.GlobalStep+1, err)
		}
	}
	shape := batchShapes(batches)
	if sg.shape == "" {
		sg.shape = shape
	}
	var err error
	if shape == sg.shape {
		err = sg.g.Run(run)
	} else {
		if why := fmt.Sprintf("batches %s, the graph's %s", shape, sg.shape); !sg.eager[why] {
			sg.eager[why] = true
			t.logger.Info("cuda_graphs: a step runs eagerly", "step", t.state.GlobalStep+1, "reason", why)
		}
		err = run()
	}
	if err != nil {
		return err
	}
	return t.deferred.flushStaged()
}

// report logs how the steps ran (once, at the end of training).
func (sg *stepGraph) report(t *Trainer) {
	if sg == nil || sg.reported {
		return
	}
	sg.reported = true
	st := sg.g.Stats()
	args := []any{"replays", st.Replays, "captures", st.Captures, "eager", st.Eager, "patched_nodes", st.Patched}
	if st.Off != "" {
		args = append(args, "off", st.Off)
	}
	if st.Mismatch != "" {
		args = append(args, "last_mismatch", st.Mismatch)
	}
	if len(st.PatchedKernels) > 0 {
		args = append(args, "patched_kernels", strings.Join(st.PatchedKernels, ","))
	}
	t.logger.Info("cuda_graphs: steps", args...)
}
