//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"os"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
	"gorgonia.org/cu"
)

// LayerNorm normalizes the last axis: x (N, C) → out (N, C) = (x − μ)·rstd·gamma + beta with the biased
// variance and rstd = 1/√(var + eps) (torch.nn.LayerNorm); mean (N) and rstd (N) are F32 and overwritten for
// the backward. out may be x. eps must be ≥ 0 (ErrArgument). One warp per row (kernels/norm.cu).
func (b *Backend) LayerNorm(out, mean, rstd, x, gamma, beta *tensor.Tensor, eps float32) (err error) {
	o := b.begin("LayerNorm", out, mean, rstd, x, gamma, beta)
	defer o.end(&err)
	o.float("out", out).f32("mean", mean).f32("rstd", rstd).float("x", x).float("gamma", gamma).float("beta", beta)
	n, ch := o.rows("x", x)
	o.numel("out", out, n*ch).numel("mean", mean, n).numel("rstd", rstd, n).numel("gamma", gamma, ch).
		numel("beta", beta, ch).that(eps >= 0, tensor.ErrArgument, "eps = %v, want ≥ 0", eps)
	if o.failed() || ch == 0 {
		return
	}
	v := vec(out, x, gamma, beta)
	if ch%4 != 0 {
		v = 0
	}
	o.rowsLaunch("norm.cu", "layernorm_fwd", n, addr(out), dt(out), addr(mean), addr(rstd), addr(x), dt(x),
		addr(gamma), dt(gamma), addr(beta), dt(beta), i64(n), i64(ch), f32(eps), v)
	return
}

// resLNFwd2Max is the widest residual_layernorm_fwd2_<k> of kernels/layernorm2.cu (C = 128·k).
const resLNFwd2Max = 8

// ResidualLayerNorm computes LayerNorm(dropout(Y) + X) in one warp-per-row pass (tensor.ResidualNormArgs):
// the dropout, the residual add, the statistics, the normalised output and its half copy, with the same FP32
// operations (and dropout draws) as the dropout, add, layernorm_fwd and cast kernels, so the same bits. With
// C = 128·k ≤ 1024 and aligned rows, residual_layernorm_fwd2_<k> (layernorm2.cu) holds the lane's slice of the
// row in registers (the same bits as norm.cu's general residual_layernorm_fwd).
func (b *Backend) ResidualLayerNorm(a tensor.ResidualNormArgs) (err error) {
	o := b.begin("ResidualLayerNorm", a.Sum, a.Out, a.OutHalf, a.Mean, a.Rstd, a.Y, a.X, a.Gamma, a.Beta)
	defer o.end(&err)
	o.float("Sum", a.Sum).float("Out", a.Out).f32("Mean", a.Mean).f32("Rstd", a.Rstd).float("Y", a.Y).
		float("X", a.X).float("Gamma", a.Gamma).float("Beta", a.Beta)
	if a.OutHalf != nil {
		o.float("OutHalf", a.OutHalf)
	}
	n, ch := o.rows("Sum", a.Sum)
	o.numel("Out", a.Out, n*ch).numel("Y", a.Y, n*ch).numel("X", a.X, n*ch).numel("Mean", a.Mean, n).
		numel("Rstd", a.Rstd, n).numel("Gamma", a.Gamma, ch).numel("Beta", a.Beta, ch)
	if a.OutHalf != nil {
		o.numel("OutHalf", a.OutHalf, n*ch)
	}
	p := a.DropoutP
	o.that(p >= 0 && p < 1 && !math.IsNaN(float64(p)), tensor.ErrArgument, "DropoutP = %v, want 0 ≤ p < 1", p).
		that(a.Eps >= 0, tensor.ErrArgument, "Eps = %v, want ≥ 0", a.Eps)
	if o.failed() || ch == 0 {
		return
	}
	v := vec(a.Sum, a.Out, a.OutHalf, a.Y, a.X, a.Gamma, a.Beta)
	if ch%4 != 0 {
		v = 0
	}
	scale := float32(1)
	if p > 0 {
		scale = 1 / (1 - p) // float32, as the dropout kernel
	}
	seed, off := o.b.philoxArgs(p, a.Seed, a.Offset)
	file, kernel := "norm.cu", "residual_layernorm_fwd"
	if v == 1 && ch%128 == 0 && ch/128 <= resLNFwd2Max {
		file, kernel = "layernorm2.cu", fmt.Sprintf("residual_layernorm_fwd2_%d", ch/128)
	}
	o.rowsLaunch(file, kernel, n, addr(a.Sum), dt(a.Sum), addr(a.Out), dt(a.Out), addr(a.OutHalf), dt(a.OutHalf),
		addr(a.Mean), addr(a.Rstd), addr(a.Y), dt(a.Y), addr(a.X), dt(a.X), addr(a.Gamma), dt(a.Gamma), addr(a.Beta), dt(a.Beta),
		i64(n), i64(ch), f32(a.Eps), f32(p), f32(scale), seed, off, v)
	return
}

