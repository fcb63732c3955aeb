package cpu

import "github.com/tune-ml/tune/tensor"

// biasAddKernel: y (N, C) += bias (C) on every row, C = len(bias).
func biasAddKernel[T scalar](y, bias []T) {
	c := len(bias)
	if c == 0 {
		return
	}
	for r := 0; r+c <= len(y); r += c {
		row := y[r : r+c]
		for j, v := range bias {
			row[j] += v
		}
	}
}

// biasGradKernel: dbias (C) += Σ_rows dy (N, C), rows summed in order in T. With the AVX-512 kernels, F32 sums
// the rows in order from 0 (the product 1ᵀ·dy, one row of sgemmSmall) and then adds dbias.
func biasGradKernel[T scalar](dbias, dy []T) {
	c := len(dbias)
	if c == 0 {
		return
	}
	if d32, ok := any(dbias).([]float32); ok && hasSIMD && len(dy) >= c {
		one := []float32{1}
		sgemmSmall(1, c, len(dy)/c, one, 0, 0, any(dy).([]float32), c, d32, c, 1, true)
		return
	}
	for r := 0; r+c <= len(dy); r += c {
		row := dy[r : r+c]
		for j, v := range row {
			dbias[j] += v
		}
	}
}

// BiasAdd adds bias (C elements) to every row of y (…, C) in place: y += bias.
func (b *Backend) BiasAdd(y, bias *tensor.Tensor) (err error) {
	defer guard(&err, "BiasAdd", y, bias)
	c := newCheck("BiasAdd", y, bias).float("y", y).float("bias", bias)
	_, ch := c.rows("y", y)
	if err := c.numel("bias", bias, ch).Err(); err != nil {
		return err
	}
	bv := load(bias)
	o := accumulate(y)
	biasAddKernel(o.V, bv)
	o.Store()
	return nil
}

// BiasGrad accumulates the bias gradient: dbias (C) += Σ over rows of dy (…, C), summed in FP32 and rounded
// to dbias's dtype once.
func (b *Backend) BiasGrad(dbias, dy *tensor.Tensor) (err error) {
	defer guard(&err, "BiasGrad", dbias, dy)
	c := newCheck("BiasGrad", dbias, dy).float("dbias", dbias).float("dy", dy)
	_, ch := c.rows("dy", dy)
	if err := c.numel("dbias", dbias, ch).Err(); err != nil {
		return err
	}
	dyv := load(dy)
	o := accumulate(dbias)
	biasGradKernel(o.V, dyv)
	o.Store()
	return nil
}
