package lora

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Linear is PEFT's lora.Linear around one base projection (peft/tuners/lora/layer.py; peft/tuners/lora/layer.py):
//
//	out = x·Wᵀ + b + scaling · (dropout(x)·Aᵀ)·Bᵀ
//
// with the base W (Out, In) and b (Out) frozen (unless bias says otherwise, see Config.Bias), A (R, In) and
// B (Out, R) FP32 trainable master weights, scaling = lora_alpha/r (or /√r with use_rslora) and dropout applied
// to the adapter branch's input only. Legend: N rows (B·T tokens, or B for the pooler), In/Out the base's
// features, R the rank; h is the pass's GEMM dtype (F32, or F16/BF16 under autocast).
//
// Numerics: the four GEMMs are GEMM-class, so under autocast A and B are read through the pass's weight-cast
// cache (cast to half once per optimizer step, as every weight) and accumulate in FP32. The adapter's output is
// added to the base output inside the last GEMM (beta = 1), rounding once; PyTorch rounds lora_B(h), then
// ·scaling, then the sum, to half. Gradients of A and B accumulate straight into their FP32 master gradients.
// The frozen base weight gets no gradient and costs no weight-gradient GEMM: its backward computes only the
// input gradient.
//
// Linear implements transformer.Projection; Apply puts it in place of the model's projection.
type Linear struct {
	base *transformer.Linear
	// A is lora_A's weight (R, In), B is lora_B's weight (Out, R); FP32 master parameters.
	A, B *transformer.Param
	// R is the rank.
	R int
	// Scaling multiplies the adapter's output (Config.Scaling).
	Scaling float32
	// Dropout is lora_dropout, the probability applied to the adapter branch's input in training passes.
	Dropout float32

	merged bool
	c      linearCache
}

var _ transformer.Projection = (*Linear)(nil)

// linearCache holds one pass's buffers (views of the model's step arena).
type linearCache struct {
	xd       *tensor.Tensor // (N, In) h dropout(x), shared scratch; nil when Dropout is 0
	dxd      *tensor.Tensor // (N, In) F32 gradient of dropout(x), shared scratch; nil when Dropout is 0
	h        *tensor.Tensor // (N, R) h dropout(x)·Aᵀ, kept for dB
	dh       *tensor.Tensor // (N, R) h gradient of h (with the scaling folded in)
	aIn      *tensor.Tensor // the input of A in the last Forward: xd, or x itself without dropout
	dropOff  uint64         // Philox offset of the last Forward's mask
	dropUsed bool
	ready    bool // a training Forward ran and no Backward has consumed it yet
}

// ErrMerged is returned when a merged adapter is asked to train (Backward) or to merge again.
var ErrMerged = errors.New("the adapter is merged into the base weight")

