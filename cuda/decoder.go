//go:build cuda

package cuda

import (
	"math"
	"os"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// RMSNorm normalizes the last axis: x (N, C) → out (N, C) = weight·round_x(x·rstd) with rstd (N, F32) =
// 1/√(mean(x²) + eps) overwritten for the backward (transformers' LlamaRMSNorm). out may be x. eps must be
// ≥ 0 (ErrArgument). One warp per row (kernels/decoder.cu).
func (b *Backend) RMSNorm(out, rstd, x, weight *tensor.Tensor, eps float32) (err error) {
	o := b.begin("RMSNorm", out, rstd, x, weight)
	defer o.end(&err)
	o.float("out", out).f32("rstd", rstd).float("x", x).float("weight", weight)
	n, ch := o.rows("x", x)
	o.numel("out", out, n*ch).numel("rstd", rstd, n).numel("weight", weight, ch).
		that(eps >= 0, tensor.ErrArgument, "eps = %v, want ≥ 0", eps)
	if o.failed() || ch == 0 {
		return
	}
	v := vec(out, x, weight)
	if ch%4 != 0 {
		v = 0
	}
	o.rowsLaunch("decoder.cu", "rmsnorm_fwd", n, addr(out), dt(out), addr(rstd), addr(x), dt(x), addr(weight), dt(weight),
		i64(n), i64(ch), f32(eps), v)
	return
}

// RMSNormBackward computes dx (N, C) = and dweight (C) += from dout (N, C) and the forward's x, weight and
// rstd (F32, N); dweight may be nil for a frozen weight. The weight gradient is a deterministic column sum
// (fixed chunks, fixed order).
func (b *Backend) RMSNormBackward(dx, dweight, dout, x, weight, rstd *tensor.Tensor) (err error) {
	o := b.begin("RMSNormBackward", dx, dweight, dout, x, weight, rstd)
	defer o.end(&err)
	o.float("dx", dx).float("dout", dout).float("x", x).float("weight", weight).f32("rstd", rstd)
	n, ch := o.rows("x", x)
	o.numel("dx", dx, n*ch).numel("dout", dout, n*ch).numel("weight", weight, ch).numel("rstd", rstd, n)
	if dweight != nil {
		o.float("dweight", dweight).numel("dweight", dweight, ch)
	}
	if o.failed() || ch == 0 {
		return
	}
	// The weight gradient reads dout and x, so it goes first: dx may alias either.
	o.colsumMode(2, dweight, nil, dout, x, nil, rstd, n, ch)
	v := vec(dx, dout, x, weight)
	if ch%4 != 0 {
		v = 0
	}
	o.rowsLaunch("decoder.cu", "rmsnorm_bwd", n, addr(dx), dt(dx), addr(dout), dt(dout), addr(x), dt(x),
		addr(weight), dt(weight), addr(rstd), i64(n), i64(ch), v)
	return
}

// ResidualRMSNorm computes Sum = X + Y and RMSNorm(Sum) into Out and Rstd in one warp-per-row pass
// (tensor.ResidualRMSNormArgs), with the add's and rmsnorm_fwd's FP32 operations, so the same bits.
func (b *Backend) ResidualRMSNorm(a tensor.ResidualRMSNormArgs) (err error) {
	o := b.begin("ResidualRMSNorm", a.Sum, a.Out, a.Rstd, a.X, a.Y, a.Weight)
	defer o.end(&err)
	o.float("Sum", a.Sum).float("Out", a.Out).f32("Rstd", a.Rstd).float("X", a.X).float("Y", a.Y).float("Weight", a.Weight)
	n, ch := o.rows("Sum", a.Sum)
	o.numel("Out", a.Out, n*ch).numel("X", a.X, n*ch).numel("Y", a.Y, n*ch).numel("Rstd", a.Rstd, n).
		numel("Weight", a.Weight, ch).that(a.Eps >= 0, tensor.ErrArgument, "Eps = %v, want ≥ 0", a.Eps)
	if o.failed() || ch == 0 {
		return
	}
	v := vec(a.Sum, a.Out, a.X, a.Y, a.Weight)
	if ch%4 != 0 {
		v = 0
	}
	o.rowsLaunch("decoder.cu", "residual_rmsnorm_fwd", n, addr(a.Sum), dt(a.Sum), addr(a.Out), dt(a.Out), addr(a.Rstd),
		addr(a.X), dt(a.X), addr(a.Y), dt(a.Y), addr(a.Weight), dt(a.Weight), i64(n), i64(ch), f32(a.Eps), v)
	return
}

// rmsNormBwdOnePass selects rmsnorm_bwd_residual_wg for ResidualRMSNormBackward (the default; read once,
// TUNE_RMSNORM_BWD=twopass turns it off): the weight gradient's partials from the row pass's own reads instead
// of colsum_partial's second read of dout and x (r7: SmolLM2 8x2048 step 85.60 ms against 87.31),
// deterministic but summed in another order (the weight gradient then differs from RMSNormBackward's in FP32
// rounding).
var rmsNormBwdOnePass = os.Getenv("TUNE_RMSNORM_BWD") != "twopass"

// ResidualRMSNormBackward computes RMSNormBackward's dx, adds it to DX (or stores it) and writes DX's half
// copy in one warp-per-row pass (rmsnorm_bwd_residual: the bits of rmsnorm_bwd, axpy and cast), after the
// weight gradient's deterministic column sum (colsum_partial mode 2, as RMSNormBackward) over dout and x
// (tensor.ResidualRMSNormBackwardArgs).
func (b *Backend) ResidualRMSNormBackward(a tensor.ResidualRMSNormBackwardArgs) (err error) {
	o := b.begin("ResidualRMSNormBackward", a.DX, a.DXHalf, a.DWeight, a.DOut, a.X, a.Weight, a.Rstd)
	defer o.end(&err)
	o.float("DX", a.DX).float("DOut", a.DOut).float("X", a.X).float("Weight", a.Weight).f32("Rstd", a.Rstd)
	n, ch := o.rows("X", a.X)
	o.numel("DX", a.DX, n*ch).numel("DOut", a.DOut, n*ch).numel("Weight", a.Weight, ch).numel("Rstd", a.Rstd, n)
	if a.DXHalf != nil {
		o.float("DXHalf", a.DXHalf).numel("DXHalf", a.DXHalf, n*ch)
	}
	if a.DWeight != nil {
		o.float("DWeight", a.DWeight).numel("DWeight", a.DWeight, ch)
	}
	if o.failed() || ch == 0 || n == 0 {
		return
	}
	v := vec(a.DX, a.DXHalf, a.DOut, a.X, a.Weight)
	if ch%4 != 0 {
		v = 0
	}
	if rmsNormBwdOnePass && v == 1 && ch <= 1024 {
		blocks := (n + 7) / 8
		var pa uint64
		if a.DWeight != nil {
			p := o.scratch(4 * blocks * ch)
			defer o.release(p)
			pa = uint64(p)
		}
		o.launch("decoder.cu", "rmsnorm_bwd_residual_wg", blocks, 1, 256, 1, pa, addr(a.DX), dt(a.DX), addr(a.DXHalf), dt(a.DXHalf),
			addr(a.DOut), dt(a.DOut), addr(a.X), dt(a.X), addr(a.Weight), dt(a.Weight), addr(a.Rstd), i64(n), i64(ch), flag(a.Accumulate))
		if a.DWeight != nil {
			o.launch("norm.cu", "colsum_finish", (ch+31)/32, 1, 32, 8, addr(a.DWeight), dt(a.DWeight), pa, i64(blocks), i64(ch))
		}
		return
	}
	o.colsumMode(2, a.DWeight, nil, a.DOut, a.X, nil, a.Rstd, n, ch)
	o.rowsLaunch("decoder.cu", "rmsnorm_bwd_residual", n, addr(a.DX), dt(a.DX), addr(a.DXHalf), dt(a.DXHalf), addr(a.DOut), dt(a.DOut),
		addr(a.X), dt(a.X), addr(a.Weight), dt(a.Weight), addr(a.Rstd), i64(n), i64(ch), flag(a.Accumulate), v)
	return
}

// RoPE rotates the strided (B, H, T, D) operand x in place by the rotate-half convention of transformers'
// apply_rotary_pos_emb, row (b, h, t) by the angles of table row positions[b, t]; cos and sin are (P, D/2)
// F32, positions (B, T) I32. Math in FP32, rounded once to x's dtype; inverse applies Rᵀ (the backward).
// The positions are not read on the host (that would synchronize every call): a position outside [0, P)
// fills its rows with NaN, which the loss's non-finite check then reports (tensor/cpu returns ErrArgument).
func (b *Backend) RoPE(x tensor.AttnOperand, bsz, h, t, d int, positions, cos, sin *tensor.Tensor, inverse bool) (err error) {
	o := b.begin("RoPE", x.T, positions, cos, sin)
	defer o.end(&err)
	o.float("x", x.T).tensor("positions", positions, tensor.I32).f32("cos", cos).f32("sin", sin)
	if o.failed() {
		return
	}
	g, gerr := opcheck.RoPEGeometry(x, bsz, h, t, d, positions, cos, sin)
	if o.fail(gerr) != nil || bsz*h*t*d == 0 {
		return
	}
	v := vec(x.T, cos, sin)
	if g.Half%4 != 0 || g.StrideB%4 != 0 || g.StrideH%4 != 0 || g.StrideT%4 != 0 {
		v = 0
	}
	w := 1
	if v == 1 {
		w = 4
	}
	groups := bsz * t * h * (g.Half / w) // one thread per w pairs
	if bsz*t*h*g.Half > math.MaxInt32-256 || g.P > math.MaxInt32 {
		o.failf(tensor.ErrUnsupported, "RoPE on CUDA supports B·T·H·D/2 and P up to 2^31 − 257, got %d, %d", bsz*t*h*g.Half, g.P)
		return
	}
	o.launch("decoder.cu", "rope", (groups+255)/256, 1, 256, 1, addr(x.T), dt(x.T), addr(positions), addr(cos), addr(sin),
		i64(t), i64(h), i64(g.Half), i64(g.StrideB), i64(g.StrideH), i64(g.StrideT), i64(g.P), flag(inverse),
		i64(bsz*t), v)
	return
}

// SwiGLU sets out (N, I) = round_gate(silu(gate))·up (transformers' LlamaMLP: act_fn(gate_proj(x)) *
// up_proj(x)); gate and up share a dtype and an element count with out. out may be gate or up.
func (b *Backend) SwiGLU(out, gate, up *tensor.Tensor) (err error) {
	o := b.begin("SwiGLU", out, gate, up)
	defer o.end(&err)
	if o.float("out", out).float("gate", gate).float("up", up).failed() {
		return
	}
	n := out.Numel()
	o.numel("gate", gate, n).numel("up", up, n)
	o.that(o.failed() || gate.DType == up.DType, tensor.ErrDType, "gate is %v but up is %v; they must share a dtype", gate.DType, up.DType)
	if o.failed() {
		return
	}
	o.ew("decoder.cu", "swiglu_fwd", n, addr(out), dt(out), addr(gate), dt(gate), addr(up), dt(up), i64(n), vec(out, gate, up))
	return
}

// SwiGLUBackward sets dgate = round(dout·up)·silu'(gate) and dup = dout·round(silu(gate)) (the roundings to
// gate's dtype, as PyTorch's autograd) from dout and the forward's gate and up. dgate may alias gate or
// dout, dup up or dout, but dgate and dup must differ.
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up *tensor.Tensor) (err error) {
	o := b.begin("SwiGLUBackward", dgate, dup, dout, gate, up)
	defer o.end(&err)
	if o.float("dgate", dgate).float("dup", dup).float("dout", dout).float("gate", gate).float("up", up).failed() {
		return
	}
	n := gate.Numel()
	o.numel("dgate", dgate, n).numel("dup", dup, n).numel("dout", dout, n).numel("up", up, n)
	o.that(o.failed() || gate.DType == up.DType, tensor.ErrDType, "gate is %v but up is %v; they must share a dtype", gate.DType, up.DType)
	if o.failed() {
		return
	}
	o.ew("decoder.cu", "swiglu_bwd", n, addr(dgate), dt(dgate), addr(dup), dt(dup), addr(dout), dt(dout), addr(gate), dt(gate),
		addr(up), dt(up), i64(n), vec(dgate, dup, dout, gate, up))
	return
}

