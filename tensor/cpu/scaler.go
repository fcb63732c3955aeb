package cpu

import (
	"math"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// NonFiniteCheckAndUnscaleOnDevice is NonFiniteCheckAndUnscale with invScale = float32(1/float64(*scale))
// (PyTorch's inv_scale = scale.double().reciprocal().float()) and the result ORed into found (I32 (1)).
func (b *Backend) NonFiniteCheckAndUnscaleOnDevice(ts []*tensor.Tensor, scale, found *tensor.Tensor) (err error) {
	defer guard(&err, "NonFiniteCheckAndUnscaleOnDevice", append([]*tensor.Tensor{scale, found}, ts...)...)
	c := newCheck("NonFiniteCheckAndUnscaleOnDevice", append([]*tensor.Tensor{scale, found}, ts...)...)
	c.tensor("scale", scale, tensor.F32).numel("scale", scale, 1).tensor("found", found, tensor.I32).numel("found", found, 1)
	if c.Err() != nil {
		return c.Err()
	}
	inv := float32(1 / float64(f32Of(scale)[0]))
	bad, err := b.NonFiniteCheckAndUnscale(ts, inv)
	if err != nil {
		return err
	}
	if bad {
		i32Of(found)[0] = 1
	}
	return nil
}

// UpdateScale is PyTorch's _amp_update_scale_ (tensor.UpdateScaleArgs): the reference of the device kernels.
func (b *Backend) UpdateScale(a tensor.UpdateScaleArgs) (err error) {
	defer guard(&err, "UpdateScale", a.Scale, a.GrowthTracker, a.FoundInf, a.Record, a.Steps, a.Skipped)
	c := newCheck("UpdateScale", a.Scale, a.GrowthTracker, a.FoundInf, a.Record, a.Steps, a.Skipped)
	c.tensor("Scale", a.Scale, tensor.F32).numel("Scale", a.Scale, 1).
		tensor("GrowthTracker", a.GrowthTracker, tensor.I32).numel("GrowthTracker", a.GrowthTracker, 1).
		tensor("FoundInf", a.FoundInf, tensor.I32).numel("FoundInf", a.FoundInf, 1)
	for _, o := range []struct {
		name string
		t    *tensor.Tensor
	}{{"Record", a.Record}, {"Steps", a.Steps}, {"Skipped", a.Skipped}} {
		if o.t != nil {
			c.tensor(o.name, o.t, tensor.I32).numel(o.name, o.t, 1)
		}
	}
	c.record(opcheck.UpdateScale(a))
	if c.Err() != nil {
		return c.Err()
	}
	s, tr, found := &f32Of(a.Scale)[0], &i32Of(a.GrowthTracker)[0], i32Of(a.FoundInf)[0] != 0
	switch {
	case found:
		*s = max(toF32(float64(*s)*a.BackoffFactor), a.MinScale)
		*tr = 0
	case *tr+1 == int32(a.GrowthInterval):
		if g := toF32(float64(*s) * a.GrowthFactor); !math.IsInf(float64(g), 0) {
			*s = g
		}
		*tr = 0
	default:
		*tr++
	}
	if a.Record != nil {
		i32Of(a.Record)[0] = map[bool]int32{false: 0, true: 1}[found]
	}
	if a.Steps != nil && !found {
		i32Of(a.Steps)[0]++
	}
	halt := false
	if a.Skipped != nil {
		sk := &i32Of(a.Skipped)[0]
		if found {
			*sk++
		} else {
			*sk = 0
		}
		halt = a.MaxSkipped > 0 && int(*sk) >= a.MaxSkipped
	}
	if !halt {
		i32Of(a.FoundInf)[0] = 0
	}
	return nil
}

// toF32 rounds x to the nearest FP32 as C's double→float conversion does: ±Inf beyond the largest finite
// float (Go leaves out-of-range float64→float32 conversions implementation-defined).
func toF32(x float64) float32 {
	const overflow = 0x1.ffffffp127 // MaxFloat32 + half an ulp: the first magnitude that rounds to Inf
	switch {
	case x >= overflow:
		return float32(math.Inf(1))
	case x <= -overflow:
		return float32(math.Inf(-1))
	}
	return float32(x)
}
