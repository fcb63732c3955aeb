//go:build cuda

package cuda

/*
#include <cuda.h>

// tc_attn_launch launches an attention kernel whose only parameter is the AttnParams struct at params (copied
// by the driver at launch), raising the function's dynamic shared memory limit first when it needs more than
// the default 48 KiB.
static int tc_attn_launch(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned block, unsigned smem,
                          void *stream, void *params) {
	void *args[1] = {params};
	if (smem > 48 * 1024) {
		CUresult r = cuFuncSetAttribute((CUfunction)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
		if (r != CUDA_SUCCESS) return (int)r;
	}
	return (int)cuLaunchKernel((CUfunction)fn, gx, gy, gz, block, 1, 1, smem, (CUstream)stream, args, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// attnParams mirrors struct AttnParams of kernels/attention.cuh field for field (every field 8 bytes, or two
// 4-byte floats, so the layouts agree without padding).
type attnParams struct {
	q, k, v, o, lse, mask, seg, dout, dq, dk, dv, delta, bits uint64
	qs, ks, vs, os, dos, dqs, dks, dvs                        [3]int64
	B, Hq, Hkv, Tq, Tk, D                                     int64
	scale, p, dscale, pad0                                    float32
	seed, offset                                              uint64
	causal, dtype, bitsw, bitsready                           int64
	lpt                                                       int64
	ewgen                                                     int64
}

// attnRefMaxD is the largest head size of the general kernels (REF_MAXD in kernels/attention_ref.cu).
const attnRefMaxD = 256

// attnBwdOnly ("dq" or "dkdv") makes the backward launch only that kernel, for the benchmark's breakdown.
var attnBwdOnly string

// attnBwdMMA (TUNE_ATTN_BWD=mma) makes the backward use the mma.sync kernels of kernels/attention_bwd.cu even
// where the warpgroup-MMA kernels of kernels/attention_bwd_wg.cu run (sm_90 with an NVRTC that compiles
// sm_90a, D = 64), for A/B comparisons.
var attnBwdMMA = os.Getenv("TUNE_ATTN_BWD") == "mma"

// attnBwdWGVariants are the kernel-name suffixes of kernels/attention_bwd_wg.cu's variants (its comment says
// what each changes); attnBwdWGVariant (TUNE_ATTN_BWD_WG, "" by default) picks the one launched, for
// A/B runs (kernels/attention_bwd_wg.cu says what was measured).
var attnBwdWGVariants = []string{"", "_o2", "_p"}

var attnBwdWGVariant = func() string {
	v := os.Getenv("TUNE_ATTN_BWD_WG")
	if v != "" && slices.Contains(attnBwdWGVariants, "_"+v) {
		return "_" + v
	}
	return ""
}()

// attnBwdEWGeneral (TUNE_ATTN_BWD_EW=general, or a test through export_test.go) makes the warpgroup backward
// kernels run every tile through their general elementwise code instead of the short form on tiles without
// masks or visibility tests (kernels/attention_bwd_wg.cu's ew_fast_*): the same bits, for A/B runs.
var attnBwdEWGeneral = os.Getenv("TUNE_ATTN_BWD_EW") == "general"

// attnBwdRedraw, when set (by a test through export_test.go), makes every backward kernel draw its own dropout
// keep bits instead of the dQ kernel storing them for the dK/dV kernel: the two paths must agree bit for bit.
var attnBwdRedraw bool

// attnFamilies are the kernel families of the tensor-core path (attnPlan's suffix).
var attnFamilies = []string{"bf16_d64", "f16_d64", "bf16_d128", "f16_d128"}

// attnRefModule is the module of the general kernels.
const attnRefModule = "attention_ref.cu"

// attnModule names the kernel module of kernels/attention_<kind>.cu (kind "fwd" or "bwd") for family (a value
// of attnFamilies), e.g. "attention_fwd_bf16_d64.cu".
func attnModule(kind, family string) string { return "attention_" + kind + "_" + family + ".cu" }

// attnModules returns the attention kernel modules for kernelVariants: the forward and the backward file of
// every family (and for D = 64 the warpgroup-MMA backward, kernels/attention_bwd_wg.cu, which compiles only
// for sm_90a), compiled with ATTN_D and ATTN_BF defined. A process compiles (and caches) only the modules it
// launches a kernel of: a BF16 BERT step with D = 64 compiles attention_fwd_bf16_d64.cu (one kernel) and
// attention_bwd_bf16_d64.cu (two), on the H200 also attention_fwdwg_bf16_d64.cu (kernels/attention_fwd_wgmma.cu,
// the sm_90a forward: fwdWgmma).
func attnModules() map[string]kernelVariant {
	out := map[string]kernelVariant{}
	for _, f := range attnFamilies {
		d, bf := 64, 0
		if strings.HasSuffix(f, "_d128") {
			d = 128
		}
		if strings.HasPrefix(f, "bf16") {
			bf = 1
		}
		defs := []string{fmt.Sprintf("ATTN_D %d", d), fmt.Sprintf("ATTN_BF %d", bf)}
		kinds := []string{"fwd", "bwd"}
		if d == 64 {
			kinds = append(kinds, "bwd_wg")
		}
		for _, kind := range kinds {
			out[attnModule(kind, f)] = kernelVariant{"attention_" + kind + ".cu", defs}
		}
		out[attnModule("fwdwg", f)] = kernelVariant{"attention_fwd_wgmma.cu", defs}
	}
	return out
}

// attnPlan is the kernel family chosen for one call.
type attnPlan struct {
	tc     bool   // tensor-core kernels (else the general *_ref kernels)
	suffix string // "bf16_d64", ... (an attnFamilies value)
	d      int    // head size
}

// plan picks the tensor-core kernels for BF16/F16 with D = 64 or 128 on sm_80+ when every operand's start
// and strides are multiples of 8 elements (16-byte cp.async chunks), else the general kernels for D ≤ 256;
// beyond that the call is refused with ErrUnsupported.
func (b *Backend) attnPlan(g opcheck.Attention, ops ...opcheck.AttnOperand) (attnPlan, error) {
	if g.D > attnRefMaxD {
		return attnPlan{}, opcheck.Errorf(tensor.ErrUnsupported, "fused attention on CUDA supports head sizes D ≤ %d (tensor cores: F16/BF16 with D = 64 or 128; any other D ≤ %d and F32 on the general kernel), got D = %d (B, Hq, Hkv, Tq, Tk = %d, %d, %d, %d, %d); use the two-pass path",
			attnRefMaxD, attnRefMaxD, g.D, g.B, g.Hq, g.Hkv, g.Tq, g.Tk)
	}
	if g.Hq > 65535 || g.B > 65535 || g.Hkv > 65535 {
		return attnPlan{}, opcheck.Errorf(tensor.ErrUnsupported, "fused attention on CUDA supports B and heads up to 65535 (grid limits), got B = %d, Hq = %d", g.B, g.Hq)
	}
	aligned := true
	for _, x := range ops {
		if x.T == nil {
			continue
		}
		if addr(x.T)%16 != 0 || x.SB%8 != 0 || x.SH%8 != 0 || x.ST%8 != 0 {
			aligned = false
		}
	}
	return attnPlanFor(b.sm, aligned, g.Q.T.DType, g.D), nil
}

// attnPlanFor is attnPlan's choice for a device of compute capability sm, operands aligned or not, dtype and
// head size d.
func attnPlanFor(sm int, aligned bool, dtype tensor.DType, d int) attnPlan {
	if sm < 80 || !aligned || (dtype != tensor.BF16 && dtype != tensor.F16) || (d != 64 && d != 128) {
		return attnPlan{d: d}
	}
	name := "bf16"
	if dtype == tensor.F16 {
		name = "f16"
	}
	return attnPlan{tc: true, suffix: fmt.Sprintf("%s_d%d", name, d), d: d}
}

// attnKernel is one kernel launch of an attention op: the module (attnModule, attnRefModule) and the kernel's
// name, its grid, block and dynamic shared memory, and the AttnParams.lpt it runs with.
type attnKernel struct {
	mod, name  string
	gx, gy, gz int
	block      int
	smem       int
	lpt        int64
}

// fwdKernel is the forward's launch. The tensor-core kernel takes BR = 128 queries per block for D = 64 (two
// K/V stages) and 64 for D = 128 (one stage): kernels/attention_fwd.cu.
func (pl attnPlan) fwdKernel(g opcheck.Attention) attnKernel {
	if !pl.tc {
		return attnKernel{attnRefModule, "attn_fwd_ref", cdiv(g.Tq, 8), g.Hq, g.B, 256, 0, 0}
	}
	rows, stages := 128, 2
	if pl.d == 128 {
		rows, stages = 64, 1
	}
	smem := (rows+2*stages*64)*pl.d*2 + 2*rows*(64/16)*2 // Q, the K/V stages, then two keep-bit masks
	return attnKernel{attnModule("fwd", pl.suffix), "attn_fwd_" + pl.suffix, cdiv(g.Tq, rows), g.Hq, g.B, 128, smem, 0}
}

// attnFwdMMA is TUNE_ATTN_FWD=mma: the forward keeps the mma.sync kernel (kernels/attention_fwd.cu) where the
// wgmma kernel would run, for A/B comparisons.
var attnFwdMMA = os.Getenv("TUNE_ATTN_FWD") == "mma"

// fwdWgmma reports whether the forward takes the warpgroup-MMA kernel (kernels/attention_fwd_wgmma.cu): a
// tensor-core plan on an sm_90 device whose NVRTC compiles sm_90a (the first launch finds out:
// Backend.noWgmma), not TUNE_ATTN_FWD=mma, and without dropout or with Tk % 4 == 0 (its dropout reads keep bits
// that attn_keep_bits drew). Everything else takes fwdKernel.
func (pl attnPlan) fwdWgmma(b *Backend, g opcheck.Attention) bool {
	return pl.tc && b.sm == 90 && !b.noWgmma && !attnFwdMMA && (g.DropoutP == 0 || g.Tk%4 == 0)
}

// fwdWgKernel is the wgmma forward's launch: 128 queries (two warpgroups) per block, K and V in two stages of
// 64 keys for D = 64 (two blocks per SM) or 128 keys for D = 128 (one), two keep-bit stages, 1 KiB to align the
// tiles to 1024 bytes.
func (pl attnPlan) fwdWgKernel(g opcheck.Attention) attnKernel {
	rows, keys := 128, 128
	if pl.d == 64 {
		keys = 64
	}
	smem := rows*pl.d*2 + 4*keys*pl.d*2 + 2*rows*(keys/16)*2 + 1024
	return attnKernel{attnModule("fwdwg", pl.suffix), "attn_fwd_wg_" + pl.suffix, cdiv(g.Tq, rows), g.Hq, g.B, 256, smem, 0}
}

// bwdKernels are the backward's launches, dQ first (it stores Δ and the keep bits for dK/dV), then dK/dV.
// For D = 64 both run on one-dimensional grids in longest-first block order (AttnParams.lpt: attnChunk),
// for D = 128 on (block, head, batch) grids: kernels/attention_bwd.cu.
//
// With wg (bwdWG) the D = 64 kernels are those of kernels/attention_bwd_wg.cu: the same grids and block
// order, one warpgroup per block, 1024 more bytes of shared memory to align the tiles for wgmma.
func (pl attnPlan) bwdKernels(g opcheck.Attention, wg bool) [2]attnKernel {
	if !pl.tc {
		return [2]attnKernel{
			{attnRefModule, "attn_bwd_dq_ref", cdiv(g.Tq, 8), g.Hq, g.B, 256, 0, 0},
			{attnRefModule, "attn_bwd_dkdv_ref", cdiv(g.Tk, 8), g.Hkv, g.B, 256, 0, 0},
		}
	}
	mod := attnModule("bwd", pl.suffix)
	smem := 6*64*pl.d*2 + 2*64*4*2 // Q, dO (or K, V) and two stages of the streamed pair, two keep-bit masks
	dkdvSmem := smem + 4*64*4      // + two stages of the LSE and Δ rows
	if pl.d == 64 && wg {
		wmod := attnModule("bwd_wg", pl.suffix)
		return [2]attnKernel{
			{wmod, "attn_bwd_dq_wg_" + pl.suffix + attnBwdWGVariant, cdiv(g.Tq, 64) * g.B * g.Hq, 1, 1, 128, smem + 1024, attnChunk(g.Causal, 2*g.Tk*g.D*2)},
			{wmod, "attn_bwd_dkdv_wg_" + pl.suffix + attnBwdWGVariant, cdiv(g.Tk, 64) * g.B * g.Hkv, 1, 1, 128, dkdvSmem + 1024, attnChunk(g.Causal, 2*g.Tq*g.D*2)},
		}
	}
	if pl.d == 64 {
		return [2]attnKernel{
			{mod, "attn_bwd_dq_" + pl.suffix + "_h3v3", cdiv(g.Tq, 64) * g.B * g.Hq, 1, 1, 128, smem, attnChunk(g.Causal, 2*g.Tk*g.D*2)},
			{mod, "attn_bwd_dkdv_" + pl.suffix + "_q3v3", cdiv(g.Tk, 64) * g.B * g.Hkv, 1, 1, 128, dkdvSmem, attnChunk(g.Causal, 2*g.Tq*g.D*2)},
		}
	}
	return [2]attnKernel{
		{mod, "attn_bwd_dq_" + pl.suffix, cdiv(g.Tq, 64), g.Hq, g.B, 128, smem, 0},
		{mod, "attn_bwd_dkdv_" + pl.suffix, cdiv(g.Tk, 64), g.Hkv, g.B, 128, dkdvSmem, 0},
	}
}

// attnChunkBytes bounds the operand bytes per block-order chunk of the ordered backward kernels (order_block
// in kernels/attention_bwd.cu): the K/V (dQ kernel) or Q/dO (dK/dV kernel) that a chunk's blocks read, kept well
// under the H100/H200's 50 MB L2. Tests lower it (export_test.go) to reach several chunks on small shapes.
var attnChunkBytes = 16 << 20

// attnChunk is the number of (batch, head) pairs per block-order chunk: 1 (row block fastest) without causal
// masking, where all blocks are equally long; with it, as many pairs as fit attnChunkBytes of perPair bytes
// each.
func attnChunk(causal bool, perPair int) int64 {
	if !causal || perPair <= 0 {
		return 1
	}
	return int64(max(1, attnChunkBytes/perPair))
}

// keepBitsUsable reports whether the tensor-core kernels store (forward) and read (backward) the dropout keep
// bits in the caller's KeepBits: dropout with Tk % 4 == 0 (the keep bits go through shared memory) and an
// 8-byte aligned buffer. The backward's plan being tensor-core implies the forward's was (it checks a superset
// of the operands), so a backward that reads the bits follows a forward that stored them.
func keepBitsUsable(pl attnPlan, g opcheck.Attention) bool {
	return pl.tc && g.DropoutP > 0 && g.Tk%4 == 0 && g.KeepBits != nil && addr(g.KeepBits)%8 == 0
}

// keepBitsWords is the number of 16-bit words of keep bits per query row: whole 64-key tiles (the layout of
// tensor.AttentionKeepBitsLen).
func keepBitsWords(tk int) int64 { return 4 * int64(cdiv(tk, 64)) }

// keepBitsBlocks is attn_keep_bits' grid: a thread per four 16-bit words (a 64-key tile of a query row) of
// keep bits, 128 a block.
func keepBitsBlocks(g opcheck.Attention) int {
	return int(cdiv64(int64(g.B*g.Hq*g.Tq)*keepBitsWords(g.Tk)/4, 128))
}

func cdiv64(a, b int64) int64 { return (a + b - 1) / b }

// params fills the kernel's argument block from validated arguments.
func attnParamsOf(g opcheck.Attention) attnParams {
	st := func(x opcheck.AttnOperand) [3]int64 { return [3]int64{int64(x.SB), int64(x.SH), int64(x.ST)} }
	opAddr := func(x opcheck.AttnOperand) uint64 { return addr(x.T) }
	p := attnParams{
		q: opAddr(g.Q), k: opAddr(g.K), v: opAddr(g.V), o: opAddr(g.O), lse: addr(g.LSE), mask: addr(g.Mask), seg: addr(g.Segments),
		qs: st(g.Q), ks: st(g.K), vs: st(g.V), os: st(g.O),
		B: int64(g.B), Hq: int64(g.Hq), Hkv: int64(g.Hkv), Tq: int64(g.Tq), Tk: int64(g.Tk), D: int64(g.D),
		scale: g.Scale, p: g.DropoutP, dscale: 1, seed: g.Seed, offset: g.Offset, dtype: int64(g.Q.T.DType),
	}
	if g.DropoutP > 0 {
		p.dscale = 1 / (1 - g.DropoutP) // float32, as the Dropout op
	}
	if g.Causal {
		p.causal = 1
	}
	if g.DO.T != nil {
		p.dout, p.dq, p.dk, p.dv = opAddr(g.DO), opAddr(g.DQ), opAddr(g.DK), opAddr(g.DV)
		p.dos, p.dqs, p.dks, p.dvs = st(g.DO), st(g.DQ), st(g.DK), st(g.DV)
	}
	return p
}

// attnLaunch queues the kernel name of attention module file (attnModule, attnRefModule) on a (gx, gy, gz)
// grid with smem bytes of dynamic shared memory.
func (o *op) attnLaunch(file, name string, gx, gy, gz, block, smem int, p *attnParams) {
	if o.err != nil || gx == 0 || gy == 0 || gz == 0 {
		return
	}
	f, err := o.b.function(file, name)
	if o.fail(err) != nil {
		return
	}
	fn := *(*unsafe.Pointer)(unsafe.Pointer(&f))
	st := *(*unsafe.Pointer)(unsafe.Pointer(&o.b.stream))
	blob := unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
	if o.b.graph != nil { // recorded (graph.go): the parameters are copied, p may change after the op
		blob = append([]byte(nil), blob...)
	}
	run := func() error {
		if rc := C.tc_attn_launch(fn, C.uint(gx), C.uint(gy), C.uint(gz), C.uint(block), C.uint(smem), st, unsafe.Pointer(&blob[0])); rc != 0 {
			return driverErrCode("cuLaunchKernel", int(rc), fmt.Sprintf("%s (grid %d×%d×%d, block %d, %d bytes of shared memory)", name, gx, gy, gz, block, smem))
		}
		return nil
	}
	if o.b.graph == nil {
		o.fail(run())
		return
	}
	k := &kernelLaunch{name: name, fn: fn, gx: gx, gy: gy, gz: gz, bx: block, by: 1, smem: smem, blob: blob}
	o.fail(o.issue(func() []byte { return kernelKey(fn, gx, gy, gz, block, 1, smem) }, k, nil, run))
}

func cdiv(a, b int) int { return (a + b - 1) / b }

// Attention is fused attention (FlashAttention-2's algorithm, kernels/attention.cuh): tensor-core kernels for
// F16/BF16 with D = 64 or 128 (sm_80+, operands 16-byte aligned), chunked FP32 GEMMs for F32
// (attention_f32.go), the general kernel for any other D ≤ 256; larger D is refused with tensor.ErrUnsupported.
// On sm_90 the tensor-core forward is the warpgroup-MMA kernel (kernels/attention_fwd_wgmma.cu) where fwdWgmma
// allows it, else kernels/attention_fwd.cu's mma.sync kernel. It writes O and the FP32 LSE.
func (b *Backend) Attention(a tensor.AttentionArgs) (err error) {
	o := b.begin("Attention", opcheck.AttentionTensors(a)...)
	defer o.end(&err)
	g, gerr := opcheck.AttentionGeometry(a, b.owner)
	if o.fail(gerr) != nil {
		return
	}
	pl, perr := b.attnPlan(g, g.Q, g.K, g.V, g.O)
	if o.fail(perr) != nil || g.B == 0 || g.Tq == 0 {
		return
	}
	p := attnParamsOf(g)
	p.seed, p.offset = o.b.philoxArgs(p.p, p.seed, p.offset)
	pre := keepBitsUsable(pl, g)
	if pre {
		p.bits, p.bitsw = addr(g.KeepBits), keepBitsWords(g.Tk)
	}
	if !pl.tc && o.attnF32Forward(g) { // F32: chunked GEMMs (attention_f32.go) where they cover the call
		return
	}
	k := pl.fwdKernel(g)
	if pl.fwdWgmma(b, g) {
		wk := pl.fwdWgKernel(g)
		_, ferr := b.function(wk.mod, wk.name)
		switch {
		case errors.Is(ferr, errNoSM90a):
			b.noWgmma = true // this NVRTC cannot compile sm_90a: the mma.sync kernel from now on
		case o.fail(ferr) != nil:
			return
		default:
			if g.DropoutP > 0 && !pre { // the wgmma kernel reads drawn keep bits: draw them into scratch
				p.bitsw = keepBitsWords(g.Tk)
				bits := o.scratch(2 * g.B * g.Hq * g.Tq * int(p.bitsw))
				if o.failed() {
					return
				}
				defer o.release(bits)
				p.bits, pre = uint64(bits), true
			}
			kb := k.mod
			k = wk
			if pre {
				o.attnLaunch(kb, "attn_keep_bits", keepBitsBlocks(g), 1, 1, 128, 0, &p)
				p.bitsready = 1
			}
			o.attnLaunch(k.mod, k.name, k.gx, k.gy, k.gz, k.block, k.smem, &p)
			return
		}
	}
	if pre { // attn_keep_bits draws every bit into KeepBits (for the backward too), the forward loads them
		o.attnLaunch(k.mod, "attn_keep_bits", keepBitsBlocks(g), 1, 1, 128, 0, &p)
		p.bitsready = 1
	}
	p.lpt = k.lpt
	o.attnLaunch(k.mod, k.name, k.gx, k.gy, k.gz, k.block, k.smem, &p)
	return
}

// AttentionBackward computes dQ, dK and dV: first the dQ kernel (one block per 64 queries, one sweep over the
// keys, which also stores Δ_i = Σ_j P_ij·dP_ij in a scratch buffer and, with dropout, the keep bits it draws),
// then the dK/dV kernel (one block per 64 keys of a KV head, summing the group's query heads in order, reading
// Δ and the stored bits). No atomics: the results are bit-identical from run to run.
func (b *Backend) AttentionBackward(a tensor.AttentionBackwardArgs) (err error) {
	o := b.begin("AttentionBackward", opcheck.AttentionBackwardTensors(a)...)
	defer o.end(&err)
	g, gerr := opcheck.AttentionBackwardGeometry(a, b.owner)
	if o.fail(gerr) != nil {
		return
	}
	pl, perr := b.attnPlan(g, g.Q, g.K, g.V, g.O, g.DO, g.DQ, g.DK, g.DV)
	if o.fail(perr) != nil || g.B == 0 || (!pl.tc && o.attnF32Backward(g)) { // F32: attention_f32.go
		return
	}
	p := attnParamsOf(g)
	if attnBwdEWGeneral {
		p.ewgen = 1
	}
	p.seed, p.offset = o.b.philoxArgs(p.p, p.seed, p.offset)
	rows := g.B * g.Hq * g.Tq
	if rows > 0 {
		d := o.scratch(4 * rows)
		if o.failed() {
			return
		}
		defer o.release(d)
		p.delta = uint64(d)
	}
	switch {
	case keepBitsUsable(pl, g):
		// The forward stored every keep bit in KeepBits: no kernel draws.
		p.bits, p.bitsw, p.bitsready = addr(g.KeepBits), keepBitsWords(g.Tk), 1
	case pl.tc && g.DropoutP > 0 && g.Tk%4 == 0 && !attnBwdRedraw:
		// The dQ kernel stores the keep bits it draws (one bit per score, rows padded to whole 64-key tiles)
		// and the dK/dV kernel loads them instead of drawing again.
		p.bitsw = keepBitsWords(g.Tk)
		bits := o.scratch(2 * rows * int(p.bitsw))
		if o.failed() {
			return
		}
		defer o.release(bits)
		p.bits = uint64(bits)
	}
	wg, werr := o.b.bwdWG(pl)
	if o.fail(werr) != nil {
		return
	}
	for i, k := range pl.bwdKernels(g, wg) {
		if (i == 0 && attnBwdOnly == "dkdv") || (i == 1 && attnBwdOnly == "dq") {
			continue
		}
		p.lpt = k.lpt
		o.attnLaunch(k.mod, k.name, k.gx, k.gy, k.gz, k.block, k.smem, &p)
	}
	return
}

// bwdWG reports whether the backward of plan pl runs the warpgroup-MMA kernels (kernels/attention_bwd_wg.cu):
// tensor-core BF16/F16 with D = 64 on an sm_90 device whose NVRTC compiles the module for sm_90a, unless
// TUNE_ATTN_BWD=mma. The module is compiled (or loaded from the kernel cache) on the first call; where it
// cannot be (errNoSM90a, recorded in Backend.noWgmma) every call takes the mma.sync kernels; any other error is
// returned.
func (b *Backend) bwdWG(pl attnPlan) (bool, error) {
	if !pl.tc || pl.d != 64 || b.sm != 90 || b.noWgmma || attnBwdMMA {
		return false, nil
	}
	_, err := b.function(attnModule("bwd_wg", pl.suffix), "attn_bwd_dq_wg_"+pl.suffix)
	if errors.Is(err, errNoSM90a) {
		b.noWgmma = true // as the forward's fwdWgmma: the mma.sync kernels from now on
		return false, nil
	}
	return err == nil, err
}
