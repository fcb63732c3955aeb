package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/internal/syncfree"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
)

// dropoutStride is the Philox offset distance between the steps' dropout draws (as the trainer's).
const dropoutStride = 1 << 36

// peakResetter is implemented by a backend with allocator statistics (cuda.Backend).
type peakResetter interface{ ResetPeakMemoryStats() }

// memorySource measures the memory of one Run: start records what is allocated before the model is built,
// train resets the peak once it is built, and peak returns the most allocated since train minus what start
// recorded.
type memorySource struct {
	start, train func()
	peak         func() int64
	how          string
}

// memoryOf returns the CUDA caching allocator's counters when b is a CUDA backend (they include the ops' scratch
// buffers, as torch.cuda.max_memory_allocated does), and meter's count of the bytes allocated through it
// otherwise.
func memoryOf(b tensor.Backend, meter *Meter) memorySource {
	if _, ok := cuda.Memory(b); ok {
		if pr, ok := b.(peakResetter); ok {
			var base int64
			return memorySource{
				start: func() {
					st, _ := cuda.Memory(b)
					base = st.Allocated
				},
				train: pr.ResetPeakMemoryStats,
				peak: func() int64 {
					st, _ := cuda.Memory(b)
					return st.PeakAllocated - base
				},
				how: "CUDA caching allocator: peak allocated during the steps minus allocated before the model (size classes, scratch included)",
			}
		}
	}
	var base int64
	return memorySource{
		start: func() { base = meter.Bytes() },
		train: meter.ResetPeak,
		peak:  func() int64 { return meter.Peak() - base },
		how:   "tensors allocated on the backend (Alloc minus Free): peak during the steps minus before the model; ops' internal scratch not counted",
	}
}

// Describe names the device b runs on: the GPU's name for CUDA, the CPU model and core count otherwise.
func Describe(b tensor.Backend) string {
	if d, ok := b.(interface{ Info() cuda.DeviceInfo }); ok {
		return d.Info().Name
	}
	model := runtime.GOARCH
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("cpu: %s (%d cores)", model, runtime.NumCPU())
}

// SyntheticBatch returns a (b, t) batch of token ids drawn uniformly from [1, vocab) (0 is BERT's pad id), no
// padding, token type 0, and labels uniform in [0, labels), all from seed.
func SyntheticBatch(b, t, vocab, labels int, seed uint64) *loaders.Batch {
	rng := rand.New(rand.NewPCG(seed, 0x62656e6368)) // "bench"
	batch := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), TokenTypeIDs: make([]int32, b*t),
		AttentionMask: make([]int32, b*t), Labels: make([]int64, b)}
	for i := range batch.InputIDs {
		batch.InputIDs[i] = int32(1 + rng.IntN(vocab-1))
		batch.AttentionMask[i] = 1
	}
	for i := range batch.Labels {
		batch.Labels[i] = int64(rng.IntN(labels))
	}
	return batch
}

// trainee is the model a Run trains: a BERT, or the same adapted by lora.Apply.
type trainee interface {
	lora.Base
	trainer.Model
}

// stepper runs one optimizer step of a Run.
type stepper struct {
	b      tensor.Backend
	m      trainee
	opt    *trainer.AdamW
	scaler *amp.GradScaler
	batch  *loaders.Batch
	spec   *Spec
	n      int // steps run so far (the dropout offset)

	// norm (I64 (1)) and nonFinite (I32 (1)) are the device scalars of a step without host waits (the gradient
	// norm, its clip and, for BF16 and FP32, the skip of a non-finite step stay on the device); nil with
	// TUNE_SYNC_FREE=0.
	norm, nonFinite *tensor.Tensor
	// dev and table are FP16 loss scaling on the device (amp.DeviceScaler, as the trainer's deferred16.go):
	// the found-inf flag, the skip, the scale update, and AdamW's step from a table row indexed by the
	// device's count of steps taken; nil with TUNE_SYNC_FREE=0, under BF16/FP32, or for scales that are not
	// powers of two.
	dev   *amp.DeviceScaler
	table *tensor.Tensor
	// scal (F32 (1, 3)) and row (I32 (1), 0) are AdamW's scalars on the device for a step without loss
	// scaling run as a CUDA graph: written before each step (prepare), so that the graph's AdamW kernel
	// launches the same arguments every step; nil otherwise.
	scal, row *tensor.Tensor
	prepared  bool // prepare wrote scal for the next step

	out     transformer.Output // the last step's Forward output (its LossRows are valid until the next step)
	skipped bool
}