// LayerNormBackward computes dx (N, C) =, dgamma (C) += and dbeta (C) += from dout (N, C) and the forward's
// x, gamma, mean (F32, N) and rstd (F32, N). dgamma and dbeta may be nil for a frozen LayerNorm. The weight
// gradients are deterministic column sums (fixed chunks, fixed order).
func (b *Backend) LayerNormBackward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *tensor.Tensor) (err error) {
	o := b.begin("LayerNormBackward", dx, dgamma, dbeta, dout, x, gamma, mean, rstd)
	defer o.end(&err)
	o.layerNormBackward(tensor.ResidualNormBackwardArgs{DX: dx, DGamma: dgamma, DBeta: dbeta, DOut: dout, X: x, Gamma: gamma, Mean: mean, Rstd: rstd})
	return
}

// ResidualLayerNormBackward is LayerNormBackward with the branch gradient DY = DropoutBackward(DX) (a cast
// when DropoutP is 0) formed as DX is stored (tensor.ResidualNormBackwardArgs).
func (b *Backend) ResidualLayerNormBackward(a tensor.ResidualNormBackwardArgs) (err error) {
	o := b.begin("ResidualLayerNormBackward", a.DX, a.DY, a.DGamma, a.DBeta, a.DBias, a.DOut, a.X, a.Gamma, a.Mean, a.Rstd)
	defer o.end(&err)
	o.float("DY", a.DY)
	o.layerNormBackward(a)
	return
}

// lnBwdFusedMax is the widest layernorm_bwd_ring_<k> of kernels/lnbwd.cu (C = 128·k).
const lnBwdFusedMax = 8

// lnBwdPath, when "split" or "ring", forces the LayerNorm backward's two passes (colsum_partial, then
// layernorm_bwd2_<C/128> or layernorm_bwd) or its one-pass ring kernel, for the tests that compare them
// (export_test.go SetLNBwdPath); "split-v1" forces the two passes with layernorm_bwd; empty chooses by the chunk
// count (lnBwdOnePass). All give the same bits.
var lnBwdPath = ""

// lnBwd2Max is the widest layernorm_bwd2_<k> of kernels/layernorm2.cu (C = 128·k).
const lnBwd2Max = 8

// lnBwdV1 makes the two-pass LayerNorm backward take norm.cu's layernorm_bwd at every width (TUNE_LN_BWD=v1:
// the kernel layernorm_bwd2 was measured against).
var lnBwdV1 = os.Getenv("TUNE_LN_BWD") == "v1"

// lnBwdOnePass reports whether the ring kernel should run over chunks chunks of rows: it has one block (8
// warps) per chunk, so with fewer chunks than half the multiprocessors the two passes, which spread rows and
// column tiles over the whole device, are faster although they read dout and x twice (and BiasGrad's pass
// reads dy). H200, session 5 d2, with the bias gradient: 64×512 ring 128.1 µs, two passes 203.6; 32×128 with
// colsumChunks' 32 chunks of 128 rows: ring 111.5, two passes 38.6 (hence lnBwdChunks' 128 chunks of 32).
func (o *op) lnBwdOnePass(chunks int) bool {
	switch lnBwdPath {
	case "ring":
		return true
	case "split", "split-v1":
		return false
	}
	return 2*chunks >= o.b.sms
}

