//go:build cuda

package cuda

import (
	"math"
	"os"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// Scale sets x = alpha·x in place (any float dtype; computed in FP32, rounded once).
func (b *Backend) Scale(x *tensor.Tensor, alpha float32) (err error) {
	o := b.begin("Scale", x)
	defer o.end(&err)
	if o.float("x", x).failed() {
		return
	}
	n := x.Numel()
	o.ew("elementwise.cu", "scale", n, addr(x), dt(x), i64(n), f32(alpha), o.ewVec(x))
	return
}

// Add sets out = a + b elementwise (equal element counts; out may be a or b).
func (b *Backend) Add(out, a, bt *tensor.Tensor) (err error) {
	o := b.begin("Add", out, a, bt)
	defer o.end(&err)
	if o.float("out", out).float("a", a).float("b", bt).failed() {
		return
	}
	n := out.Numel()
	if o.numel("a", a, n).numel("b", bt, n).failed() {
		return
	}
	o.ew("elementwise.cu", "add", n, addr(out), dt(out), addr(a), dt(a), addr(bt), dt(bt), i64(n), o.ewVec(out, a, bt))
	return
}

// Axpy sets y += alpha·x elementwise (equal element counts).
func (b *Backend) Axpy(y, x *tensor.Tensor, alpha float32) (err error) {
	o := b.begin("Axpy", y, x)
	defer o.end(&err)
	if o.float("y", y).float("x", x).failed() {
		return
	}
	n := y.Numel()
	if o.numel("x", x, n).failed() {
		return
	}
	o.ew("elementwise.cu", "axpy", n, addr(y), dt(y), addr(x), dt(x), i64(n), f32(alpha), o.ewVec(y, x))
	return
}

// BiasAdd adds bias (C elements) to every row of y (…, C) in place.
func (b *Backend) BiasAdd(y, bias *tensor.Tensor) (err error) {
	o := b.begin("BiasAdd", y, bias)
	defer o.end(&err)
	o.float("y", y).float("bias", bias)
	_, ch := o.rows("y", y)
	if o.numel("bias", bias, ch).failed() || ch == 0 {
		return
	}
	n := y.Numel()
	v := vec(y, bias)
	if ch%4 != 0 {
		v = 0
	}
	o.ew("elementwise.cu", "bias_add", n, addr(y), dt(y), addr(bias), dt(bias), i64(n), i64(ch), v)
	return
}

// BiasGrad accumulates dbias (C) += Σ over rows of dy (…, C), summed in FP32 per chunk of rows and then over
// chunks in a fixed order (deterministic), rounded to dbias's dtype once.
func (b *Backend) BiasGrad(dbias, dy *tensor.Tensor) (err error) {
	o := b.begin("BiasGrad", dbias, dy)
	defer o.end(&err)
	o.float("dbias", dbias).float("dy", dy)
	n, ch := o.rows("dy", dy)
	if o.numel("dbias", dbias, ch).failed() || ch == 0 {
		return
	}
	o.colsum(dbias, nil, dy, nil, nil, nil, n, ch)
	return
}

// colsumPartial0 queues BiasGrad's partial pass (colsum_partial mode 0) of dy (n, ch) into pa without a
// finish: colsum_partial4 for an aligned half dy of a width that is a multiple of 4 (four columns a thread,
// the same partials), else colsum_partial (vec as colsumMode computes it).
func (o *op) colsumPartial0(pa cu.DevicePtr, dy *tensor.Tensor, n, ch, rowsPerChunk, chunks int, v uint64) {
	if dy.DType != tensor.F32 && ch%4 == 0 && vec(dy) == 1 && !colsumNarrow {
		o.launch("norm.cu", "colsum_partial4", (ch+127)/128, chunks, 32, 8, uint64(pa), addr(dy), dt(dy), i64(n), i64(ch), i64(rowsPerChunk))
		return
	}
	o.launch("norm.cu", "colsum_partial", (ch+63)/64, chunks, 32, 8, uint64(pa), 0, addr(dy), dt(dy), 0, 0,
		0, 0, i64(n), i64(ch), i64(rowsPerChunk), 0, v, 0, 0, 0, 0, 0)
}

// colsumNarrow makes BiasGrad's partial pass always take colsum_partial (set only by the test that compares
// the two, export_test.go SetColsumNarrow). H200, session 5 d2, BiasGrad of 32768×768 BF16: colsum_partial4
// 21.9 µs alone, colsum_partial 25.2.
var colsumNarrow = false

// colsum queues the deterministic column reduction of kernels/norm.cu: with x == nil, outA += Σ_rows dy; else
// outA += Σ dy·(x − mean)·rstd and outB += Σ dy (either output may be nil).
func (o *op) colsum(outA, outB, dy, x, mean, rstd *tensor.Tensor, n, ch int) {
	rows, _ := colsumChunks(n)
	o.colsumRows(rows, outA, outB, dy, x, mean, rstd, n, ch)
}

// colsumRows is colsum over chunks of rowsPerChunk rows (the LayerNorm backward's, lnBwdChunks).
func (o *op) colsumRows(rowsPerChunk int, outA, outB, dy, x, mean, rstd *tensor.Tensor, n, ch int) {
	mode := 0
	if x != nil {
		mode = 1
	}
	o.colsumModeRows(mode, rowsPerChunk, outA, outB, dy, x, mean, rstd, n, ch)
}

// colsumTiles is how many column tiles (64 columns each) the counters of colsumCounters serve: wider sums
// launch colsum_finish.
const colsumTiles = 4096

// colsumLastMaxChunks is the most row chunks for which the column sums finish in their own last blocks. With
// few chunks the saved launch is most of the op (H200, d2, BiasGrad 4096×768 BF16: 6.8 µs queued against 9.1);
// with many, the tile's last block summing all the chunks alone is a tail (32768×2304: 47.9 against 44.3).
const colsumLastMaxChunks = 32

// colsumCounters returns the device address of the zeroed per-tile counters with which colsum_partial and
// gelu_bwd_colsum finish their sums in the same launch (kernels/norm.cu cs_last; each tile's last block resets
// its counter), allocated and zeroed once per backend, or 0 (the host then launches colsum_finish: the same
// bits) when there are more than colsumLastMaxChunks chunks or colsumTiles tiles.
func (o *op) colsumCounters(tiles, chunks int) uint64 {
	if o.err != nil || tiles > colsumTiles || chunks > colsumLastMaxChunks || colsumFinishLaunch {
		return 0
	}
	if o.b.colsumCount == 0 {
		p, err := cu.MemAlloc(4 * colsumTiles)
		if o.fail(driverErr("cuMemAlloc", err, "column-sum counters")) != nil {
			return 0
		}
		if o.fail(o.memset32(uint64(p), 0, colsumTiles, "column-sum counters")) != nil {
			cu.MemFree(p)
			return 0
		}
		o.b.colsumCount = p
	}
	return uint64(o.b.colsumCount)
}

// colsumFinishLaunch makes the column sums always end with a colsum_finish launch (set only by the test that
// compares both ends, export_test.go SetColsumFinishLaunch).
var colsumFinishLaunch = false

// colsumChunks splits n rows into the chunks of the column sums: 256 rows each, more when the chunk count
// would pass the grid's y extent (65535), and 128 rows each for n ≤ colsumSmallRows = 4096 (BERT-base 32×128's 4096
// rows: 32 chunks × 12 column tiles = 384 blocks for the H200's 132 multiprocessors, where 256-row chunks give
// 192), still within colsumLastMaxChunks. The rule depends on n alone, so every path (colsum_partial,
// colsum_partial4, gelu_bwd_colsum) keeps the same chunks and bits; the LayerNorm backward's weight
// gradients, and the bias gradient it fuses, take lnBwdChunks' (the same rule for n ≥ 32768).
func colsumChunks(n int) (rowsPerChunk, chunks int) {
	rowsPerChunk = max(256, (n+65534)/65535)
	if n <= colsumSmallRows {
		rowsPerChunk = 128
	}
	return rowsPerChunk, (n + rowsPerChunk - 1) / rowsPerChunk
}

// colsumSmallRows is the most rows whose column sums take 128-row chunks (colsumChunks); TUNE_COLSUM=wide sets
// it to 0 (256-row chunks at every size, the rule it was measured against).
var colsumSmallRows = map[bool]int{false: 4096, true: 0}[os.Getenv("TUNE_COLSUM") == "wide"]

// colsumMode queues colsum_partial's mode (0: Σ dy; 1: LayerNorm's Σ dy·n̂ and Σ dy; 2: RMSNorm's
// Σ dy·round_x(x·rstd) into outA) and the in-order finish into outA (and outB for mode 1).
func (o *op) colsumMode(mode int, outA, outB, dy, x, mean, rstd *tensor.Tensor, n, ch int) {
	rows, _ := colsumChunks(n)
	o.colsumModeRows(mode, rows, outA, outB, dy, x, mean, rstd, n, ch)
}

// colsumModeRows is colsumMode over chunks of rowsPerChunk rows.
func (o *op) colsumModeRows(mode, rowsPerChunk int, outA, outB, dy, x, mean, rstd *tensor.Tensor, n, ch int) {
	if o.err != nil || n == 0 || (outA == nil && outB == nil) {
		return
	}
	chunks := (n + rowsPerChunk - 1) / rowsPerChunk
	pa := o.scratch(4 * chunks * ch)
	var pb uint64
	if mode == 1 {
		p := o.scratch(4 * chunks * ch)
		defer o.release(p)
		pb = uint64(p)
	}
	defer o.release(pa)
	v := vec2(dy, x)
	if ch%2 != 0 {
		v = 0
	}
	tiles := (ch + 63) / 64
	count := o.colsumCounters(tiles, chunks)
	if mode == 0 && count == 0 {
		o.colsumPartial0(pa, dy, n, ch, rowsPerChunk, chunks, v)
	} else {
		o.launch("norm.cu", "colsum_partial", tiles, chunks, 32, 8, uint64(pa), pb, addr(dy), dt(dy), addr(x), dt(x),
			addr(mean), addr(rstd), i64(n), i64(ch), i64(rowsPerChunk), i64(mode), v, addr(outA), dt(outA), addr(outB), dt(outB), count)
	}
	if count != 0 { // the last block of each column tile finished it (kernels/norm.cu cs_last)
		return
	}
	if outA != nil {
		o.launch("norm.cu", "colsum_finish", (ch+31)/32, 1, 32, 8, addr(outA), dt(outA), uint64(pa), i64(chunks), i64(ch))
	}
	if outB != nil {
		o.launch("norm.cu", "colsum_finish", (ch+31)/32, 1, 32, 8, addr(outB), dt(outB), pb, i64(chunks), i64(ch))
	}
}

// unary validates out = f(x) over equal element counts and queues kernel name of elementwise.cu.
func (b *Backend) unary(opName, kernel string, out, x *tensor.Tensor) (err error) {
	o := b.begin(opName, out, x)
	defer o.end(&err)
	if o.float("out", out).float("x", x).failed() {
		return
	}
	n := out.Numel()
	if o.numel("x", x, n).failed() {
		return
	}
	o.ew("elementwise.cu", kernel, n, addr(out), dt(out), addr(x), dt(x), i64(n), o.ewVec(out, x))
	return
}

// binary validates dx = f(dout, s) over equal element counts (s the saved forward tensor) and queues kernel.
func (b *Backend) binary(opName, kernel, sname string, dx, dout, s *tensor.Tensor) (err error) {
	o := b.begin(opName, dx, dout, s)
	defer o.end(&err)
	if o.float("dx", dx).float("dout", dout).float(sname, s).failed() {
		return
	}
	n := dx.Numel()
	if o.numel("dout", dout, n).numel(sname, s, n).failed() {
		return
	}
	o.ew("elementwise.cu", kernel, n, addr(dx), dt(dx), addr(dout), dt(dout), addr(s), dt(s), i64(n), o.ewVec(dx, dout, s))
	return
}

// GELU sets out = x·Φ(x) = 0.5·x·(1 + erf(x/√2)), the exact form (PyTorch gelu, approximate='none'), in FP32
// with erff.
func (b *Backend) GELU(out, x *tensor.Tensor) error { return b.unary("GELU", "gelu_fwd", out, x) }

// GELUBackward sets dx = dout·(Φ(x) + x·φ(x)) from the forward input x.
func (b *Backend) GELUBackward(dx, dout, x *tensor.Tensor) error {
	return b.binary("GELUBackward", "gelu_bwd", "x", dx, dout, x)
}

// GELUBackwardRecompute sets dx = dout·(Φ(x) + x·φ(x)) and, when out is non-nil, out = GELU(x) (the same
// FP32 operations as gelu_fwd, so the same bits), reading x once; dx may be dout. With dbias it runs as
// BiasGrad's column tiles (norm.cu's gelu_bwd_colsum) and adds
// the stored dx values into the same partials BiasGrad would form, so dbias gets BiasGrad's bits too.
func (b *Backend) GELUBackwardRecompute(dx, out, dbias, dout, x *tensor.Tensor) (err error) {
	o := b.begin("GELUBackwardRecompute", dx, out, dbias, dout, x)
	defer o.end(&err)
	if o.float("dx", dx).float("dout", dout).float("x", x).failed() {
		return
	}
	n := dx.Numel()
	if out != nil {
		o.float("out", out).numel("out", out, n)
	}
	if o.numel("dout", dout, n).numel("x", x, n).failed() {
		return
	}
	if dbias == nil {
		o.ew("elementwise.cu", "gelu_bwd_recompute", n, addr(dx), dt(dx), addr(out), dt(out), addr(dout), dt(dout), addr(x), dt(x), i64(n), o.ewVec(dx, out, dout, x))
		return
	}
	rows, ch := o.rows("dx", dx)
	if o.float("dbias", dbias).numel("dbias", dbias, ch).failed() || rows == 0 || ch == 0 {
		return
	}
	per, chunks := colsumChunks(rows)
	pa := o.scratch(4 * chunks * ch)
	defer o.release(pa)
	v := vec2(dx, out, dout, x)
	if ch%2 != 0 {
		v = 0
	}
	tiles := (ch + 63) / 64
	count := o.colsumCounters(tiles, chunks)
	o.launch("norm.cu", "gelu_bwd_colsum", tiles, chunks, 32, 8, uint64(pa), addr(dx), dt(dx), addr(out), dt(out),
		addr(dout), dt(dout), addr(x), dt(x), i64(rows), i64(ch), i64(per), v, addr(dbias), dt(dbias), count)
	if count == 0 {
		o.launch("norm.cu", "colsum_finish", (ch+31)/32, 1, 32, 8, addr(dbias), dt(dbias), uint64(pa), i64(chunks), i64(ch))
	}
	return
}

// Tanh sets out = tanh(x).
func (b *Backend) Tanh(out, x *tensor.Tensor) error { return b.unary("Tanh", "tanh_fwd", out, x) }

// TanhBackward sets dx = dout·(1 − y²) from the forward output y.
func (b *Backend) TanhBackward(dx, dout, y *tensor.Tensor) error {
	return b.binary("TanhBackward", "tanh_bwd", "y", dx, dout, y)
}

// Dropout sets out = x·keep/(1−p), keep drawn per element i as tensor.PhiloxKeep(seed, offset, i, p), the
// same mask as every backend; p must be in [0, 1) (ErrArgument); p == 0 copies (casting if the dtypes
// differ). out may be x.
func (b *Backend) Dropout(out, x *tensor.Tensor, p float32, seed, offset uint64) error {
	return b.dropout("Dropout", out, x, p, seed, offset)
}

// DropoutBackward sets dx = dout·keep/(1−p), regenerating the forward's mask from (seed, offset).
func (b *Backend) DropoutBackward(dx, dout *tensor.Tensor, p float32, seed, offset uint64) error {
	return b.dropout("DropoutBackward", dx, dout, p, seed, offset)
}

func (b *Backend) dropout(opName string, out, x *tensor.Tensor, p float32, seed, offset uint64) (err error) {
	o := b.begin(opName, out, x)
	defer o.end(&err)
	if o.float("out", out).float("in", x).failed() {
		return
	}
	n := out.Numel()
	o.numel("in", x, n).that(p >= 0 && p < 1 && !math.IsNaN(float64(p)), tensor.ErrArgument, "p = %v, want 0 ≤ p < 1", p)
	if o.failed() {
		return
	}
	if p == 0 {
		if out.DType == x.DType {
			o.copyBytes(addr(out), addr(x), x.Bytes())
		} else {
			o.ew("elementwise.cu", "cast", n, addr(out), dt(out), addr(x), dt(x), i64(n), o.ewVec(out, x))
		}
		return
	}
	scale := 1 / (1 - p) // float32, as tensor/cpu
	seed, offset = b.philoxArgs(p, seed, offset)
	o.ew("elementwise.cu", "dropout", n, addr(out), dt(out), addr(x), dt(x), i64(n), f32(p), f32(scale), seed, offset, vec(out, x))
	return
}

// MSELoss sets losses (N, F32) = (pred − target)² elementwise.
func (b *Backend) MSELoss(losses, pred, target *tensor.Tensor) (err error) {
	o := b.begin("MSELoss", losses, pred, target)
	defer o.end(&err)
	if o.f32("losses", losses).float("pred", pred).float("target", target).failed() {
		return
	}
	n := losses.Numel()
	if o.numel("pred", pred, n).numel("target", target, n).failed() {
		return
	}
	o.ew("elementwise.cu", "mse_fwd", n, addr(losses), addr(pred), dt(pred), addr(target), dt(target), i64(n), o.ewVec(losses, pred, target))
	return
}

// MSELossBackward sets dpred (N) = scale·2·(pred − target); for a mean loss seeded with S, scale = S/N.
func (b *Backend) MSELossBackward(dpred, pred, target *tensor.Tensor, scale float32, scaleBy *tensor.Tensor) (err error) {
	o := b.begin("MSELossBackward", dpred, pred, target, scaleBy)
	defer o.end(&err)
	if o.float("dpred", dpred).float("pred", pred).float("target", target).scaleBy(scaleBy).failed() {
		return
	}
	n := dpred.Numel()
	if o.numel("pred", pred, n).numel("target", target, n).failed() {
		return
	}
	o.ew("elementwise.cu", "mse_bwd", n, addr(dpred), dt(dpred), addr(pred), dt(pred), addr(target), dt(target), i64(n), f32(scale), o.ewVec(dpred, pred, target), addr(scaleBy))
	return
}