// NewLinear wraps base with a rank cfg.R adapter: A and B are allocated on b and initialised by
// cfg.InitLoraWeights (PEFT's reset_lora_parameters) from seed:
//   - "true" (default): A ~ Kaiming-uniform(a=√5) = U(−1/√In, 1/√In) (torch.nn.Linear's default), B = 0, so the
//     adapter starts as a no-op;
//   - "gaussian": A ~ N(0, (1/R)²), B = 0;
//   - "false": A and B both U(−1/√fan_in, 1/√fan_in) with fan_in In for A and R for B.
//
// The base's weight is marked frozen and its bias trainable only when trainBias; the model re-packs the
// parameters when the Linear replaces its projection (Apply does this). The draws come from a PCG seeded with
// seed, so the same seed gives the same adapter on any backend; they do not reproduce PyTorch's generator.
func NewLinear(b tensor.Backend, base *transformer.Linear, cfg Config, trainBias bool, seed uint64) (*Linear, error) {
	if base == nil || base.Weight == nil {
		return nil, errors.New("lora: NewLinear needs a base Linear with a weight")
	}
	if cfg.R <= 0 {
		return nil, fmt.Errorf("lora: rank r must be > 0 (got %d)", cfg.R)
	}
	if !(cfg.LoraDropout >= 0 && cfg.LoraDropout < 1) {
		return nil, fmt.Errorf("lora: lora_dropout must be in [0, 1) (got %v)", cfg.LoraDropout)
	}
	l := &Linear{base: base, R: cfg.R, Scaling: float32(cfg.Scaling()), Dropout: float32(cfg.LoraDropout)}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f7261)) // "lora"
	a, err := newParam(b, cfg.R, base.In)
	if err != nil {
		return nil, err
	}
	bw, err := newParam(b, base.Out, cfg.R)
	if err != nil {
		b.Free(a.Value)
		return nil, err
	}
	var av, bv []float32
	if !tensor.IsMeta(b) { // on a meta backend (a memory plan) there are no values to draw
		av, bv = make([]float32, cfg.R*base.In), make([]float32, base.Out*cfg.R)
	}
	switch init := cfg.InitLoraWeights; init {
	case InitDefault, "":
		uniform(rng, av, 1/math.Sqrt(float64(base.In)))
	case InitGaussian:
		for i := range av {
			av[i] = float32(rng.NormFloat64() / float64(cfg.R))
		}
	case InitRandom:
		uniform(rng, av, 1/math.Sqrt(float64(base.In)))
		uniform(rng, bv, 1/math.Sqrt(float64(cfg.R)))
	default:
		b.Free(a.Value)
		b.Free(bw.Value)
		return nil, fmt.Errorf("lora: init_lora_weights %q is not implemented (want true, false or gaussian)", string(init))
	}
	if av != nil {
		err = b.Upload(a.Value, av)
		if err == nil {
			err = b.Upload(bw.Value, bv)
		}
	}
	if err != nil {
		b.Free(a.Value)
		b.Free(bw.Value)
		return nil, fmt.Errorf("lora: initialising the adapter: %w", err)
	}
	l.A, l.B = a, bw
	base.Weight.Trainable = false
	if base.Bias != nil {
		base.Bias.Trainable = trainBias
	}
	return l, nil
}

// newParam allocates a trainable FP32 parameter of the given shape.
func newParam(b tensor.Backend, shape ...int) (*transformer.Param, error) {
	t, err := b.Alloc(tensor.F32, shape...)
	if err != nil {
		return nil, fmt.Errorf("lora: allocating an adapter weight %v: %w", tensor.Shape(shape), err)
	}
	return &transformer.Param{Value: t, Trainable: true}, nil
}

// uniform fills v with U(−bound, bound) draws.
func uniform(rng *rand.Rand, v []float32, bound float64) {
	for i := range v {
		v[i] = float32((2*rng.Float64() - 1) * bound)
	}
}

// moduleSeed derives a per-module seed from the run's seed and the module path, so each adapter draws its own
// values whatever the order modules are adapted in.
func moduleSeed(seed uint64, path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return seed ^ h.Sum64()
}

// Base returns the wrapped base Linear.
func (l *Linear) Base() *transformer.Linear { return l.base }

// Merged reports whether the adapter is currently merged into the base weight (Forward then computes the base
// alone).
func (l *Linear) Merged() bool { return l.merged }

// Parameters lists the parameters as PEFT's named_parameters names them inside the module, adapter name
// "default" included: base_layer.weight, base_layer.bias, lora_A.default.weight, lora_B.default.weight.
func (l *Linear) Parameters() []transformer.NamedParameter {
	var ps []transformer.NamedParameter
	for _, np := range l.base.Parameters() {
		ps = append(ps, transformer.NamedParameter{Name: "base_layer." + np.Name, Param: np.Param})
	}
	return append(ps,
		transformer.NamedParameter{Name: "lora_A." + adapterName + ".weight", Param: l.A},
		transformer.NamedParameter{Name: "lora_B." + adapterName + ".weight", Param: l.B},
	)
}

// adapterName is the adapter name PEFT gives the only adapter ("default"): it appears in in-memory parameter
// names and never in saved keys.
const adapterName = "default"

// Layout takes the adapter's per-pass buffers for rows input rows in GEMM dtype dt: h and dh (rows, R), and
// with dropout the dropped input (rows, In) in dt and its F32 gradient. Those two are needed only inside one
// Forward or Backward (Backward draws dropout(x) again from the forward's Philox offset for A's gradient), so
// each is one arena Scratch region that every adapter of the model shares.
func (l *Linear) Layout(a *transformer.Arena, rows int, dt tensor.DType) {
	l.c = linearCache{h: a.Take(dt, rows, l.R), dh: a.Take(dt, rows, l.R)}
	if l.Dropout > 0 {
		l.c.xd = a.Scratch("lora.xd", dt, rows, l.base.In)
		l.c.dxd = a.Scratch("lora.dxd", tensor.F32, rows, l.base.In)
	}
}

