package trainer

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/syncfree"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Steps without host waits.
//
// On an asynchronous backend (CUDA) every value the host reads makes it wait for the device, and a step that
// waits cannot queue the next one while the device works: a small step is then bound by launches and waits.
// So, as transformers' Trainer keeps tr_loss and grad_norm as device tensors and calls .item() only when it
// logs, a BF16/FP32 step here leaves its scalars on the device: each micro-batch's per-row losses are copied
// into a ring (ForwardOptions.DeferLoss), the gradient norm is written into a ring slot (amp.GradNormOnDevice),
// AdamW clips the gradients by it as it reads them (AdamWArgs.GradNorm: the weights of a ClipByNorm pass, without
// the pass), and it skips a step whose norm is non-finite by a device flag (AdamWArgs.Skip). The host reads the rings — one wait — only when it logs, evaluates, saves, ends
// the run, or when the ring is full (every pendingCap steps), and replays each step's bookkeeping in order
// with the same float64 arithmetic, so the logged loss, grad_norm, train_loss and every weight are bit for bit
// those of a step that reads them at once.
//
// What changes: a non-finite loss or gradient norm is reported when the rings are read, naming the step where
// it happened; the flag is sticky, so that step and every later one leave the weights alone (what the run is
// stopped with is what it had before the bad step). The gradient of the bad step is gone by then, so the
// error cannot name the parameter ("tune debug nan" does, and TUNE_SYNC_FREE=0 checks each step at once).
// The progress bar shows the loss of the last read step. FP16 loss scaling keeps its GradScaler on the device
// (deferred16.go).

// pendingCap is the most steps whose scalars wait on the device before the host reads them.
const pendingCap = 64

// deferredSteps holds the device rings and the host record of the steps not yet read.
type deferredSteps struct {
	b      tensor.Backend
	losses *tensor.Tensor // F32 (rowCap) per-row losses of the pending micro-batches
	norms  *tensor.Tensor // I64 (pendingCap) gradient norms of the pending steps (GlobalNormTo's bits)
	flag   *tensor.Tensor // I32 (1) set by a non-finite norm; never reset (the run stops at the next read)
	rows   int            // rows of losses in use
	steps  []pendingStep
	fp16   *scaledSteps // the GradScaler on the device (deferred16.go); nil without FP16 loss scaling

	// Under cuda_graphs (graphs.go) a step writes its scalars to fixed staging buffers — stage (F32, stageRows
	// per micro-batch of a window), normStage (I64 (1)), foundStage (I32 (1), FP16) — and staged holds the
	// copies into the rings that flushStaged issues after the step; all nil otherwise.
	stage, normStage, foundStage *tensor.Tensor
	stageRows                    int
	staged                       []stagedCopy
}

// stagedCopy is one copy of a step's scalars from staging into a ring slot, issued after the step.
type stagedCopy struct{ dst, src *tensor.Tensor }

// stageOr returns where a step writes the scalars bound for ring slot dst: the staging view src, the copy
// queued for flushStaged, when staging is on (stage non-nil); dst itself otherwise.
func (d *deferredSteps) stageOr(dst, src *tensor.Tensor) *tensor.Tensor {
	if src == nil {
		return dst
	}
	d.staged = append(d.staged, stagedCopy{dst: dst, src: src})
	return src
}

// flushStaged issues the step's staged copies, in order.
func (d *deferredSteps) flushStaged() error {
	for _, c := range d.staged {
		if err := d.b.Copy(c.dst, c.src); err != nil {
			return fmt.Errorf("trainer: keeping the step's scalars: %w", err)
		}
	}
	d.staged = d.staged[:0]
	return nil
}

// pendingStep is one optimizer step whose loss and gradient norm are still on the device.
type pendingStep struct {
	step   int     // its global_step (1-based)
	prevLR float64 // the learning rate of the step before it (what lossError reports)
	epoch  float64 // TrainerState.Epoch when it began (what its metrics.jsonl entries say)
	micro  []pendingMicro
}

// pendingMicro is one micro-batch of a pending step.
type pendingMicro struct {
	off, rows int     // its per-row losses in deferredSteps.losses; rows 0 when the model gave a host loss
	count     int     // their divisor (Output.LossCount)
	host      float32 // the loss, when the model read it itself (Output.LossRows nil)
	n, total  int     // its supervised labels and the window's: its loss weighs n/total
	i, of     int     // micro-batch i of the window's of
	batch     *loaders.Batch
}

