package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// swigluKernel: out = rg(silu(gate))·up with silu(g) = g/(1 + e^−g) (torch.nn.functional.silu, transformers'
// ACT2FN["silu"]) evaluated in float64 and rounded to T, and rg the rounding to gate's dtype: LlamaMLP
// computes act_fn(gate_proj(x)) * up_proj(x), so the activation is a tensor of gate's dtype before the
// multiply (models/llama/modeling_llama.py). rg is the identity for F32 and in the gradient checks.
func swigluKernel[T scalar](out, gate, up []T, rg func(T) T) {
	for i, g := range gate {
		f := float64(g)
		out[i] = rg(T(f/(1+math.Exp(-f)))) * up[i]
	}
}

// swigluBackwardKernel is the derivative of swigluKernel as PyTorch's autograd computes it: the gradient of
// the activation is rg(dout·up), then silu's backward (aten silu_backward: grad·σ·(1 + g·(1 − σ))), and
//
//	dgate = rg(dout·up)·σ(g)·(1 + g·(1 − σ(g)))
//	dup   = dout·rg(silu(g))
func swigluBackwardKernel[T scalar](dgate, dup, dout, gate, up []T, rg func(T) T) {
	for i, g := range gate {
		f := float64(g)
		sig := 1 / (1 + math.Exp(-f))
		d, u := dout[i], up[i]
		dgate[i] = rg(d*u) * T(sig*(1+f*(1-sig)))
		dup[i] = d * rg(T(f/(1+math.Exp(-f)))) // the forward's activation, as autograd saved it
	}
}

// SwiGLU sets out (N, I) = round_gate(silu(gate))·up (see swigluKernel); gate and up share a dtype and an
// element count with out. out may be gate or up.
func (b *Backend) SwiGLU(out, gate, up *tensor.Tensor) (err error) {
	const op = "SwiGLU"
	defer guard(&err, op, out, gate, up)
	c := newCheck(op, out, gate, up).float("out", out).float("gate", gate).float("up", up)
	n := 0
	if c.Err() == nil {
		n = out.Numel()
	}
	c.numel("gate", gate, n).numel("up", up, n)
	if c.Err() == nil {
		c.that(gate.DType == up.DType, tensor.ErrDType, "gate is %v but up is %v; they must share a dtype", gate.DType, up.DType)
	}
	if c.Err() != nil {
		return c.Err()
	}
	gv, uv, rg := load(gate), load(up), rounder(gate.DType)
	o := overwrite(out)
	parallelFor(len(gv), 30, func(lo, hi int) { swigluKernel(o.V[lo:hi], gv[lo:hi], uv[lo:hi], rg) })
	o.Store()
	return nil
}

// SwiGLUBackward sets dgate = and dup = from dout and the forward's gate and up (see swigluBackwardKernel);
// every argument has the same element count, gate and up one dtype. dgate may alias gate or dout, dup up or
// dout (each element is read before it is written), but dgate and dup must differ.
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up *tensor.Tensor) (err error) {
	const op = "SwiGLUBackward"
	defer guard(&err, op, dgate, dup, dout, gate, up)
	c := newCheck(op, dgate, dup, dout, gate, up).float("dgate", dgate).float("dup", dup).float("dout", dout).
		float("gate", gate).float("up", up)
	n := 0
	if c.Err() == nil {
		n = gate.Numel()
	}
	c.numel("dgate", dgate, n).numel("dup", dup, n).numel("dout", dout, n).numel("up", up, n)
	if c.Err() == nil {
		c.that(gate.DType == up.DType, tensor.ErrDType, "gate is %v but up is %v; they must share a dtype", gate.DType, up.DType)
	}
	if c.Err() != nil {
		return c.Err()
	}
	dv, gv, uv, rg := load(dout), load(gate), load(up), rounder(gate.DType)
	og, ou := overwrite(dgate), overwrite(dup)
	parallelFor(n, 40, func(lo, hi int) {
		swigluBackwardKernel(og.V[lo:hi], ou.V[lo:hi], dv[lo:hi], gv[lo:hi], uv[lo:hi], rg)
	})
	og.Store()
	ou.Store()
	return nil
}

// SwiGLUBackwardRecompute runs SwiGLU into a scratch, SwiGLUBackward, then copies the scratch into out
// (tensor.Backend.SwiGLUBackwardRecompute): the reference, out allowed to alias gate or up.
func (b *Backend) SwiGLUBackwardRecompute(dgate, dup, out, dout, gate, up *tensor.Tensor) (err error) {
	if out == nil {
		return b.SwiGLUBackward(dgate, dup, dout, gate, up)
	}
	s, err := b.Alloc(out.DType, out.Shape...)
	if err != nil {
		return err
	}
	defer b.Free(s)
	if err := b.SwiGLU(s, gate, up); err != nil {
		return err
	}
	if err := b.SwiGLUBackward(dgate, dup, dout, gate, up); err != nil {
		return err
	}
	return b.Copy(out, s)
}