// rowsOf returns the row count of t viewed as (N, features), checking it fits the pass's buffers.
func (l *Linear) rowsOf(t *tensor.Tensor, features int, what string) (int, error) {
	n := t.Numel() / features
	if n*features != t.Numel() {
		return 0, fmt.Errorf("lora: %s %v is not a whole number of %d-feature rows", what, t.Shape, features)
	}
	if l.c.h == nil || l.c.h.Buf == nil {
		return 0, fmt.Errorf("lora: no pass buffers: the model must call Layout (carve its step arena) before Forward")
	}
	if n > l.c.h.Shape[0] {
		return 0, fmt.Errorf("lora: %s has %d rows but the pass's buffers were laid out for %d", what, n, l.c.h.Shape[0])
	}
	return n, nil
}

// Forward computes out (N, Out) h = in·Wᵀ + b (the base, in one GEMM), then h (N, R) = dropout(in)·Aᵀ and
// out += scaling·h·Bᵀ (one GEMM with beta = 1). A merged adapter computes the base alone. in (N, In) h is
// left unchanged; with p.Train the adapter keeps dropout(in) and h for Backward.
func (l *Linear) Forward(p *transformer.Pass, out, in *tensor.Tensor) error {
	l.c.ready = false
	if err := l.base.Forward(p, out, in); err != nil {
		return err
	}
	return l.ForwardDelta(p, out, 0, in)
}

var _ transformer.Adapter = (*Linear)(nil)

// ForwardDelta is Forward's adapter term alone: out += scaling·(dropout(in)·Aᵀ)·Bᵀ into out's rows ld elements
// apart (0: dense), the base output already there (a transformer.LinearStack computed the bases packed).
// Nothing for a merged adapter.
func (l *Linear) ForwardDelta(p *transformer.Pass, out *tensor.Tensor, ld int, in *tensor.Tensor) error {
	l.c.ready = false
	if l.merged {
		return nil
	}
	n, err := l.rowsOf(in, l.base.In, "input")
	if err != nil {
		return err
	}
	c := &l.c
	h, _ := c.h.View(0, n, l.R)
	c.aIn, c.dropUsed = in, p.DropoutActive(l.Dropout)
	if c.dropUsed {
		xd, _ := c.xd.View(0, n, l.base.In)
		if c.dropOff, err = p.Dropout(xd, in, l.Dropout); err != nil {
			return err
		}
		c.aIn = xd
	}
	a, err := p.Weight(l.A.Value) // (R, In)
	if err != nil {
		return err
	}
	bw, err := p.Weight(l.B.Value) // (Out, R)
	if err != nil {
		return err
	}
	bk := p.Backend
	// h (N, R) = aIn (N, In)·Aᵀ
	if err := bk.Gemm(tensor.GemmArgs{TransB: true, M: n, N: l.R, K: l.base.In, A: c.aIn, B: a, C: h, Alpha: 1, Batch: 1}); err != nil {
		return err
	}
	// out (N, Out) += scaling·h·Bᵀ
	if err := bk.Gemm(tensor.GemmArgs{TransB: true, M: n, N: l.base.Out, K: l.R, A: h, B: bw, C: out, LDC: ld,
		Alpha: l.Scaling, Beta: 1, Batch: 1}); err != nil {
		return err
	}
	c.ready = p.Train
	return nil
}

