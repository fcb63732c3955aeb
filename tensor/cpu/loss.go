package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// logSumExp returns max z + log Σ exp(z − max z) and max z for one row; the sum is accumulated in float64 and
// the result rounded once, so the reference does not depend on a summation order.
func logSumExp[T scalar](row []T) (lse, mx T) {
	mx = T(math.Inf(-1))
	for _, z := range row {
		mx = max(mx, z)
	}
	var sum float64 // a vocabulary's 30k–150k terms summed in FP32 one by one drift by ~1e-4 relative
	for _, z := range row {
		sum += math.Exp(float64(z - mx))
	}
	return T(math.Log(sum)) + mx, mx
}

// crossEntropyKernel: losses[i] = logsumexp(logits_i) − logits_i[labels_i] for rows of v logits (PyTorch
// cross_entropy with reduction='none'); a row labelled ignore gets 0. Returns the rows counted.
func crossEntropyKernel[T scalar](losses, logits []T, labels []int, v, ignore int) int {
	count := 0
	for i, lab := range labels {
		if lab == ignore {
			losses[i] = 0
			continue
		}
		row := logits[i*v : (i+1)*v]
		lse, _ := logSumExp(row)
		losses[i] = lse - row[lab]
		count++
	}
	return count
}

// crossEntropyBackwardKernel: dlogits_i = scale·(softmax(logits_i) − onehot(labels_i)) for counted rows, 0
// for rows labelled ignore. dlogits may be logits.
func crossEntropyBackwardKernel[T scalar](dlogits, logits []T, labels []int, v int, scale T, ignore int) {
	for i, lab := range labels {
		row, d := logits[i*v:(i+1)*v], dlogits[i*v:(i+1)*v]
		if lab == ignore {
			clear(d)
			continue
		}
		lse, _ := logSumExp(row)
		for j, z := range row {
			p := T(math.Exp(float64(z - lse)))
			if j == lab {
				p--
			}
			d[j] = scale * p
		}
	}
}

// argMaxKernel: out[i] = the first index of the largest entry of row i (v entries), a NaN beating any number.
func argMaxKernel(out []int32, x []float32, v int) {
	for i := range out {
		row := x[i*v : (i+1)*v]
		best := 0
		for j, z := range row {
			if z > row[best] || (z != z && row[best] == row[best]) {
				best = j
			}
		}
		out[i] = int32(best)
	}
}

// mseKernel: losses = (pred − target)².
func mseKernel[T scalar](losses, pred, target []T) {
	for i := range losses {
		d := pred[i] - target[i]
		losses[i] = d * d
	}
}

// mseBackwardKernel: dpred = scale·2·(pred − target).
func mseBackwardKernel[T scalar](dpred, pred, target []T, scale T) {
	for i := range dpred {
		dpred[i] = scale * 2 * (pred[i] - target[i])
	}
}

// CrossEntropy sets losses (N, F32) = −log softmax(logits (N, V))[label] per row, computed stably as
// logsumexp − logit; labels (N) are I32 or I64. A row whose label equals ignoreIndex (−100 in PyTorch) gets
// loss 0 and is not counted; any other label outside [0, V) is ErrArgument. Returns the rows counted, the
// divisor of a mean loss.
func (b *Backend) CrossEntropy(losses, logits, labels *tensor.Tensor, ignoreIndex int) (count int, err error) {
	defer guard(&err, "CrossEntropy", losses, logits, labels)
	c := newCheck("CrossEntropy", losses, logits, labels).f32("losses", losses).float("logits", logits).index("labels", labels)
	n, v := c.rows("logits", logits)
	c.numel("labels", labels, n).numel("losses", losses, n).that(v > 0, tensor.ErrShape, "logits have no classes")
	lab := indices(c, "labels", labels, v, &ignoreIndex)
	if c.Err() != nil {
		return 0, c.Err()
	}
	lv, out := load(logits), f32Of(losses)
	_, chunks := chunking(n, 8*v)
	counts := make([]int, chunks)
	parallelChunks(n, 8*v, func(k, lo, hi int) {
		counts[k] = crossEntropyKernel(out[lo:hi], lv[lo*v:hi*v], lab[lo:hi], v, ignoreIndex)
	})
	for _, k := range counts {
		count += k
	}
	return count, nil
}