// deferChecks reports whether this run's steps keep their scalars on the device: on an asynchronous backend
// (tensor.HostWaitCounter), unless TUNE_SYNC_FREE=0 (internal/syncfree); with FP16 loss scaling only when
// every loss scale is a power of two (amp.GradScaler.PowersOfTwo: PyTorch's default factors), where the
// seed formed on the device is exact. t.deferOverride, set by tests, decides instead when non-nil.
func (t *Trainer) deferChecks() bool {
	if t.scaler.Enabled() && !t.scaler.PowersOfTwo() {
		return false
	}
	if t.deferOverride != nil {
		return *t.deferOverride
	}
	_, async := t.model.Backend().(tensor.HostWaitCounter)
	return async && syncfree.Enabled()
}

// newDeferredSteps allocates the rings for windows of up to accum micro-batches of batch rows.
func newDeferredSteps(b tensor.Backend, accum, batch int) (*deferredSteps, error) {
	d := &deferredSteps{b: b}
	var err error
	if d.losses, err = b.Alloc(tensor.F32, pendingCap*accum*batch); err != nil {
		return nil, fmt.Errorf("trainer: step loss ring: %w", err)
	}
	if d.norms, err = b.Alloc(tensor.I64, pendingCap); err != nil {
		d.free()
		return nil, fmt.Errorf("trainer: step norm ring: %w", err)
	}
	if d.flag, err = b.Alloc(tensor.I32, 1); err != nil {
		d.free()
		return nil, fmt.Errorf("trainer: step flag: %w", err)
	}
	return d, nil
}

func (d *deferredSteps) free() {
	d.fp16.free(d.b)
	for _, x := range []*tensor.Tensor{d.losses, d.norms, d.flag} {
		if x != nil {
			d.b.Free(x)
		}
	}
}

// full reports whether the next step of up to accum micro-batches of batch rows might not fit.
func (d *deferredSteps) full(accum, batch int) bool {
	return len(d.steps) == pendingCap || d.rows+accum*batch > d.losses.Numel()
}

// begin opens the record of the step about to run; prevLR is the learning rate the step before it used, epoch
// TrainerState.Epoch before it.
func (d *deferredSteps) begin(step int, prevLR, epoch float64) {
	d.steps = append(d.steps, pendingStep{step: step, prevLR: prevLR, epoch: epoch})
}

// addMicro records micro-batch i of n of the current step: its device losses are copied into the ring.
func (d *deferredSteps) addMicro(out transformer.Output, n, total, i, of int, b *loaders.Batch) error {
	p := &d.steps[len(d.steps)-1]
	m := pendingMicro{n: n, total: total, i: i, of: of, batch: b, host: out.Loss}
	if out.LossRows != nil {
		m.off, m.rows, m.count = d.rows, out.LossRows.Numel(), out.LossCount
		dst, err := d.losses.View(d.rows, m.rows)
		if err != nil {
			return err
		}
		if d.stage != nil {
			if m.rows > d.stageRows {
				return fmt.Errorf("trainer: micro-batch %d has %d loss rows, the step staging holds %d", i+1, m.rows, d.stageRows)
			}
			src, err := d.stage.View(i*d.stageRows, m.rows)
			if err != nil {
				return err
			}
			dst = d.stageOr(dst, src)
		}
		if err := d.b.Copy(dst, out.LossRows); err != nil {
			return fmt.Errorf("trainer: keeping the loss: %w", err)
		}
		d.rows += m.rows
	}
	p.micro = append(p.micro, m)
	return nil
}

// clipAndStep is the optimizer step of a deferred step without loss scaling: the norm into the step's ring slot
// and the skip flag on the device, AdamW unless the flag is set, clipping the gradients as it reads them.
func (t *Trainer) clipAndStep(d *deferredSteps, grads []*tensor.Tensor) error {
	r := &t.run
	slot, err := d.norms.View(len(d.steps)-1, 1)
	if err != nil {
		return err
	}
	slot = d.stageOr(slot, d.normStage)
	clip, err := t.deviceNorm(grads, slot, d.flag)
	if err != nil {
		return err
	}
	r.lr = t.sched.LR()
	step := func() error { return t.opt.StepUnless(r.lr, d.flag, clip) }
	if g := t.graph; g != nil { // the scalars graphs.go wrote before the step
		step = func() error { return t.opt.StepUnlessFrom(g.scal, g.row, d.flag, clip) }
	}
	if err := step(); err != nil {
		return fmt.Errorf("trainer: step %d: %w", t.state.GlobalStep+1, err)
	}
	t.model.WeightsUpdated()
	t.sched.Step()
	return nil
}