// step runs Forward, Backward, unscale, clip, AdamW and the scaler update, as the trainer's optimizer step.
// Unless TUNE_SYNC_FREE=0 (internal/syncfree), without loss scaling nothing in it waits for the device: the loss stays on the device (loss reads it), the
// gradient norm is computed there, AdamW clips the gradients by it as it reads them and skips a non-finite step
// by a device flag.
func (s *stepper) step() error {
	seed, opts := s.scaler.Scale(), transformer.ForwardOptions{Train: true, Seed: s.spec.Seed, Offset: uint64(s.n) * dropoutStride,
		DeferLoss: syncfree.Enabled()}
	if s.dev != nil { // the scale multiplies the seed on the device
		seed, opts.LossScale = 1, s.dev.Scale
	}
	opts.BackwardSeed = seed // as the trainer: a causal LM's head back-propagates in Forward
	out, err := s.m.Forward(s.batch, opts)
	if err != nil {
		return err
	}
	s.n++
	s.out = out
	if err := s.m.Backward(seed); err != nil {
		return err
	}
	_, g, _ := s.m.Trainable()
	grads := []*tensor.Tensor{g}
	// Without host waits AdamW clips the gradients as it reads them (the trainer's deferred steps).
	clip := trainer.DeviceClip{Norm: s.norm, MaxNorm: s.spec.MaxGradNorm}
	if s.dev != nil { // FP16 without host waits: unscale, norm, AdamW with the clip and the scale update on the device
		if err := s.dev.Unscale(grads); err != nil {
			return err
		}
		if err := amp.GradNormOnDevice(s.b, grads, s.norm, nil); err != nil {
			return err
		}
		if err := s.opt.StepOnDevice(s.dev.Found, s.table, s.dev.Steps, clip); err != nil {
			return err
		}
		if err := s.dev.Update(nil); err != nil {
			return err
		}
		s.m.WeightsUpdated()
		return s.m.ZeroGrad()
	}
	if s.norm != nil && !s.scaler.Enabled() {
		if err := amp.GradNormOnDevice(s.b, grads, s.norm, s.nonFinite); err != nil {
			return err
		}
		step := func() error { return s.opt.StepUnless(s.spec.LearningRate, s.nonFinite, clip) }
		if s.scal != nil && !s.prepared { // a step outside the graph (the breakdown's): its scalars now
			r := s.opt.NextScalars(s.spec.LearningRate)
			if err := s.b.Upload(s.scal, r[:]); err != nil {
				return err
			}
		}
		s.prepared = false
		if s.scal != nil {
			step = func() error { return s.opt.StepUnlessFrom(s.scal, s.row, s.nonFinite, clip) }
		}
		if err := step(); err != nil {
			return err
		}
		s.m.WeightsUpdated()
		return s.m.ZeroGrad()
	}
	if err := s.scaler.Unscale(grads); err != nil {
		return err
	}
	if s.norm != nil { // FP16 with scales that are not powers of two: the found-inf flag is read on the host
		if err := amp.ClipGradNormOnDevice(s.b, grads, s.spec.MaxGradNorm, s.norm, nil); err != nil {
			return err
		}
	} else if _, err := amp.ClipGradNorm(s.b, grads, s.spec.MaxGradNorm); err != nil {
		return err
	}
	if s.skipped, err = s.scaler.Step(func() error { return s.opt.Step(s.spec.LearningRate) }); err != nil {
		return err
	}
	if err := s.scaler.Update(); err != nil {
		return err
	}
	if !s.skipped {
		s.m.WeightsUpdated()
	}
	return s.m.ZeroGrad()
}

// prepare sets what a step run as a CUDA graph reads from the device, before the step: the Philox base (the
// step's dropout offset) and, with scal, AdamW's scalars.
func (s *stepper) prepare(g *cuda.StepGraph) error {
	if err := g.SetPhiloxBase(uint64(s.n) * dropoutStride); err != nil {
		return err
	}
	if s.scal == nil {
		return nil
	}
	r := s.opt.NextScalars(s.spec.LearningRate)
	s.prepared = true
	return s.b.Upload(s.scal, r[:])
}

// skips returns the steps the device's GradScaler skipped so far (one wait).
func (s *stepper) skips() (int, error) {
	_, _, taken, err := s.dev.Read()
	return s.n - taken, err
}

// loss returns the last step's loss, reading it from the device when the step left it there.
func (s *stepper) loss() (float32, error) {
	if s.out.LossRows == nil {
		return s.out.Loss, nil
	}
	rows := make([]float32, s.out.LossRows.Numel())
	if err := s.b.Download(rows, s.out.LossRows); err != nil {
		return 0, err
	}
	return transformer.LossOf(rows, s.out.LossCount), nil
}

