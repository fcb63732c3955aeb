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
	"fmt"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// attnParams mirrors struct AttnParams of kernels/attention.cu field for field (every field 8 bytes, or two
// 4-byte floats, so the layouts agree without padding).
type attnParams struct {
	q, k, v, o, lse, mask, seg, dout, dq, dk, dv, delta, bits uint64
	qs, ks, vs, os, dos, dqs, dks, dvs                        [3]int64
	B, Hq, Hkv, Tq, Tk, D                                     int64
	scale, p, dscale, pad0                                    float32
	seed, offset                                              uint64
	causal, dtype, bitsw, bitsready                           int64
	dkp, dvp                                                  uint64
	lpt                                                       int64
}

// attnRefMaxD is the largest head size of the general kernels (REF_MAXD in kernels/attention.cu).
const attnRefMaxD = 256

// attnFwdVariant names a forward variant of the BF16 tensor-core kernel (a key of fwdShapes: "_m2", "_bc128",
// "_db", "_sb", "_m1", "_m1o4", "_m1s3", "_s3", "_h3", "_h3s3"; see kernels/attention.cu), read once from TUNE_ATTN_FWD ("" the default
// kernels) and overridden by the microbenchmark and tests through export_test.go; one that does not exist for
// the head size or dtype falls back to the default, a name that is no variant makes Attention fail naming it.
var attnFwdVariant = os.Getenv("TUNE_ATTN_FWD")

// attnBwdOnly ("dq" or "dkdv") makes the backward launch only that kernel, for the benchmark's breakdown.
var attnBwdOnly string

// attnDQVariant, when set (by the microbenchmark and tests through export_test.go), picks another dQ kernel:
// "dq2" the two-sweep attn_bwd_dq2_* (Δ from a first sweep, the design before the one-sweep kernel), "smq" the
// one-sweep BF16 D = 64 kernel with Q's and dO's fragments read from shared memory each step.
var attnDQVariant string

// attnBwdRedraw, when set (by the microbenchmark through export_test.go), makes every backward kernel draw
// its own dropout keep bits instead of the dQ kernel's first sweep storing them for the others.
var attnBwdRedraw bool

// attnBwdDefault is the backward design used when TUNE_ATTN_BWD is unset: "v10" (D = 64: v3's longest-first
// block order with the dQ and dK/dV kernels at three blocks per SM, one dK/dV block per KV head's key block as
// in v2; D = 128: v2). On the H200 (2026-12-02, call r7, BF16 backward against v2) it took (64, 12, 512, 64)
// from 1347 to 1237 µs (1400 to 1310 with dropout 0.1), (8, 32, 2048, 64) causal from 3546 to 3193 µs and
// SmolLM2's (8, 9/3, 2048, 64) causal from 1180 to 976 µs (v8, the same with v3's GQA split: 1083).
const attnBwdDefault = "v10"

// attnBwdVariant is the backward design, read once from TUNE_ATTN_BWD (attnBwdDefault when unset): "v2" (or
// "") the dQ and dK/dV kernels of attention_v2_* (D = 64) or the family module (D = 128) on their (blocks,
// heads, batch) grids, "v3" the same kernels in longest-first
// block order for causal attention, and with GQA (Hq > Hkv) dK/dV blocks per query head summed by
// attn_bwd_gqa_sum (see v3Backward), "v4" v3 with the dK/dV kernel of two key tiles per warp for D = 64
// (attn_bwd_dkdv2_*; D = 128 as v3), "v5" v2 and "v6" v3 with the D = 64 kernels compiled for three blocks per
// SM (attn_bwd_*_o3*: fragments of the streamed tiles from shared memory, at most 168 registers; same results
// as v2 and v3; D = 128 as v2 and v3), "v7" v3 with the D = 64 kernels processing each step's tile in two halves
// at three blocks per SM (attn_bwd_*_h3v3*; same results as v3), "v8" v7 with the dK/dV kernel in quarter-tile
// steps (attn_bwd_dkdv_*_q3v3*; D = 128 as v2), "v9" v3 and "v10" v8 without the GQA split (one dK/dV block per KV head's
// key block looping over the group, in v3's longest-first order), "v11" v8 with rings of three tile stages in
// both kernels (one barrier per step instead of two; same results), "v12" v8 with the dK/dV kernel at four
// blocks per SM (attn_bwd_dkdv_*_q4v3*). Any other value makes AttentionBackward fail naming it. The
// microbenchmark and tests override it through export_test.go ("" there is v2).
var attnBwdVariant = func() string {
	if v, ok := os.LookupEnv("TUNE_ATTN_BWD"); ok {
		return v
	}
	return attnBwdDefault
}()