// CrossEntropyBackward sets dlogits (N, V) = scale·(softmax(logits) − onehot(label)) for counted rows and 0
// for rows labelled ignoreIndex. For a mean loss seeded with loss scale S over n counted rows, scale = S/n.
// scaleBy (F32 (1), optional) multiplies scale first, in FP32 (the loss scale kept on the device).
func (b *Backend) CrossEntropyBackward(dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (err error) {
	defer guard(&err, "CrossEntropyBackward", dlogits, logits, labels)
	c := newCheck("CrossEntropyBackward", dlogits, logits, labels).float("dlogits", dlogits).float("logits", logits).index("labels", labels)
	n, v := c.rows("logits", logits)
	c.numel("labels", labels, n).numel("dlogits", dlogits, n*v).that(v > 0, tensor.ErrShape, "logits have no classes")
	lab := indices(c, "labels", labels, v, &ignoreIndex)
	scale = scaledBy(c, scale, scaleBy)
	if c.Err() != nil {
		return c.Err()
	}
	lv := load(logits)
	o := overwrite(dlogits)
	parallelFor(n, 8*v, func(lo, hi int) {
		crossEntropyBackwardKernel(o.V[lo*v:hi*v], lv[lo*v:hi*v], lab[lo:hi], v, scale, ignoreIndex)
	})
	o.Store()
	return nil
}

// ArgMax sets out (N) I32 to the index of the largest entry of each row of x (N, V): the first among equal
// maxima, a NaN counting as larger than any number, as torch.argmax.
func (b *Backend) ArgMax(out, x *tensor.Tensor) (err error) {
	defer guard(&err, "ArgMax", out, x)
	c := newCheck("ArgMax", out, x).tensor("out", out, tensor.I32).float("x", x)
	n, v := c.rows("x", x)
	c.numel("out", out, n).that(v > 0, tensor.ErrShape, "x has no columns")
	if c.Err() != nil {
		return c.Err()
	}
	xv, o := load(x), i32Of(out)
	parallelFor(n, v, func(lo, hi int) { argMaxKernel(o[lo:hi], xv[lo*v:hi*v], v) })
	return nil
}

// MSELoss sets losses (N, F32) = (pred − target)² elementwise for pred and target of N elements (PyTorch
// mse_loss with reduction='none').
func (b *Backend) MSELoss(losses, pred, target *tensor.Tensor) (err error) {
	defer guard(&err, "MSELoss", losses, pred, target)
	c := newCheck("MSELoss", losses, pred, target).f32("losses", losses).float("pred", pred).float("target", target)
	if c.Err() != nil {
		return c.Err()
	}
	if err := c.numel("pred", pred, losses.Numel()).numel("target", target, losses.Numel()).Err(); err != nil {
		return err
	}
	mseKernel(f32Of(losses), load(pred), load(target))
	return nil
}

// MSELossBackward sets dpred (N) = scale·2·(pred − target); for a mean loss seeded with S, scale = S/N.
// scaleBy (F32 (1), optional) multiplies scale first, in FP32.
func (b *Backend) MSELossBackward(dpred, pred, target *tensor.Tensor, scale float32, scaleBy *tensor.Tensor) (err error) {
	defer guard(&err, "MSELossBackward", dpred, pred, target)
	c := newCheck("MSELossBackward", dpred, pred, target).float("dpred", dpred).float("pred", pred).float("target", target)
	scale = scaledBy(c, scale, scaleBy)
	if c.Err() != nil {
		return c.Err()
	}
	if err := c.numel("pred", pred, dpred.Numel()).numel("target", target, dpred.Numel()).Err(); err != nil {
		return err
	}
	pv, tv := load(pred), load(target)
	o := overwrite(dpred)
	mseBackwardKernel(o.V, pv, tv, scale)
	o.Store()
	return nil
}

// CrossEntropyWithGrad runs CrossEntropy, ArgMax (pred non-nil) and CrossEntropyBackward in that order
// (tensor.Backend.CrossEntropyWithGrad): the reference the fused kernels of other backends match bit for bit
// on their own ops. dlogits may be logits (it is written last).
func (b *Backend) CrossEntropyWithGrad(losses, pred, dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (int, error) {
	count, err := b.CrossEntropy(losses, logits, labels, ignoreIndex)
	if err != nil {
		return 0, err
	}
	if pred != nil {
		if err := b.ArgMax(pred, logits); err != nil {
			return 0, err
		}
	}
	return count, b.CrossEntropyBackward(dlogits, logits, labels, scale, ignoreIndex, scaleBy)
}

// scaledBy returns scale·*scaleBy rounded to FP32 (scale itself when scaleBy is nil), after checking scaleBy
// as an F32 (1) tensor.
func scaledBy(c *check, scale float32, scaleBy *tensor.Tensor) float32 {
	if scaleBy == nil {
		return scale
	}
	if c.tensor("scaleBy", scaleBy, tensor.F32).numel("scaleBy", scaleBy, 1).Err() != nil {
		return scale
	}
	return scale * f32Of(scaleBy)[0]
}