// hostWaits returns the count of host waits on b by op (tensor.HostWaitCounter, the timing event left out),
// or, on a synchronous backend, meter's count of calls that hand device data to the host.
func hostWaits(b tensor.Backend, meter *Meter) map[string]int64 {
	if hc, ok := b.(tensor.HostWaitCounter); ok {
		w := hc.HostWaits()
		delete(w, "Time")
		return w
	}
	return meter.HostReads()
}

// Run builds the model of s on b, trains it for s.Warmup untimed and s.Steps timed steps, then s.Profile
// profiled ones, and returns the measurements. Every buffer the run allocated is freed before it returns, so
// runs may follow each other on one backend. Steps are timed with CUDA events on a CUDA backend (each step
// between two events on the backend's stream; the host waits for the second) and with the wall clock around
// Synchronize otherwise.
func Run(ctx context.Context, b tensor.Backend, s Spec) (res *Result, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	meter := NewMeter(b)
	mem := memoryOf(b, meter)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: internal error: %v", r)
		}
		if serr := b.Synchronize(); serr != nil && err == nil {
			err = fmt.Errorf("bench: %w", serr)
		}
		meter.freeAll()
	}()
	mem.start()
	st, err := build(meter, &s)
	if err != nil {
		return nil, err
	}
	mem.train()
	timer, how := timeOn(b)
	res = newResult(b, &s, st.m)
	res.Timing, res.Memory = how, mem.how
	// The profile's file is created before the warm-up, so that a path that cannot be written costs no step.
	var cpuprof *os.File
	if path := os.Getenv("TUNE_BENCH_CPUPROFILE"); path != "" { // where the host's time per step goes
		if cpuprof, err = createProfile(path, res.Mode); err != nil {
			return nil, err
		}
		defer cpuprof.Close()
	}
	step := st.step
	if s.CUDAGraphs { // probe and capture in the last two warm-up steps
		g, err := cuda.NewStepGraph(b, max(s.Warmup-2, 1))
		if err != nil {
			return nil, fmt.Errorf("bench: --cuda-graphs: %w", err)
		}
		defer g.Close()
		// The steps are the same by construction (one batch): the first replay is checked, later ones launch
		// at once and are compared after (cuda/graph.go). TUNE_GRAPH_VERIFY=-1 checks every replay.
		g.Verify = 1
		if v := os.Getenv("TUNE_GRAPH_VERIFY"); v != "" {
			if g.Verify, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("bench: TUNE_GRAPH_VERIFY=%q: want an integer", v)
			}
		}
		step = func() error {
			if err := st.prepare(g); err != nil {
				return err
			}
			return g.Run(st.step)
		}
		defer func() {
			if res != nil {
				gs := g.Stats()
				res.CUDAGraph = &gs
			}
		}()
	}
	for i := 0; i < s.Warmup; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench: interrupted in warm-up: %w", err)
		}
		if err := step(); err != nil {
			return nil, fmt.Errorf("bench: %s warm-up step %d: %w", res.Key(), i+1, err)
		}
	}
	skips0 := 0
	if st.dev != nil {
		if skips0, err = st.skips(); err != nil {
			return nil, err
		}
	}
	waits := map[string]int64{}
	stopProfile := func() {}
	if cpuprof != nil {
		if err := pprof.StartCPUProfile(cpuprof); err != nil {
			return nil, fmt.Errorf("bench: TUNE_BENCH_CPUPROFILE: %w", err)
		}
		var once sync.Once
		stopProfile = func() { once.Do(pprof.StopCPUProfile) }
		defer stopProfile()
	}
	for i := 0; i < s.Steps; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench: interrupted after %d timed steps: %w", i, err)
		}
		w0 := hostWaits(b, meter)
		ms, err := timer(step)
		if err != nil {
			return nil, fmt.Errorf("bench: %s step %d: %w", res.Key(), i+1, err)
		}
		for op, n := range hostWaits(b, meter) {
			waits[op] += n - w0[op]
		}
		res.StepMS = append(res.StepMS, ms)
		if i == 0 || i == s.Steps-1 { // read after the timed region
			loss, err := st.loss()
			if err != nil {
				return nil, fmt.Errorf("bench: %s step %d: reading the loss: %w", res.Key(), i+1, err)
			}
			if i == 0 {
				res.LossFirst = float64(loss)
			}
			res.LossLast = float64(loss)
		}
		if st.skipped {
			res.SkippedSteps++
		}
	}
	var total int64
	for op, n := range waits {
		if n > 0 {
			if res.HostWaits == nil {
				res.HostWaits = map[string]float64{}
			}
			res.HostWaits[op] = float64(n) / float64(s.Steps)
			total += n
		}
	}
	if s.Steps > 0 {
		res.HostWaitsPerStep = float64(total) / float64(s.Steps)
	}
	if st.dev != nil { // after the timed region
		n, err := st.skips()
		if err != nil {
			return nil, err
		}
		res.SkippedSteps = n - skips0
	}
	stopProfile() // the timed steps only, not the breakdown's
	res.PeakBytes = mem.peak()
	sum := Summarize(res.StepMS)
	res.MedianMS, res.P10MS, res.P90MS = sum.Median, sum.P10, sum.P90
	flops, err := s.countFLOPs(st.m)
	if err != nil {
		return nil, err
	}
	res.FLOPsPerStep = flops.Total()
	res.TokensPerS = float64(s.Batch*s.Seq) / (sum.Median / 1e3)
	res.TFLOPS = res.FLOPsPerStep / (sum.Median / 1e3) / 1e12
	if s.Profile > 0 {
		if res.Breakdown, err = profile(ctx, meter, st, s.Profile); err != nil {
			return nil, err
		}
		res.Breakdown.StepMS = sum.Median
	}
	return res, nil
}

