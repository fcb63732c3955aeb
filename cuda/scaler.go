//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// scaleBy checks the optional loss-scale multiplier of the loss backward ops: an F32 (1) tensor of b.
func (o *op) scaleBy(t *tensor.Tensor) *op {
	if t != nil {
		o.f32("scaleBy", t).numel("scaleBy", t, 1)
	}
	return o
}

// NonFiniteCheckAndUnscaleOnDevice is NonFiniteCheckAndUnscale with the scale read and the result written on
// the device (kernels/optim.cu unscale_dev): inv_scale = float32(1/float64(*scale)), found (I32 (1)) set to
// 1 when an element was Inf or NaN. One launch over every tensor; nothing waits.
func (b *Backend) NonFiniteCheckAndUnscaleOnDevice(ts []*tensor.Tensor, scale, found *tensor.Tensor) (err error) {
	o := b.begin("NonFiniteCheckAndUnscaleOnDevice", append([]*tensor.Tensor{scale, found}, ts...)...)
	defer o.end(&err)
	o.f32("scale", scale).numel("scale", scale, 1).tensor("found", found, tensor.I32).numel("found", found, 1)
	var cl chunkList
	for i, t := range ts {
		o.f32(fmt.Sprintf("ts[%d]", i), t)
		if !o.failed() {
			cl.add(addr(t), t.Numel(), 4, 0)
		}
	}
	if o.failed() || cl.count() == 0 {
		return
	}
	dc := o.uploadChunks(cl)
	defer o.release(dc)
	o.launch("optim.cu", "unscale_dev", cl.count(), 1, 256, 1, addr(found), uint64(dc), addr(scale))
	return
}

// UpdateScale is PyTorch's _amp_update_scale_ on the device (tensor.UpdateScaleArgs; kernels/optim.cu
// update_scale): one thread, nothing waits.
func (b *Backend) UpdateScale(a tensor.UpdateScaleArgs) (err error) {
	o := b.begin("UpdateScale", a.Scale, a.GrowthTracker, a.FoundInf, a.Record, a.Steps, a.Skipped)
	defer o.end(&err)
	o.f32("Scale", a.Scale).numel("Scale", a.Scale, 1).
		tensor("GrowthTracker", a.GrowthTracker, tensor.I32).numel("GrowthTracker", a.GrowthTracker, 1).
		tensor("FoundInf", a.FoundInf, tensor.I32).numel("FoundInf", a.FoundInf, 1)
	for _, x := range []struct {
		name string
		t    *tensor.Tensor
	}{{"Record", a.Record}, {"Steps", a.Steps}, {"Skipped", a.Skipped}} {
		if x.t != nil {
			o.tensor(x.name, x.t, tensor.I32).numel(x.name, x.t, 1)
		}
	}
	o.fail(opcheck.UpdateScale(a))
	o.launch("optim.cu", "update_scale", 1, 1, 32, 1, addr(a.Scale), addr(a.GrowthTracker), addr(a.FoundInf), addr(a.Record),
		addr(a.Steps), addr(a.Skipped), i64(a.MaxSkipped), math.Float64bits(a.GrowthFactor), math.Float64bits(a.BackoffFactor),
		i64(a.GrowthInterval), f32(a.MinScale))
	return
}