// attnNoKeepBits, when set (by the microbenchmark and tests through export_test.go), ignores
// AttentionArgs.KeepBits: the backward draws its keep bits as if none were given.
var attnNoKeepBits bool

// fwdShape is a forward kernel's tiling: MT row tiles of 16 per warp (64·MT queries per block), BC keys per
// step, st K/V stages (fwd_tc's ST: 1 single-buffered, 2 double-buffered, 3 a ring of three).
type fwdShape struct {
	mt, bc, st int
}

// fwdShapes are the forward kernels by name suffix and head size ("" is the default of each).
var fwdShapes = map[string]map[int]fwdShape{
	"":       {64: {2, 64, 2}, 128: {1, 64, 1}},
	"_m2":    {128: {2, 64, 1}},
	"_bc128": {64: {2, 128, 1}},
	"_db":    {128: {1, 64, 2}},
	"_sb":    {64: {2, 64, 1}},
	"_m1":    {64: {1, 64, 2}},
	"_m1o4":  {64: {1, 64, 2}},
	"_m1s3":  {64: {1, 64, 3}},
	"_s3":    {64: {2, 64, 3}},
	"_h3":    {64: {2, 64, 2}},
	"_h3s3":  {64: {2, 64, 3}},
}

// attnFamilies are the kernel families of the tensor-core path (attnPlan's suffix).
var attnFamilies = []string{"bf16_d64", "f16_d64", "bf16_d128", "f16_d128"}

// attnSets are the kernel sets compiled into one module per family, by the ATTN_SET value that selects them
// in kernels/attention.cu: "" the default kernels (forward and attnBwdDefault's backward), "bench" the
// microbenchmark's forward and dQ variants, "v2" the backward of v2 for D = 64 (for D = 128 it is the
// default's), "v3" the backward variants v3 and v4, "v5" the variants v5, v6 and v7.
var attnSets = map[string]int{"": 0, "bench": 1, "v2": 2, "v3": 3, "v5": 5}

// attnRefModule is the module of the general kernels (kernels/attention.cu with no macro defined).
const attnRefModule = "attention.cu"

// attnModule names the kernel module of set (a key of attnSets) for family (a value of attnFamilies), e.g.
// "attention_bf16_d64.cu" or "attention_v3_f16_d128.cu".
func attnModule(set, family string) string {
	if set == "" {
		return "attention_" + family + ".cu"
	}
	return "attention_" + set + "_" + family + ".cu"
}

// attnModules returns the attention kernel modules for kernelVariants: every set of every family, compiled
// from kernels/attention.cu with ATTN_D, ATTN_BF and ATTN_SET defined. A process compiles (and caches) only
// the modules it launches a kernel of: a BF16 BERT step with D = 64 compiles the three kernels of
// attention_bf16_d64.cu, not all of the file.
func attnModules() map[string]kernelVariant {
	out := map[string]kernelVariant{}
	for _, f := range attnFamilies {
		var d, bf int
		fmt.Sscanf(f[strings.IndexByte(f, 'd')+1:], "%d", &d)
		if strings.HasPrefix(f, "bf16") {
			bf = 1
		}
		for set, n := range attnSets {
			if (set == "v5" || set == "v2") && d != 64 {
				continue // v5 to v8 change only the D = 64 kernels; v2's D = 128 kernels are the default's
			}
			out[attnModule(set, f)] = kernelVariant{"attention.cu", []string{fmt.Sprintf("ATTN_D %d", d), fmt.Sprintf("ATTN_BF %d", bf), fmt.Sprintf("ATTN_SET %d", n)}}
		}
	}
	return out
}

