//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// chunkElems is the most elements one block of a multi-tensor kernel handles (kernels/optim.cu).
const chunkElems = 1 << 16

// chunkList builds the work list of a multi-tensor kernel: (device address, element count, tag) triples,
// the layout of struct Chunk in kernels/optim.cu.
type chunkList []uint64

// add splits n elements of size bytes each starting at device address p into chunks.
func (c *chunkList) add(p uint64, n, size int, tag uint64) {
	for lo := 0; lo < n; lo += chunkElems {
		m := min(chunkElems, n-lo)
		*c = append(*c, p+uint64(lo*size), uint64(m), tag)
	}
}

func (c chunkList) count() int { return len(c) / 3 }

// memset32 fills n 32-bit words at device address p with v.
func (o *op) memset32(p uint64, v uint32, n int, what string) error {
	return o.stream(func() []byte { return fmt.Appendf(nil, "memset32 %x %x %d", p, v, n) }, func() error {
		return driverErr("cuMemsetD32Async", cu.MemsetD32Async(cu.DevicePtr(p), uint(v), int64(n), o.b.stream), "%s", what)
	})
}

// upload copies the list into a scratch buffer; release it with o.release.
func (o *op) uploadChunks(c chunkList) cu.DevicePtr {
	p := o.scratch(8 * len(c))
	if o.err != nil {
		return 0
	}
	o.fail(o.hostToDevice(uint64(p), ptrOf(c), 8*len(c), "work chunks"))
	return p
}

// GlobalNorm returns sqrt(Σ_t Σ_i t_i²) over all float tensors (torch.nn.utils.clip_grad_norm_'s total norm,
// norm_type 2). Each block sums the squares of up to 65536 elements in float64; the host adds the partials in
// float64 in norm_finish's fixed order (normSum). It waits for queued work. An Inf or NaN element gives a non-finite norm; an empty list 0.
func (b *Backend) GlobalNorm(ts []*tensor.Tensor) (norm float64, err error) {
	o := b.begin("GlobalNorm", ts...)
	defer o.end(&err)
	partial, n := o.sumSquares(ts)
	if o.failed() || n == 0 {
		return 0, o.err
	}
	defer o.release(partial)
	host := make([]float64, n)
	if o.fail(o.toHost(ptrOf(host), uint64(partial), 8*len(host))) != nil {
		return 0, o.err
	}
	return math.Sqrt(normSum(host)), nil
}

// normLanes is kernels/optim.cu's NORM_LANES.
const normLanes = 32

// normSum adds the partial sums of squares in norm_finish's order (kernels/optim.cu): lane l of 32 adds the
// partials i ≡ l (mod 32) in increasing i, then the lane sums are added in order onto 0, all in float64.
func normSum(partial []float64) float64 {
	var lanes [normLanes]float64
	for i, p := range partial {
		lanes[i%normLanes] += p
	}
	var sum float64
	for _, s := range lanes {
		sum += s
	}
	return sum
}

// GlobalNormTo writes GlobalNorm(ts) into norm (I64 (1): the float64's bits) without waiting: the same
// partials, added in the same order in float64 by one device warp (IEEE adds and sqrt, so the bits equal
// GlobalNorm's). An empty list gives 0.
func (b *Backend) GlobalNormTo(norm *tensor.Tensor, ts []*tensor.Tensor) (err error) {
	o := b.begin("GlobalNormTo", append([]*tensor.Tensor{norm}, ts...)...)
	defer o.end(&err)
	o.tensor("norm", norm, tensor.I64).numel("norm", norm, 1)
	if o.failed() {
		return
	}
	partial, n := o.sumSquares(ts)
	if o.failed() {
		return
	}
	if n == 0 {
		o.fail(o.memset32(uint64(addr(norm)), 0, 2, "norm"))
		return
	}
	defer o.release(partial)
	o.launch("optim.cu", "norm_finish", 1, 1, 32, 1, addr(norm), uint64(partial), i64(n))
	return
}

// sumSquares validates ts as float tensors and queues the float64 partial sums of squares of their chunks into
// a scratch buffer (release it), returning it and the chunk count (0: nothing queued).
func (o *op) sumSquares(ts []*tensor.Tensor) (cu.DevicePtr, int) {
	var cl chunkList
	for i, t := range ts {
		o.float(fmt.Sprintf("ts[%d]", i), t)
		if !o.failed() {
			cl.add(addr(t), t.Numel(), t.DType.Size(), dt(t))
		}
	}
	if o.failed() || cl.count() == 0 {
		return 0, 0
	}
	dc := o.uploadChunks(cl)
	partial := o.scratch(8 * cl.count())
	defer o.release(dc)
	o.launch("optim.cu", "sumsq_partial", cl.count(), 1, 256, 1, uint64(partial), uint64(dc))
	if o.failed() {
		if partial != 0 {
			o.release(partial)
		}
		return 0, 0
	}
	return partial, cl.count()
}