// lnBwdRing names the one-pass LayerNorm backward kernel for C = 128·k, 1 ≤ k ≤ lnBwdFusedMax.
func lnBwdRing(k int) string { return fmt.Sprintf("layernorm_bwd_ring_%d", k) }

// lnBwdRingMaxStages is kernels/lnbwd.cu's LNR_SMAX.
const lnBwdRingMaxStages = 8

// lnBwdRingPlan returns the ring kernel's stages and dynamic shared memory for C = 128·k with x and dout of
// element sizes sx and sd: each of the eight warps gets as many stages (a row of x, one of dout, 16 bytes for
// mean and rstd) as the device's shared memory holds, at most lnBwdRingMaxStages (BERT's F32 rows of 768 on
// the H200: 4).
func (o *op) lnBwdRingPlan(k, sx, sd int) (stages, smem int) {
	sb := 128*k*(sx+sd) + 16
	stages = min(lnBwdRingMaxStages, o.b.sharedOptIn()/(8*sb))
	return stages, 8 * stages * sb
}

// layerNormBackward validates and queues both backward ops (a.DY nil for LayerNormBackward) and the bias
// gradient a.DBias of DY. With both weight gradients, C a multiple of 128 up to 1024 and aligned rows, one
// kernel (layernorm_bwd_ring_<C/128>, lnBwdRing) computes dx, dy and the per-chunk column sums of dgamma, dbeta
// and dbias from one read of dout and x, and one colsum_finish3 launch adds the chunks, where there are enough
// chunks (lnBwdOnePass); otherwise colsum_partial reads dout and x first, layernorm_bwd2_<C/128> (layernorm_bwd
// for other widths or unaligned rows) second, and BiasGrad's colsum_partial reads dy. The chunks and their summation order are the same either way.
func (o *op) layerNormBackward(a tensor.ResidualNormBackwardArgs) {
	dx, dy, dgamma, dbeta, dout, x, gamma, mean, rstd := a.DX, a.DY, a.DGamma, a.DBeta, a.DOut, a.X, a.Gamma, a.Mean, a.Rstd
	dbias := a.DBias
	o.float("dx", dx).float("dout", dout).float("x", x).float("gamma", gamma).f32("mean", mean).f32("rstd", rstd)
	n, ch := o.rows("x", x)
	o.numel("dx", dx, n*ch).numel("dout", dout, n*ch).numel("gamma", gamma, ch).numel("mean", mean, n).numel("rstd", rstd, n)
	if dgamma != nil {
		o.float("dgamma", dgamma).numel("dgamma", dgamma, ch)
	}
	if dbeta != nil {
		o.float("dbeta", dbeta).numel("dbeta", dbeta, ch)
	}
	p := a.DropoutP
	if dy != nil {
		o.numel("DY", dy, n*ch).that(p >= 0 && p < 1 && !math.IsNaN(float64(p)), tensor.ErrArgument, "DropoutP = %v, want 0 ≤ p < 1", p)
	}
	if dbias != nil {
		o.that(dy != nil, tensor.ErrArgument, "DBias is the column sum of DY, and DY is nil").float("DBias", dbias).numel("DBias", dbias, ch)
	}
	if o.failed() || ch == 0 {
		return
	}
	scale := float32(1)
	if p > 0 {
		scale = 1 / (1 - p) // float32, as the dropout kernel
	}
	v := vec(dx, dy, dout, x, gamma)
	if ch%4 != 0 {
		v = 0
	}
	seed, off := o.b.philoxArgs(p, a.Seed, a.Offset)
	rows, chunks := lnBwdChunks(n)
	if dgamma != nil && dbeta != nil && v == 1 && ch%128 == 0 && ch <= 128*lnBwdFusedMax && n > 0 && o.lnBwdOnePass(chunks) {
		if o.lnBwdRing(a, n, ch, rows, chunks, p, scale, seed, off) {
			return
		}
	}
	// The weight gradients read dout and x, so they go first: dx may alias either.
	o.colsumRows(rows, dgamma, dbeta, dout, x, mean, rstd, n, ch)
	file, kernel := "norm.cu", "layernorm_bwd"
	if v == 1 && ch%128 == 0 && ch/128 <= lnBwd2Max && lnBwdPath != "split-v1" && !lnBwdV1 {
		file, kernel = "layernorm2.cu", fmt.Sprintf("layernorm_bwd2_%d", ch/128)
	}
	o.rowsLaunch(file, kernel, n, addr(dx), dt(dx), addr(dy), dt(dy), addr(dout), dt(dout), addr(x), dt(x),
		addr(gamma), dt(gamma), addr(mean), addr(rstd), i64(n), i64(ch), f32(p), f32(scale), seed, off, v)
	o.colsumRows(rows, dbias, nil, dy, nil, nil, nil, n, ch)
}