// attnPlan is the kernel family chosen for one call.
type attnPlan struct {
	tc      bool   // tensor-core kernels (else the general *_ref kernels)
	suffix  string // "bf16_d64", ... (an attnFamilies value)
	mod     string // the module of fwd: attnModule("", suffix), that of a forward variant, or attnRefModule
	fwd     string // the forward kernel's name
	fwdRows int    // queries per forward block
	fwdSmem int    // dynamic shared memory of the forward kernel, bytes
}

// plan picks the tensor-core kernels for BF16/F16 with D = 64 or 128 on sm_80+ when every operand's start
// and strides are multiples of 8 elements (16-byte cp.async chunks), else the general kernels for D ≤ 256;
// beyond that the call is refused with ErrUnsupported.
func (b *Backend) attnPlan(g opcheck.Attention, ops ...opcheck.AttnOperand) (attnPlan, error) {
	dtype := g.Q.T.DType
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
	if b.sm < 80 || !aligned || (dtype != tensor.BF16 && dtype != tensor.F16) || (g.D != 64 && g.D != 128) {
		return attnPlan{mod: attnRefModule}, nil
	}
	name := "bf16"
	if dtype == tensor.F16 {
		name = "f16"
	}
	p := attnPlan{tc: true, suffix: fmt.Sprintf("%s_d%d", name, g.D)}
	p.mod = attnModule("", p.suffix)
	v := ""
	if _, ok := fwdShapes[attnFwdVariant][g.D]; ok && dtype == tensor.BF16 && attnFwdVariant != "" {
		v, p.mod = attnFwdVariant, attnModule("bench", p.suffix)
	}
	fs := fwdShapes[v][g.D]
	stages := fs.st
	p.fwd, p.fwdRows = "attn_fwd_"+p.suffix+v, 64*fs.mt
	p.fwdSmem = (p.fwdRows+2*stages*fs.bc)*g.D*2 + 2*p.fwdRows*(fs.bc/16)*2 // tiles, then two keep-bit masks
	return p, nil
}

// keepBitsUsable reports whether the tensor-core kernels store (forward) and read (backward) the dropout keep
// bits in the caller's KeepBits: dropout with Tk % 4 == 0 (the keep bits go through shared memory) and an
// 8-byte aligned buffer. The backward's plan being tensor-core implies the forward's was (it checks a superset
// of the operands), so a backward that reads the bits follows a forward that stored them.
func keepBitsUsable(pl attnPlan, g opcheck.Attention) bool {
	return pl.tc && g.DropoutP > 0 && g.Tk%4 == 0 && g.KeepBits != nil && addr(g.KeepBits)%8 == 0 && !attnNoKeepBits
}

// keepBitsWords is the number of 16-bit words of keep bits per query row: whole 64-key tiles (the layout of
// tensor.AttentionKeepBitsLen).
func keepBitsWords(tk int) int64 { return 4 * int64(cdiv(tk, 64)) }

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
	k := &kernelLaunch{fn: fn, gx: gx, gy: gy, gz: gz, bx: block, by: 1, smem: smem, blob: blob}
	o.fail(o.issue(kernelKey(fn, gx, gy, gz, block, 1, smem), blob, k, run))
}

func cdiv(a, b int) int { return (a + b - 1) / b }