// deviceNorm writes the gradient norm of a deferred step into slot and flags a non-finite one in nonFinite
// (when non-nil), and returns the clip AdamW applies as it reads the gradients (max_grad_norm ≤ 0: none).
// Nothing reads the clipped gradients but AdamW — the step zeroes them next — so they are not written back;
// clipInMemory (tests) clips them in memory instead, with a zero DeviceClip.
func (t *Trainer) deviceNorm(grads []*tensor.Tensor, slot, nonFinite *tensor.Tensor) (DeviceClip, error) {
	b, maxNorm := t.model.Backend(), max(t.args.MaxGradNorm, 0)
	if t.clipInMemory {
		if err := amp.ClipGradNormOnDevice(b, grads, maxNorm, slot, nonFinite); err != nil {
			return DeviceClip{}, fmt.Errorf("trainer: step %d: gradient norm: %w", t.state.GlobalStep+1, err)
		}
		return DeviceClip{}, nil
	}
	if err := amp.GradNormOnDevice(b, grads, slot, nonFinite); err != nil {
		return DeviceClip{}, fmt.Errorf("trainer: step %d: gradient norm: %w", t.state.GlobalStep+1, err)
	}
	return DeviceClip{Norm: slot, MaxNorm: maxNorm}, nil
}

// readDeferred reads the pending steps' losses and norms (one wait) and replays their bookkeeping in order: the
// window loss of each (as trainWindow sums it), the running sums and the last grad_norm, as the steps would
// have left them. A non-finite loss or norm is the NonFiniteError of the first step that had it.
func (t *Trainer) readDeferred() error {
	d := t.deferred
	if d == nil || len(d.steps) == 0 {
		return nil
	}
	losses := make([]float32, d.rows)
	if d.rows > 0 {
		view, err := d.losses.View(0, d.rows)
		if err != nil {
			return err
		}
		if err := d.b.Download(losses, view); err != nil {
			return fmt.Errorf("trainer: reading the step losses: %w", err)
		}
	}
	bits := make([]int64, len(d.steps))
	nv, err := d.norms.View(0, len(d.steps))
	if err != nil {
		return err
	}
	if err := d.b.Download(bits, nv); err != nil {
		return fmt.Errorf("trainer: reading the gradient norms: %w", err)
	}
	var found []int32
	if d.fp16 != nil {
		if found, err = d.fp16.readFound(d.b, len(d.steps)); err != nil {
			return err
		}
	}
	steps := d.steps
	d.steps, d.rows = d.steps[:0], 0
	r := &t.run
	for k, p := range steps {
		var loss float64
		prevLR := p.prevLR
		if d.fp16 != nil {
			prevLR, r.scale = r.lr, t.scaler.Scale() // the replay's: the schedule holds on skipped steps
		}
		for _, m := range p.micro {
			l := m.host
			if m.rows > 0 {
				l = transformer.LossOf(losses[m.off:m.off+m.rows], m.count)
			}
			if !isFinite(float64(l)) {
				return t.lossErrorAt(p.step, prevLR, l, m.i, m.of, m.batch)
			}
			loss += float64(l) * float64(m.n) / float64(m.total) // as trainWindow sums it
		}
		norm := math.Float64frombits(uint64(bits[k]))
		if d.fp16 != nil {
			r.gradNorm = norm // a non-finite norm is a skipped step, not an error
			if err := t.replayScaled(p, found[k] != 0); err != nil {
				return err
			}
		} else if !isFinite(norm) {
			e := t.newNonFinite(p.step, NonFiniteGradient)
			e.Value = float32(norm)
			e.Detail = fmt.Sprintf("a gradient was non-finite, so the step was not applied (nor any after it); %s", t.lastCheckpointNote())
			e.Hint = t.hint("lower learning_rate, keep max_grad_norm clipping on, check the data; "+debugHint) + " (TUNE_SYNC_FREE=0 checks each step and names the parameter)"
			return e
		}
		r.lastLoss = loss
		r.trLoss += loss
		r.totalLoss += loss
		r.gradNorm = norm
	}
	if d.fp16 != nil {
		return t.checkScaled(d.fp16)
	}
	return nil
}