// ClipByNorm multiplies ts in place by clip_grad_norm_'s coefficient computed on the device from norm (I64 (1),
// GlobalNormTo's bits), one launch over every tensor (kernels/optim.cu clip_scale); a non-finite norm sets
// nonFinite (I32 (1), optional) instead. Nothing waits.
func (b *Backend) ClipByNorm(ts []*tensor.Tensor, norm *tensor.Tensor, maxNorm float32, nonFinite *tensor.Tensor) (err error) {
	o := b.begin("ClipByNorm", append([]*tensor.Tensor{norm, nonFinite}, ts...)...)
	defer o.end(&err)
	o.tensor("norm", norm, tensor.I64).numel("norm", norm, 1)
	if nonFinite != nil {
		o.tensor("nonFinite", nonFinite, tensor.I32).numel("nonFinite", nonFinite, 1)
	}
	o.that(maxNorm >= 0 && !math.IsInf(float64(maxNorm), 0), tensor.ErrArgument, "maxNorm %v must be finite and ≥ 0", maxNorm)
	var cl chunkList
	for i, t := range ts {
		o.float(fmt.Sprintf("ts[%d]", i), t)
		if !o.failed() {
			cl.add(addr(t), t.Numel(), t.DType.Size(), dt(t))
		}
	}
	if o.failed() {
		return
	}
	if cl.count() == 0 { // still flag a non-finite norm
		cl = chunkList{0, 0, 0}
	}
	dc := o.uploadChunks(cl)
	defer o.release(dc)
	o.launch("optim.cu", "clip_scale", cl.count(), 1, 256, 1, addr(norm), addr(nonFinite), uint64(dc), f32(maxNorm))
	return
}

// NonFiniteCheckAndUnscale multiplies every element of every F32 tensor by invScale in place (skipped when
// invScale == 1) and reports whether any element was Inf or NaN before scaling, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_, in one launch over all tensors. All tensors are validated
// before any is changed; a half tensor is ErrDType. It waits for the result.
func (b *Backend) NonFiniteCheckAndUnscale(ts []*tensor.Tensor, invScale float32) (foundInf bool, err error) {
	o := b.begin("NonFiniteCheckAndUnscale", ts...)
	defer o.end(&err)
	var cl chunkList
	for i, t := range ts {
		o.f32(fmt.Sprintf("ts[%d]", i), t)
		if !o.failed() {
			cl.add(addr(t), t.Numel(), 4, 0)
		}
	}
	if o.failed() || cl.count() == 0 {
		return false, o.err
	}
	dc := o.uploadChunks(cl)
	found := o.scratch(4)
	defer o.release(dc)
	defer o.release(found)
	if o.err == nil {
		o.fail(o.memset32(uint64(found), 0, 1, "found flag"))
	}
	o.launch("optim.cu", "unscale", cl.count(), 1, 256, 1, uint64(found), uint64(dc), f32(invScale))
	if o.failed() {
		return false, o.err
	}
	var flag [1]int32
	if o.fail(o.toHost(ptrOf(flag[:]), uint64(found), 4)) != nil {
		return false, o.err
	}
	return flag[0] != 0, nil
}

// AdamW updates the flat F32 buffers in place with one step of torch.optim.AdamW (decoupled weight decay;
// tensor.AdamWArgs), one launch over every segment, with tensor/cpu's scalars and operation order (see
// kernels/optim.cu). Segments nil means the whole buffer decays; elements outside every segment are untouched.
// With GradNorm each block computes ClipByNorm's coefficient from the norm (clip_coef) and multiplies the
// gradients by it as it loads them: the clip costs no pass of its own.
// As torch.optim.AdamW it requires lr ≥ 0, eps ≥ 0, 0 ≤ β < 1, weight decay ≥ 0 and Step ≥ 1 (ErrArgument);
// buffers of different lengths and segments outside the buffers or overlapping are ErrShape; a non-F32 buffer
// is ErrDType.
func (b *Backend) AdamW(a tensor.AdamWArgs) (err error) {
	o := b.begin("AdamW", a.Params, a.Grads, a.ExpAvg, a.ExpAvgSq)
	defer o.end(&err)
	o.f32("Params", a.Params).f32("Grads", a.Grads).f32("ExpAvg", a.ExpAvg).f32("ExpAvgSq", a.ExpAvgSq)
	if a.Skip != nil {
		o.tensor("Skip", a.Skip, tensor.I32).numel("Skip", a.Skip, 1)
	}
	if a.GradNorm != nil {
		o.tensor("GradNorm", a.GradNorm, tensor.I64).numel("GradNorm", a.GradNorm, 1)
	}
	rows := 0
	if a.Table != nil || a.Row != nil {
		o.that(a.Table != nil && a.Row != nil, tensor.ErrArgument, "Table and Row are set together")
		o.f32("Table", a.Table).tensor("Row", a.Row, tensor.I32).numel("Row", a.Row, 1)
		if !o.failed() {
			rows = a.Table.Numel() / 3
			o.that(rows >= 1 && a.Table.Numel()%3 == 0, tensor.ErrShape, "Table holds %d values, want (K, 3), K ≥ 1", a.Table.Numel())
		}
		a.LR, a.Step = 0, 1 // not used: the table's row holds the scalars
	}
	if o.failed() {
		return
	}
	segs, e := opcheck.AdamW(a)
	if o.fail(e) != nil {
		return
	}
	var cl chunkList
	base := addr(a.Params)
	for _, s := range segs {
		cl.add(base+uint64(4*s.Offset), s.Len, 4, flag(s.Decay))
	}
	if cl.count() == 0 {
		return
	}
	lr, b1, b2, t := float64(a.LR), float64(a.Beta1), float64(a.Beta2), float64(a.Step)
	decay := float32(1 - lr*float64(a.WeightDecay))
	step := float32(lr / (1 - math.Pow(b1, t)))
	bc2 := float32(math.Sqrt(1 - math.Pow(b2, t)))
	dc := o.uploadChunks(cl)
	defer o.release(dc)
	o.launch("optim.cu", "adamw", cl.count(), 1, 256, 1, uint64(dc), base, addr(a.Grads), addr(a.ExpAvg), addr(a.ExpAvgSq),
		f32(decay), f32(a.Beta1), f32(a.Beta2), f32(float32(1-b1)), f32(float32(1-b2)), f32(step), f32(bc2), f32(a.Eps), addr(a.Skip), addr(a.Table), addr(a.Row), i64(rows),
		addr(a.GradNorm), f32(a.MaxGradNorm))
	return
}