// Attention is fused attention (FlashAttention-2's algorithm, kernels/attention.cu): tensor-core kernels for
// F16/BF16 with D = 64 or 128 (sm_80+, operands 16-byte aligned), the general kernel for F32 and any other
// D ≤ 256; larger D is refused with tensor.ErrUnsupported. It writes O and the FP32 LSE.
func (b *Backend) Attention(a tensor.AttentionArgs) (err error) {
	o := b.begin("Attention", opcheck.AttentionTensors(a)...)
	defer o.end(&err)
	g, gerr := opcheck.AttentionGeometry(a, b.owner)
	if o.fail(gerr) != nil {
		return
	}
	if _, ok := fwdShapes[attnFwdVariant]; !ok {
		o.fail(fmt.Errorf("cuda: TUNE_ATTN_FWD=%q is not an attention forward variant (use %s, or unset it for the default kernels)", attnFwdVariant, fwdVariantNames()))
		return
	}
	pl, perr := b.attnPlan(g, g.Q, g.K, g.V, g.O)
	if o.fail(perr) != nil || g.B == 0 || g.Tq == 0 {
		return
	}
	p := attnParamsOf(g)
	if keepBitsUsable(pl, g) {
		p.bits, p.bitsw = addr(g.KeepBits), keepBitsWords(g.Tk) // the forward stores the bits it draws there
	}
	if pl.tc {
		o.attnLaunch(pl.mod, pl.fwd, cdiv(g.Tq, pl.fwdRows), g.Hq, g.B, 128, pl.fwdSmem, &p)
	} else {
		o.attnLaunch(attnRefModule, "attn_fwd_ref", cdiv(g.Tq, 8), g.Hq, g.B, 256, 0, &p)
	}
	return
}