// Backward, from dOut (N, Out) h and the forward's in (N, In), computes
//
//	dIn (N, In)  = dOut·W  (+ dIn when accumulate)  + dropout'(scaling·dOut·B·A)
//	dB  (Out, R) += scaling·dOutᵀ·h
//	dA  (R, In)  += (scaling·dOut·B)ᵀ·dropout(in)
//
// and db += Σ_rows dOut when the base bias is trainable. The base weight gets no gradient. dIn may be nil
// (skipped) and may be F32 while dOut is half. dOut is not modified. It errors, wrapping ErrMerged, on a merged
// adapter, and when no training Forward preceded it.
func (l *Linear) Backward(p *transformer.Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error {
	if err := l.ready(); err != nil {
		return err
	}
	if _, err := l.rowsOf(dOut, l.base.Out, "output gradient"); err != nil {
		return err
	}
	if err := l.base.Backward(p, dIn, dOut, in, accumulate); err != nil {
		return err
	}
	return l.BackwardDelta(p, dIn, dOut, 0, in)
}

// ready returns an error unless a training Forward (or ForwardDelta) ran on the unmerged adapter since the
// last Backward.
func (l *Linear) ready() error {
	if l.merged {
		return fmt.Errorf("lora: backward: %w; call Unmerge before training", ErrMerged)
	}
	if !l.c.ready {
		return errors.New("lora: Backward needs a preceding Forward with Train set")
	}
	return nil
}

// BackwardDelta is Backward's adapter part alone, from dOut (N, Out) with rows ld elements apart (0: dense):
// dB and dA accumulate and dIn (skipped when nil) += the adapter branch's input gradient; the base's
// gradients are left to the caller (a transformer.LinearStack computes them packed).
func (l *Linear) BackwardDelta(p *transformer.Pass, dIn, dOut *tensor.Tensor, ld int, in *tensor.Tensor) error {
	if err := l.ready(); err != nil {
		return err
	}
	c := &l.c
	c.ready = false
	n, err := l.rowsOf(in, l.base.In, "input")
	if err != nil {
		return err
	}
	h, _ := c.h.View(0, n, l.R)
	dh, _ := c.dh.View(0, n, l.R)
	a, err := p.Weight(l.A.Value) // (R, In)
	if err != nil {
		return err
	}
	bw, err := p.Weight(l.B.Value) // (Out, R)
	if err != nil {
		return err
	}
	bk := p.Backend
	// dB (Out, R) += scaling·dOutᵀ·h
	if g := l.B.Grad; g != nil {
		if err := bk.Gemm(tensor.GemmArgs{TransA: true, M: l.base.Out, N: l.R, K: n, A: dOut, LDA: ld, B: h, C: g,
			Alpha: l.Scaling, Beta: 1, Batch: 1}); err != nil {
			return err
		}
	}
	// dh (N, R) = scaling·dOut·B
	if err := bk.Gemm(tensor.GemmArgs{M: n, N: l.R, K: l.base.Out, A: dOut, LDA: ld, B: bw, C: dh, Alpha: l.Scaling, Batch: 1}); err != nil {
		return err
	}
	// dA (R, In) += dhᵀ·aIn
	if g := l.A.Grad; g != nil {
		aIn := c.aIn
		if c.dropUsed { // dropout(in) again, into the shared scratch: the forward's mask (same Philox offset)
			xd, _ := c.xd.View(0, n, l.base.In)
			if err := bk.Dropout(xd, in, l.Dropout, p.Seed, c.dropOff); err != nil {
				return err
			}
			aIn = xd
		}
		if err := bk.Gemm(tensor.GemmArgs{TransA: true, M: l.R, N: l.base.In, K: n, A: dh, B: aIn, C: g,
			Alpha: 1, Beta: 1, Batch: 1}); err != nil {
			return err
		}
	}
	if dIn == nil {
		return nil
	}
	if !c.dropUsed { // dIn (N, In) += dh·A
		return bk.Gemm(tensor.GemmArgs{M: n, N: l.base.In, K: l.R, A: dh, B: a, C: dIn, Alpha: 1, Beta: 1, Batch: 1})
	}
	// Through the dropout: dxd (N, In) F32 = dh·A, masked and rescaled in place, then added to dIn.
	dxd, _ := c.dxd.View(0, n, l.base.In)
	if err := bk.Gemm(tensor.GemmArgs{M: n, N: l.base.In, K: l.R, A: dh, B: a, C: dxd, Alpha: 1, Batch: 1}); err != nil {
		return err
	}
	if err := bk.DropoutBackward(dxd, dxd, l.Dropout, p.Seed, c.dropOff); err != nil {
		return err
	}
	return bk.Axpy(dIn, dxd, 1)
}