// SwiGLUBackwardRecompute is SwiGLUBackward and SwiGLU(out, gate, up) in one pass (swiglu_bwd_recompute):
// the same operations as swiglu_bwd and swiglu_fwd, so their bits. out may alias gate or up; dgate and dup must
// not overlap out.
func (b *Backend) SwiGLUBackwardRecompute(dgate, dup, out, dout, gate, up *tensor.Tensor) (err error) {
	if out == nil {
		return b.SwiGLUBackward(dgate, dup, dout, gate, up)
	}
	o := b.begin("SwiGLUBackwardRecompute", dgate, dup, out, dout, gate, up)
	defer o.end(&err)
	if o.float("dgate", dgate).float("dup", dup).float("out", out).float("dout", dout).float("gate", gate).float("up", up).failed() {
		return
	}
	n := gate.Numel()
	o.numel("dgate", dgate, n).numel("dup", dup, n).numel("out", out, n).numel("dout", dout, n).numel("up", up, n)
	o.that(o.failed() || gate.DType == up.DType, tensor.ErrDType, "gate is %v but up is %v; they must share a dtype", gate.DType, up.DType)
	if o.failed() {
		return
	}
	o.ew("decoder.cu", "swiglu_bwd_recompute", n, addr(dgate), dt(dgate), addr(dup), dt(dup), addr(out), dt(out),
		addr(dout), dt(dout), addr(gate), dt(gate), addr(up), dt(up), i64(n), vec(dgate, dup, out, dout, gate, up))
	return
}

// GELUTanh sets out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GPT-2's tanh-approximate GELU (PyTorch gelu
// with approximate='tanh'), in FP32 with tanhf.
func (b *Backend) GELUTanh(out, x *tensor.Tensor) error {
	return b.unary("GELUTanh", "gelu_tanh_fwd", out, x)
}

// GELUTanhBackward sets dx = dout·GELUTanh'(x) from the forward input x.
func (b *Backend) GELUTanhBackward(dx, dout, x *tensor.Tensor) error {
	return b.binary("GELUTanhBackward", "gelu_tanh_bwd", "x", dx, dout, x)
}