// buildModel makes the model of s on b (a Meter) — a BERT, or the causal LM of s.Decoder — and adapts it when
// s.LoRA is set, under s.Policy. It returns the base model (for its step arena) and the model to train (the
// same model, or its LoRA wrapper).
func buildModel(b tensor.Backend, s *Spec) (arenaModel, trainee, error) {
	var base arenaModel
	var m trainee
	if s.Decoder != nil {
		var err error
		if base, m, err = buildDecoder(b, s); err != nil {
			return nil, nil, err
		}
	} else {
		bm, err := bert.NewBertForSequenceClassification(b, s.Config, s.Seed)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: building %s: %w", s.Model, err)
		}
		if err := bm.SetAttnImplementation(s.AttnImplementation); err != nil {
			return nil, nil, fmt.Errorf("bench: %w", err)
		}
		bm.SetGradientCheckpointing(s.GradientCheckpointing)
		base, m = bm, bm
	}
	if s.LoRA != nil {
		lm, err := lora.Apply(m, *s.LoRA, s.Seed)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: %w", err)
		}
		m = lm
	}
	m.SetPolicy(s.Policy)
	if s.Policy.Enabled { // as the trainer does: frozen projection weights stored once in the autocast dtype
		if err := m.StoreFrozenIn(s.Policy.DType); err != nil {
			return nil, nil, fmt.Errorf("bench: %w", err)
		}
	}
	return base, m, nil
}

// reserve carves base's step arena for s's batch shape.
func reserve(base arenaModel, s *Spec) error {
	if err := base.Reserve(s.Batch, s.Seq); err != nil {
		return fmt.Errorf("bench: reserving activations for %d×%d: %w", s.Batch, s.Seq, err)
	}
	return nil
}

// newAdamW returns the AdamW of a Run: betas (0.9, 0.999), eps 1e-8, s.WeightDecay.
func newAdamW(m trainee, s *Spec) (*trainer.AdamW, error) {
	opt, err := trainer.NewAdamW(m, 0.9, 0.999, 1e-8, s.WeightDecay)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return opt, nil
}