// lnBwdChunks splits n rows into the chunks of the LayerNorm backward's column sums (dgamma, dbeta and the
// fused DBias): colsumChunks' rows, but no more than n/128 rounded up to a multiple of 8 and no fewer than 32,
// so that from 4096 rows up the one-pass ring kernel, a block per chunk, has 128 blocks (BERT-base 32×128:
// 32-row chunks, where colsumChunks' 128 rows give 32 blocks for the H200's 132 multiprocessors and leave
// the op to the two passes). From 32768 rows on it is colsumChunks' rule. A fused DBias therefore adds its
// rows in another order than BiasGrad below 32768 rows (within FP32 summation rounding). The rule depends on
// n alone, so the ring and the two passes give the same bits. TUNE_LN_BWD_ROWS=colsum takes colsumChunks'
// rows at every n (the rule this was measured against).
func lnBwdChunks(n int) (rowsPerChunk, chunks int) {
	rowsPerChunk, _ = colsumChunks(n)
	if !lnBwdColsumRows {
		rowsPerChunk = min(rowsPerChunk, max(32, 8*((n+1023)/1024)))
	}
	return rowsPerChunk, (n + rowsPerChunk - 1) / rowsPerChunk
}

// lnBwdColsumRows is TUNE_LN_BWD_ROWS=colsum (lnBwdChunks).
var lnBwdColsumRows = os.Getenv("TUNE_LN_BWD_ROWS") == "colsum"

// lnBwdRing queues layernorm_bwd_ring_<C/128> and the finish of its partials (see layerNormBackward) and
// reports whether it did: not when the device's shared memory holds fewer than two ring stages per warp. seed
// and off are the dropout's Philox key and counter as the kernels take them (philoxArgs).
func (o *op) lnBwdRing(a tensor.ResidualNormBackwardArgs, n, ch, rows, chunks int, p, scale float32, seed, off uint64) bool {
	k := ch / 128
	stages, smem := o.lnBwdRingPlan(k, a.X.DType.Size(), a.DOut.DType.Size())
	if stages < 2 {
		return false
	}
	outs := 2
	pa, pb := o.scratch(4*chunks*ch), o.scratch(4*chunks*ch)
	defer o.release(pa)
	defer o.release(pb)
	var pc cu.DevicePtr
	if a.DBias != nil {
		outs, pc = 3, o.scratch(4*chunks*ch)
		defer o.release(pc)
	}
	o.launchShared("lnbwd.cu", lnBwdRing(k), chunks, 1, 256, 1, smem,
		uint64(pa), uint64(pb), uint64(pc), addr(a.DX), dt(a.DX), addr(a.DY), dt(a.DY), addr(a.DOut), dt(a.DOut),
		addr(a.X), dt(a.X), addr(a.Gamma), dt(a.Gamma), addr(a.Mean), addr(a.Rstd), i64(n), i64(ch), i64(rows),
		f32(p), f32(scale), seed, off, uint64(stages))
	g, b, c := a.DGamma, a.DBeta, a.DBias
	o.launch("norm.cu", "colsum_finish3", (ch+31)/32, outs, 32, 8, addr(g), dt(g), uint64(pa),
		addr(b), dt(b), uint64(pb), addr(c), dt(c), uint64(pc), i64(chunks), i64(ch))
	return true
}