// fwdVariantNames lists the forward variants for an error message.
func fwdVariantNames() string {
	var names []string
	for v := range fwdShapes {
		if v != "" {
			names = append(names, v)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
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
	if o.fail(perr) != nil || g.B == 0 {
		return
	}
	p := attnParamsOf(g)
	rows := g.B * g.Hq * g.Tq
	var delta uint64
	if rows > 0 {
		d := o.scratch(4 * rows)
		if o.failed() {
			return
		}
		defer o.release(d)
		delta = uint64(d)
	}
	p.delta = delta
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
	mod, dq, dkdv := attnModule("", pl.suffix), "attn_bwd_dq_"+pl.suffix, "attn_bwd_dkdv_"+pl.suffix
	if g.D == 64 {
		mod = attnModule("v2", pl.suffix)
	}
	switch attnBwdVariant {
	case "", "v2":
	case "v5":
		if pl.tc && attnDQVariant == "" && g.D == 64 {
			mod, dq, dkdv = attnModule("v5", pl.suffix), dq+"_o3", dkdv+"_o3"
		}
	case "v3", "v4", "v6", "v7", "v8", "v9", "v10", "v11", "v12":
		if pl.tc && attnDQVariant == "" && (g.D == 64 || (attnBwdVariant != "v8" && attnBwdVariant != "v10")) {
			o.v3Backward(pl, g, &p, v3KernelsOf(attnBwdVariant, pl.suffix, g.D))
			return
		}
	default:
		o.fail(fmt.Errorf("cuda: TUNE_ATTN_BWD=%q is not an attention backward variant (use v2 to v12, or unset it for the default %s)", attnBwdVariant, attnBwdDefault))
		return
	}
	if pl.tc {
		smem := 6*64*g.D*2 + 2*64*4*2 // tiles and two 64 × 64 keep-bit masks
		dqMod := mod
		switch {
		case attnDQVariant == "dq2":
			dqMod, dq = attnModule("bench", pl.suffix), "attn_bwd_dq2_"+pl.suffix
		case attnDQVariant == "smq" && pl.suffix == "bf16_d64":
			dqMod, dq = attnModule("bench", pl.suffix), dq+"_smq"
		}
		if attnBwdOnly != "dkdv" {
			o.attnLaunch(dqMod, dq, cdiv(g.Tq, 64), g.Hq, g.B, 128, smem, &p)
		}
		if attnBwdOnly != "dq" {
			o.attnLaunch(mod, dkdv, cdiv(g.Tk, 64), g.Hkv, g.B, 128, smem+4*64*4, &p)
		}
	} else {
		o.attnLaunch(attnRefModule, "attn_bwd_dq_ref", cdiv(g.Tq, 8), g.Hq, g.B, 256, 0, &p)
		o.attnLaunch(attnRefModule, "attn_bwd_dkdv_ref", cdiv(g.Tk, 8), g.Hkv, g.B, 256, 0, &p)
	}
	return
}

// attnV3ChunkBytes bounds the operand bytes per block-order chunk of the v3 backward (order_block in
// kernels/attention.cu): the K/V (dQ kernel) or Q/dO (dK/dV kernel) that a chunk's blocks read, kept well under
// the H100/H200's 50 MB L2. Tests lower it (export_test.go) to reach several chunks on small shapes.
var attnV3ChunkBytes = 16 << 20

// v3Chunk is the number of (batch, head) pairs per block-order chunk: 1 (row block fastest, the default
// kernels' order) without causal masking, where all blocks are equally long; with it, as many pairs as fit
// attnV3ChunkBytes of perPair bytes each.
func v3Chunk(causal bool, perPair int) int64 {
	if !causal || perPair <= 0 {
		return 1
	}
	return int64(max(1, attnV3ChunkBytes/perPair))
}

// v3Kernels are the kernels of one v3-style backward (v3Backward): the module, the dQ kernel, the dK/dV kernel
// (one block per KV head's key block), its split form (one block per query head's key block, with GQA), the
// keys per dK/dV block and its dynamic shared memory.
type v3Kernels struct {
	mod, dq, dkdv, split   string
	keys, dqSmem, dkdvSmem int
	noSplit                bool // with GQA too, one dK/dV block per KV head's key block (the group's heads in turn)
}

// v3KernelsOf returns the kernels of variant v ("v3", "v4", "v6" to "v10") for family suffix and head size d;
// v4, v6, v7, v8 and v10 differ from v3 in their kernels only for D = 64; v9 and v10 do not split GQA groups.
func v3KernelsOf(v, suffix string, d int) v3Kernels {
	dqSmem := 6*64*d*2 + 2*64*4*2 // Q, dO, two K/V stages, two keep-bit masks
	k := v3Kernels{attnModule("v3", suffix), "attn_bwd_dq_" + suffix + "_v3", "attn_bwd_dkdv_" + suffix + "_v3", "attn_bwd_dkdv_" + suffix + "_v3s", 64, dqSmem, dqSmem + 4*64*4, false}
	switch {
	case v == "v4" && d == 64:
		k.dkdv = "attn_bwd_dkdv2_" + suffix
		k.split, k.keys, k.dkdvSmem = k.dkdv+"_s", 128, 2*128*64*2+2*2*32*64*2+2*2*32*4+2*2*32*4*2
	case v == "v6" && d == 64:
		k.mod, k.dq, k.dkdv, k.split = attnModule("v5", suffix), "attn_bwd_dq_"+suffix+"_o3v3", "attn_bwd_dkdv_"+suffix+"_o3v3", "attn_bwd_dkdv_"+suffix+"_o3v3s"
	case v == "v7" && d == 64:
		k.mod, k.dq, k.dkdv, k.split = attnModule("v5", suffix), "attn_bwd_dq_"+suffix+"_h3v3", "attn_bwd_dkdv_"+suffix+"_h3v3", "attn_bwd_dkdv_"+suffix+"_h3v3s"
	case v == "v11" && d == 64: // rings of three stages: K/V (dQ), Q/dO/LSE/Δ (dK/dV), and their keep-bit masks
		k.mod, k.dq, k.dkdv, k.split = attnModule("v5", suffix), "attn_bwd_dq_"+suffix+"_h3r3", "attn_bwd_dkdv_"+suffix+"_q3r3", "attn_bwd_dkdv_"+suffix+"_q3r3s"
		k.dqSmem, k.dkdvSmem = (2+2*3)*64*d*2+3*64*4*2, (2+2*3)*64*d*2+3*2*64*4+3*64*4*2
	case v == "v12" && d == 64:
		k.mod, k.dq, k.dkdv, k.split = attnModule("v5", suffix), "attn_bwd_dq_"+suffix+"_h3v3", "attn_bwd_dkdv_"+suffix+"_q4v3", "attn_bwd_dkdv_"+suffix+"_q4v3s"
	case (v == "v8" || v == "v10") && d == 64:
		k.mod, k.dq, k.dkdv, k.split = attnModule("", suffix), "attn_bwd_dq_"+suffix+"_h3v3", "attn_bwd_dkdv_"+suffix+"_q3v3", "attn_bwd_dkdv_"+suffix+"_q3v3s"
	}
	k.noSplit = v == "v9" || v == "v10"
	return k
}

// v3Backward is AttentionBackward's variant "v3" (TUNE_ATTN_BWD=v3) on the tensor-core kernels, same
// numerics: the dQ and dK/dV kernels on one-dimensional grids whose causal blocks run longest first; with GQA
// each dK/dV block sums one query head's contributions into FP32 partials (B·Hq·Tk·D each for dK and dV, scratch)
// and attn_bwd_gqa_sum adds the group's partials in head order, so G times as many (G times shorter) blocks
// share the GPU instead of one block per KV head looping over the group. The order of every sum is fixed:
// results are bit-identical from run to run (not to the default path: the GQA sum is grouped per head).
//
// With v4 (D = 64 only) the dK/dV kernel is attn_bwd_dkdv2_*: 128 keys per block, two 16-key tiles per warp,
// query tiles of 32 (same sums in the same order, so the same results as v3). With v6 (D = 64 only) the
// kernels are v3's compiled for three blocks per SM (attn_bwd_*_o3v3*, module attention_v5_*: same results),
// with v7 (D = 64 only) those processing each step's tile in two halves (attn_bwd_*_h3v3*: same results), with
// v8 (D = 64 only) the dK/dV kernel in quarters (attn_bwd_dkdv_*_q3v3*, in the family module); v9 and v10 (the
// default) are v3 and v8 with k.noSplit: one dK/dV block per KV head's key block even with GQA.
func (o *op) v3Backward(pl attnPlan, g opcheck.Attention, p *attnParams, k v3Kernels) {
	nqb, nkb := cdiv(g.Tq, 64), cdiv(g.Tk, k.keys)
	grp := g.Hq / g.Hkv
	if attnBwdOnly != "dkdv" {
		p.lpt = v3Chunk(g.Causal, 2*g.Tk*g.D*2)
		o.attnLaunch(k.mod, k.dq, nqb*g.B*g.Hq, 1, 1, 128, k.dqSmem, p)
	}
	if attnBwdOnly == "dq" || g.Tk == 0 {
		return
	}
	if grp == 1 || k.noSplit {
		p.lpt = v3Chunk(g.Causal, 2*g.Tq*g.D*2)
		o.attnLaunch(k.mod, k.dkdv, nkb*g.B*g.Hkv, 1, 1, 128, k.dkdvSmem, p)
		return
	}
	n := g.B * g.Hq * g.Tk * g.D
	dkp := o.scratch(4 * n)
	if o.failed() {
		return
	}
	defer o.release(dkp)
	dvp := o.scratch(4 * n)
	if o.failed() {
		return
	}
	defer o.release(dvp)
	p.dkp, p.dvp = uint64(dkp), uint64(dvp)
	p.lpt = v3Chunk(g.Causal, 2*g.Tq*g.D*2)
	o.attnLaunch(k.mod, k.split, nkb*g.B*g.Hq, 1, 1, 128, k.dkdvSmem, p)
	name := "attn_bwd_gqa_sum_bf16"
	if g.Q.T.DType == tensor.F16 {
		name = "attn_bwd_gqa_sum_f16"
	}
	o.attnLaunch(k.mod, name, cdiv(g.B*g.Hkv*g.Tk*g.D/2, 256), 1, 1, 256, 0, p)
}