// build makes the model of s on b (a Meter), carves its step arena and creates the optimizer, the scaler and
// the batch.
func build(b tensor.Backend, s *Spec) (*stepper, error) {
	base, m, err := buildModel(b, s)
	if err != nil {
		return nil, err
	}
	if err := reserve(base, s); err != nil {
		return nil, err
	}
	opt, err := newAdamW(m, s)
	if err != nil {
		return nil, err
	}
	scaler, err := amp.NewGradScalerFor(b, s.Policy)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	batch := SyntheticBatch(s.Batch, s.Seq, s.Config.VocabSize, s.Config.NumLabels(), s.Seed)
	if s.Decoder != nil {
		batch = SyntheticCausalBatch(s.Batch, s.Seq, s.Decoder.VocabSize, s.Seed)
	}
	st := &stepper{b: b, m: m, opt: opt, scaler: scaler, batch: batch, spec: s}
	if st.norm, st.nonFinite, err = stepScalars(b, !syncfree.Enabled()); err != nil {
		return nil, err
	}
	if st.norm != nil && scaler.PowersOfTwo() {
		if st.dev, err = scaler.OnDevice(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		rows := s.Warmup + s.Steps + s.Profile + 1 // one per step: the constant learning rate, t = 1, 2, ...
		table := make([]float32, 0, 3*rows)
		for k := range rows {
			r := tensor.AdamWScalars(float32(s.LearningRate), float32(opt.Beta1), float32(opt.Beta2), float32(opt.WeightDecay), k+1)
			table = append(table, r[:]...)
		}
		if st.table, err = b.Alloc(tensor.F32, rows, 3); err == nil {
			err = b.Upload(st.table, table)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: AdamW step table: %w", err)
		}
	}
	if s.CUDAGraphs && st.norm != nil && st.dev == nil && !scaler.Enabled() {
		if st.scal, err = b.Alloc(tensor.F32, 1, 3); err == nil {
			if st.row, err = b.Alloc(tensor.I32, 1); err == nil {
				err = b.Upload(st.row, []int32{0})
			}
		}
		if err != nil {
			return nil, fmt.Errorf("bench: AdamW scalars: %w", err)
		}
	}
	return st, nil
}

// stepScalars allocates the device scalars of a step without host waits (stepper.norm and nonFinite); none
// with TUNE_SYNC_FREE=0 (hostSteps).
func stepScalars(b tensor.Backend, hostSteps bool) (norm, nonFinite *tensor.Tensor, err error) {
	if hostSteps {
		return nil, nil, nil
	}
	if norm, err = b.Alloc(tensor.I64, 1); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	if nonFinite, err = b.Alloc(tensor.I32, 1); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	return norm, nonFinite, nil
}

// newResult fills the configuration fields of a Result for s on b.
func newResult(b tensor.Backend, s *Spec, m trainee) *Result {
	r := &Result{Impl: ImplTune, Device: Describe(b), Backend: b.Name(), Model: s.Model, Batch: s.Batch, Seq: s.Seq,
		Mode: s.Policy.Precision(), Warmup: s.Warmup, Steps: s.Steps, LossFirst: math.NaN(), LossLast: math.NaN(),
		GradientCheckpointing: s.GradientCheckpointing}
	if s.LoRA != nil {
		r.LoRA, r.LoRARank, r.LoRATargets = true, s.LoRA.R, s.LoRA.TargetModules.Names
		if lm, ok := m.(*lora.Model); ok { // PEFT's default or the all-linear shorthand, as Apply resolved it
			if t := lm.Config().TargetModules; t.Names != nil {
				r.LoRATargets = t.Names
			} else if t.Regex != "" {
				r.LoRATargets = []string{t.Regex}
			}
		}
	}
	for _, np := range m.NamedParameters() {
		r.Params += int64(np.Value.Numel())
		if np.Trainable {
			r.TrainableParams += int64(np.Value.Numel())
		}
	}
	return r
}

// profile runs n steps with every op timed alone and returns the per-op sums.
func profile(ctx context.Context, meter *Meter, st *stepper, n int) (*Breakdown, error) {
	timer, how := gatedOn(meter.Backend)
	probe, err := meter.Alloc(tensor.F32, 1)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var launch []float64
	for range 21 {
		ms, _, _, err := timer(func() error { return meter.Backend.Fill(probe, 1) })
		if err != nil {
			return nil, fmt.Errorf("bench: timing a 1-element Fill: %w", err)
		}
		launch = append(launch, ms)
	}
	meter.SetProfiling(true)
	defer meter.SetProfiling(false)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench: interrupted while profiling: %w", err)
		}
		if err := st.step(); err != nil {
			return nil, fmt.Errorf("bench: profiled step %d: %w", i+1, err)
		}
	}
	gemms := meter.Gemms()
	return &Breakdown{Steps: n, Ops: meter.Ops(), Gemms: gemms[:min(len(gemms), 20)], LaunchMS: Percentile(launch, 50), Timing: how}, nil
}

// profiled holds the TUNE_BENCH_CPUPROFILE paths this process has written, so that the later precisions of one
// tune bench (--modes fp32,fp16,bf16) write PATH.MODE beside the first one's PATH instead of failing on it.
var profiled = struct {
	sync.Mutex
	paths map[string]bool
}{paths: map[string]bool{}}

// createProfile creates the new file of a CPU profile (TUNE_BENCH_CPUPROFILE, for `go tool pprof`) of mode's
// timed steps: path for the first run of this process, path.MODE for each later one. An existing file is not
// replaced.
func createProfile(path, mode string) (*os.File, error) {
	profiled.Lock()
	defer profiled.Unlock()
	if profiled.paths[path] {
		path += "." + mode
	} else {
		profiled.paths[path] = true
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: TUNE_BENCH_CPUPROFILE: %w", err)
	}
	return f, nil
}