// Softmax normalizes the last axis with an additive mask: x (…, C) is viewed as (B, R, C) rows where B =
// mask's row count, and out = softmax(x + mask[b]) per row. mask (B, C) is F32 or nil (then B = 1); the row
// count of x must be a multiple of B. A row whose every entry is −Inf gives zeros. out may be x.
func (b *Backend) Softmax(out, x, mask *tensor.Tensor) (err error) {
	o := b.begin("Softmax", out, x, mask)
	defer o.end(&err)
	o.float("out", out).float("x", x)
	n, ch := o.rows("x", x)
	o.numel("out", out, n*ch)
	rowsPerMask := max(n, 1)
	if mask != nil {
		o.f32("mask", mask)
		mb, mc := o.rows("mask", mask)
		o.that(mc == ch, tensor.ErrShape, "mask rows have %d columns, x rows have %d", mc, ch)
		o.that(mb > 0 && n%mb == 0, tensor.ErrShape, "x has %d rows, not a multiple of mask's %d", n, mb)
		if !o.failed() && ch > 0 {
			rowsPerMask = n / mb
		}
	}
	if o.failed() || ch == 0 {
		return
	}
	o.rowsLaunch("softmax.cu", "softmax_fwd", n, addr(out), dt(out), addr(x), dt(x), addr(mask), i64(n), i64(ch), i64(rowsPerMask))
	return
}

// SoftmaxBackward sets dx = y·(dout − Σ_c dout·y) per row of the last axis, y the forward output. dx may be
// dout.
func (b *Backend) SoftmaxBackward(dx, dout, y *tensor.Tensor) (err error) {
	o := b.begin("SoftmaxBackward", dx, dout, y)
	defer o.end(&err)
	o.float("dx", dx).float("dout", dout).float("y", y)
	n, ch := o.rows("y", y)
	o.numel("dx", dx, n*ch).numel("dout", dout, n*ch)
	if o.failed() || ch == 0 {
		return
	}
	o.rowsLaunch("softmax.cu", "softmax_bwd", n, addr(dx), dt(dx), addr(dout), dt(dout), addr(y), dt(y), i64(n), i64(ch))
	return
}

// CrossEntropy sets losses (N, F32) = −log softmax(logits (N, V))[label] per row, as logsumexp − logit;
// labels (N) are I32 or I64. A row whose label equals ignoreIndex gets loss 0 and is not counted; any other
// label outside [0, V) is ErrArgument naming its position. The labels are read on the host (Upload's copy,
// else a download that waits) to validate and count them; the losses are computed on the device.
func (b *Backend) CrossEntropy(losses, logits, labels *tensor.Tensor, ignoreIndex int) (count int, err error) {
	o := b.begin("CrossEntropy", losses, logits, labels)
	defer o.end(&err)
	o.f32("losses", losses).float("logits", logits).index("labels", labels)
	n, v := o.rows("logits", logits)
	o.numel("labels", labels, n).numel("losses", losses, n).that(v > 0, tensor.ErrShape, "logits have no classes")
	lab := o.indices("labels", labels, v, &ignoreIndex)
	if o.failed() {
		return 0, o.err
	}
	for _, l := range lab {
		if l != ignoreIndex {
			count++
		}
	}
	if xentRowsPerBlock(v) {
		o.launch("softmax.cu", "xent_fwd_rows", n, 1, xentBlock, 1, addr(losses), addr(logits), dt(logits), addr(labels),
			dt(labels), i64(n), i64(v), i64(ignoreIndex), xentVec(v, logits))
		return count, o.err
	}
	o.rowsLaunch("softmax.cu", "xent_fwd", n, addr(losses), addr(logits), dt(logits), addr(labels), dt(labels), i64(n), i64(v), i64(ignoreIndex))
	return count, o.err
}

// xentBlock is the block size of the block-per-row cross-entropy kernels.
const xentBlock = 256

// xentWarpRows forces the warp-per-row cross-entropy kernels at every vocabulary size (TUNE_CUDA_XENT=warp):
// a benchmark knob, to compare the two in one run.
var xentWarpRows = os.Getenv("TUNE_CUDA_XENT") == "warp"

// xentRowsPerBlock reports whether rows of v classes take the block-per-row kernels (softmax.cu's *_rows):
// a vocabulary (v ≥ 2048), where a warp per row leaves most of the GPU idle; a classifier's few logits keep
// a warp per row (eight rows per block).
func xentRowsPerBlock(v int) bool { return v >= 2048 && !xentWarpRows }

// xentVec is the *_rows kernels' vec flag: 16-byte accesses when every row starts at a multiple of 8 elements
// and the buffers are 16-byte aligned.
func xentVec(v int, ts ...*tensor.Tensor) uint64 {
	if v%8 != 0 {
		return 0
	}
	for _, t := range ts {
		if addr(t)%16 != 0 {
			return 0
		}
	}
	return 1
}

// CrossEntropyBackward sets dlogits (N, V) = scale·(softmax(logits) − onehot(label)) for counted rows and 0
// for rows labelled ignoreIndex. For a mean loss seeded with loss scale S over n counted rows, scale = S/n.
// The labels are validated on the host, as in CrossEntropy.
func (b *Backend) CrossEntropyBackward(dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (err error) {
	o := b.begin("CrossEntropyBackward", dlogits, logits, labels, scaleBy)
	defer o.end(&err)
	o.float("dlogits", dlogits).float("logits", logits).index("labels", labels).scaleBy(scaleBy)
	n, v := o.rows("logits", logits)
	o.numel("labels", labels, n).numel("dlogits", dlogits, n*v).that(v > 0, tensor.ErrShape, "logits have no classes")
	o.indices("labels", labels, v, &ignoreIndex)
	if o.failed() {
		return
	}
	if xentRowsPerBlock(v) {
		o.launch("softmax.cu", "xent_bwd_rows", n, 1, xentBlock, 1, addr(dlogits), dt(dlogits), addr(logits), dt(logits),
			addr(labels), dt(labels), i64(n), i64(v), f32(scale), i64(ignoreIndex), xentVec(v, dlogits, logits), addr(scaleBy))
		return
	}
	o.rowsLaunch("softmax.cu", "xent_bwd", n, addr(dlogits), dt(dlogits), addr(logits), dt(logits), addr(labels), dt(labels), i64(n), i64(v), f32(scale), i64(ignoreIndex), addr(scaleBy))
	return
}

// CrossEntropyWithGrad computes CrossEntropy, ArgMax (pred non-nil) and CrossEntropyBackward of one logits
// tensor (tensor.Backend.CrossEntropyWithGrad). For a vocabulary (the block-per-row kernels) one kernel,
// xent_fused_rows, reads each row twice instead of four times, with the separate kernels' bits; otherwise
// the three ops run.
func (b *Backend) CrossEntropyWithGrad(losses, pred, dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (int, error) {
	count, done, err := b.crossEntropyFused(losses, pred, dlogits, logits, labels, scale, ignoreIndex, scaleBy)
	if done || err != nil {
		return count, err
	}
	if count, err = b.CrossEntropy(losses, logits, labels, ignoreIndex); err != nil {
		return 0, err
	}
	if pred != nil {
		if err := b.ArgMax(pred, logits); err != nil {
			return 0, err
		}
	}
	return count, b.CrossEntropyBackward(dlogits, logits, labels, scale, ignoreIndex, scaleBy)
}

// crossEntropyFused validates the arguments and queues xent_fused_rows when the row length takes the
// block-per-row kernels (done); otherwise it queues nothing.
func (b *Backend) crossEntropyFused(losses, pred, dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (count int, done bool, err error) {
	o := b.begin("CrossEntropyWithGrad", losses, pred, dlogits, logits, labels, scaleBy)
	defer o.end(&err)
	o.f32("losses", losses).float("dlogits", dlogits).float("logits", logits).index("labels", labels).scaleBy(scaleBy)
	if pred != nil {
		o.tensor("pred", pred, tensor.I32)
	}
	n, v := o.rows("logits", logits)
	o.numel("labels", labels, n).numel("losses", losses, n).numel("dlogits", dlogits, n*v).that(v > 0, tensor.ErrShape, "logits have no classes")
	if pred != nil {
		o.numel("pred", pred, n)
	}
	if o.failed() || !xentRowsPerBlock(v) {
		return 0, o.failed(), nil
	}
	lab := o.indices("labels", labels, v, &ignoreIndex)
	if o.failed() {
		return 0, true, nil
	}
	for _, l := range lab {
		if l != ignoreIndex {
			count++
		}
	}
	if n == 0 {
		return count, true, nil
	}
	o.launch("softmax.cu", "xent_fused_rows", n, 1, xentBlock, 1, addr(losses), addr(pred), addr(dlogits), dt(dlogits),
		addr(logits), dt(logits), addr(labels), dt(labels), i64(n), i64(v), f32(scale), i64(ignoreIndex), xentVec(v, dlogits, logits), addr(scaleBy))
	return count, true, nil
}

// ArgMax sets out (N) I32 to the index of the largest entry of each row of x (N, V): the first among equal
// maxima, a NaN counting as larger than any number, as torch.argmax. One warp per row; a block per row for a
// vocabulary (V ≥ 2048), whose result is the same (ties go to the lower index whatever the visiting order).
func (b *Backend) ArgMax(out, x *tensor.Tensor) (err error) {
	o := b.begin("ArgMax", out, x)
	defer o.end(&err)
	o.tensor("out", out, tensor.I32).float("x", x)
	n, v := o.rows("x", x)
	o.numel("out", out, n).that(v > 0, tensor.ErrShape, "x has no columns")
	if o.failed() || n == 0 {
		return
	}
	if xentRowsPerBlock(v) { // a vocabulary: a block per row, as the cross-entropy
		o.launch("softmax.cu", "argmax_block", n, 1, xentBlock, 1, addr(out), addr(x), dt(x), i64(n), i64(v), xentVec(v, x))
		return
	}
	o.rowsLaunch("softmax.cu", "argmax_rows", n, addr(out), addr(x), dt(x), i64(n), i64(v))
	return
}

// indices reads an I32/I64 tensor of ids — from Upload's host copy when there is one (hostids.go), else by a
// download that waits for queued work — and checks them against [0, v);
// ignore, if non-nil, is a value allowed outside the range (CrossEntropy's ignore_index).
func (o *op) indices(name string, t *tensor.Tensor, v int, ignore *int) []int {
	if o.err != nil {
		return nil
	}
	n := t.Numel()
	ids := make([]int, n)
	if n == 0 {
		return ids
	}
	if h := o.b.hostCopy(t); h != nil { // uploaded from the host and not written since: no wait (hostids.go)
		copy(ids, h)
	} else if t.DType == tensor.I32 {
		h := make([]int32, n)
		if o.fail(o.toHost(ptrOf(h), addr(t), 4*n)) != nil {
			return nil
		}
		for i, x := range h {
			ids[i] = int(x)
		}
	} else {
		h := make([]int64, n)
		if o.fail(o.toHost(ptrOf(h), addr(t), 8*n)) != nil {
			return nil
		}
		for i, x := range h {
			ids[i] = int(x)
		}
	}
	if o.fail(opcheck.IDs(name, ids, v, ignore)) != nil {
		return nil
	}
	return ids
}

// checkIDs is indices without the values: it fails the op on an id of t outside [0, v), as indices does, but
// when Upload's host copy of t is known to lie in range (its recorded minimum and maximum) it neither scans
// nor copies the ids (Embedding and the device-planned EmbeddingBackward need no more).
func (o *op) checkIDs(name string, t *tensor.Tensor, v int) {
	if o.err != nil {
		return
	}
	if rec := o.b.hostRecord(t); rec != nil && (len(rec.vals) == 0 || rec.min >= 0 && rec.max < v) {
		return
	}
	o.indices(name, t, v, nil)
}
