//go:build cuda

package cuda

/*
#include <cuda.h>

// tc_f32_launch launches a kernel whose only parameter is the struct at params (copied by the driver).
static int tc_f32_launch(void *fn, unsigned gx, unsigned block, void *stream, void *params) {
	void *args[1] = {params};
	return (int)cuLaunchKernel((CUfunction)fn, gx, 1, 1, block, 1, 1, 0, (CUstream)stream, args, NULL);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// The FP32 path of fused attention: F32 operands have no tensor-core kernel, and the general kernels
// (attn_*_ref, one warp per query row) run at 0.2–0.36 TFLOP/s. Instead the products run as FP32 cuBLASLt
// GEMMs (CUBLAS_COMPUTE_32F, TF32 only under SetAllowTF32, as every F32 Gemm) over chunks of (batch, head)
// pairs, with the pairs' score rows in a scratch buffer of at most attnF32Scratch bytes whatever B, H and T
// are, and kernels/attention_f32.cu does the row work between the products:
//
//	forward, per chunk:   S = Scale·Q·Kᵀ (GEMM) → attn_f32_softmax (mask, causal, segments, LSE, P' with
//	                      dropout, written over S) → O = P'·V (GEMM)
//	backward, per chunk:  S = Scale·Q·Kᵀ, dP' = dO·Vᵀ (GEMMs) → attn_f32_dsoftmax (P from the LSE, Δ in FP32,
//	                      dS and P') → dV (+)= P'ᵀ·dO, dQ = Scale·dS·K, dK (+)= Scale·dSᵀ·Q (GEMMs)
//
// With one query head per key/value head the jobs are (batch member, head) pairs (f32Pairs): strided
// batches when the layout makes pairs affine, else pointer arrays filled by attn_f32_ptrs into
// cublasSgemmBatched, so a chunk covers as many pairs as the scratch holds.
//
// This is the two-pass algorithm restricted to what fits the scratch; the numerics are the general kernels'
// (docs/ATTENTION.md: S and the softmax in FP32, nothing rounded on F32 operands, Δ_i = Σ_j P_ij·dP_ij). A
// chunk is a run of jobs along one axis — batch members (one query head each), or key/value heads (one query
// head of each group) — for which every operand's address is affine in the job index, so one strided-batched
// GEMM covers it: this holds for any AttnOperand strides. A query head's rows are split into blocks when its
// scores do not fit the scratch, and with causal attention into blocks whose products stop at the last
// visible key. dK and dV of a key/value head sum its query heads' and row blocks' products in a fixed order
// (beta = 1 after the first), so results are bit-identical from run to run.
//
// Not covered (the general kernels run instead, with the same results up to FP32 rounding): operands whose
// position stride is below D (rows that overlap; cuBLASLt's leading dimension must cover a row), Tk = 0,
// TUNE_ATTN_F32=ref, and a layout cuBLASLt has no algorithm for (the call then reruns on the general kernels,
// which overwrite every output).

// attnF32Scratch is the byte bound of the FP32 path's score scratch per call (TUNE_ATTN_F32_SCRATCH in MiB,
// 256 by default: on the H200 (call d1) BERT-base's (64, 12, 512, 64) backward took 4966 µs with it, 5553 with
// 64 MiB and 8326 with 16, the forward 2430, 2429 and 3102 µs; tests and the microbenchmark override it through
// export_f32_test.go). The forward holds S for the chunk's jobs, the backward S and dP'. The block comes from the caching allocator, so after the first call it is a cache hit; it
// counts in a step's peak (tune bench's peak includes op scratch), not in the memory plan.
var attnF32Scratch = func() int {
	if v, err := strconv.Atoi(os.Getenv("TUNE_ATTN_F32_SCRATCH")); err == nil && v > 0 {
		return v << 20
	}
	return 256 << 20
}()

// attnF32Ref, set by TUNE_ATTN_F32=ref (or a test through export_f32_test.go), sends F32 attention to the
// general kernels.
var attnF32Ref = os.Getenv("TUNE_ATTN_F32") == "ref"

// attnF32NoRows, set by the microbenchmark through export_f32_test.go, skips the row kernels (wrong results):
// the time of the products alone.
var attnF32NoRows bool

// attnF32CausalBlock is the largest row block of a causal call (its products stop at the block's last visible
// key, so smaller blocks skip more of the masked half; larger ones give longer GEMMs).
var attnF32CausalBlock = 512

// f32Rows mirrors struct F32Rows of kernels/attention_f32.cu field for field.
type f32Rows struct {
	s, dp, lse, mask, seg, zero uint64
	zjob, zrow                  int64
	ld, n, rows, njobs          int64
	b0, db, h0, dh, i0          int64
	Hq, Tq, Tk, D, causal       int64
	p, dscale                   float32
	seed, offset                uint64
	bits                        uint64 // KeepBits (f32KeepBits), or 0
	bitsw                       int64  // its I32 words per LSE row
}

// f32Chunks is the chunking of one FP32 attention call.
type f32Chunks struct {
	axisB bool        // jobs are batch members (else key/value heads)
	pairs f32PairMode // f32PairsStrided or f32PairsPtrs: jobs are (batch member, head) pairs b·Hq + h
	jobs  int         // jobs along the axis: B, Hkv, or B·Hq with pairs
	per   int         // jobs per chunk
	rb    int         // query rows per block
	ld    int         // scratch row length (Tk rounded up to 4)
}

// f32Usable reports whether the GEMM path covers the call: every operand's rows at least D apart and Tk ≥ 1.
func f32Usable(g opcheck.Attention, ops ...opcheck.AttnOperand) bool {
	if attnF32Ref || g.Tk == 0 || g.Tq == 0 || g.B == 0 {
		return false
	}
	for _, x := range ops {
		if x.T != nil && x.ST < g.D {
			return false
		}
	}
	return true
}

// f32Plan chunks a call whose jobs need, in FP32 elements, rowBufs score buffers of rb × ld, rowCols more per
// query row and keyCols per key (the 3xTF32 operand copies): the SGEMM path's forward holds S (1, 0, 0), its
// backward S and dP' (2, 0, 0). Blocks keep at least 16 rows (or Tq), so rows longer than attnF32Scratch/64
// bytes take more scratch than the bound.
// With pairs (f32Pairs) the jobs are every (batch member, head) pair, so one GEMM covers as many of them as
// the scratch holds instead of one head's batch members.
func f32Plan(g opcheck.Attention, pairs f32PairMode, rowBufs, rowCols, keyCols int) f32Chunks {
	c := f32Chunks{axisB: g.B >= g.Hkv, jobs: g.B, ld: (g.Tk + 3) &^ 3}
	if pairs != f32PairsNone {
		c.pairs, c.jobs = pairs, g.B*g.Hq
	} else if !c.axisB {
		c.jobs = g.Hkv
	}
	budget := attnF32Scratch / 4 // elements
	perRow := c.ld*rowBufs + rowCols
	maxRows := max(16, (budget-keyCols*g.Tk)/perRow) // at least 16 rows a block: the bound yields for very long rows
	c.rb = min(g.Tq, maxRows)
	if g.Causal && c.rb > attnF32CausalBlock {
		c.rb = attnF32CausalBlock
	}
	if c.rb < g.Tq && c.rb >= 64 {
		c.rb &^= 63
	}
	c.per = max(1, min(c.jobs, budget/(c.rb*perRow+keyCols*g.Tk)))
	c.per = cdiv(c.jobs, cdiv(c.jobs, c.per)) // as many chunks, evened out (64 jobs by 20: 16 each, not 20, 20, 20, 4)
	return c
}

// backwardBlocks returns the first rows of the row blocks in the backward's order, last block first: with causal
// attention the last block sees every key, so the first product into dK and dV (beta 0) covers all of them.
func (c f32Chunks) backwardBlocks(g opcheck.Attention) []int {
	var starts []int
	for r0 := 0; r0 < g.Tq; r0 += c.rb {
		starts = append([]int{r0}, starts...)
	}
	return starts
}

// f32Job is one chunk's geometry: its first job's batch member b, query head h and KV head hk, and the job
// index step of each.
type f32Job struct {
	b, h, hk    int
	db, dh, dhk int
}

// q and kv return the element offset in x of position t of job c of the chunk: q for the query-side operands
// (query head h + c·dh), kv for the key/value side (KV head hk + c·dhk).
func (j f32Job) q(x opcheck.AttnOperand, c, t int) int {
	return (j.b+c*j.db)*x.SB + (j.h+c*j.dh)*x.SH + t*x.ST
}
func (j f32Job) kv(x opcheck.AttnOperand, c, t int) int {
	return (j.b+c*j.db)*x.SB + (j.hk+c*j.dhk)*x.SH + t*x.ST
}

// qStride and kvStride are the element distances between consecutive jobs of x.
func (j f32Job) qStride(x opcheck.AttnOperand) int  { return j.db*x.SB + j.dh*x.SH }
func (j f32Job) kvStride(x opcheck.AttnOperand) int { return j.db*x.SB + j.dhk*x.SH }

// f32Fixed lists the calls' fixed parts in processing order: for jobs along B, every query head h (its KV head
// h/G); along KV heads, every batch member and head-in-group g. Consecutive entries of one KV head are its
// query heads in order, so dK and dV sum them in a fixed order.
func f32Fixed(g opcheck.Attention, c f32Chunks) []f32Job {
	if c.pairs != f32PairsNone { // job c is pair c (f32Pairs): the row kernels split it into b and h
		return []f32Job{{dh: 1, dhk: 1}}
	}
	G := g.Group()
	var out []f32Job
	if c.axisB {
		for h := 0; h < g.Hq; h++ {
			out = append(out, f32Job{h: h, hk: h / G, db: 1})
		}
		return out
	}
	for b := 0; b < g.B; b++ {
		for k := 0; k < G; k++ {
			out = append(out, f32Job{b: b, h: k, dh: G, dhk: 1})
		}
	}
	return out
}

// f32PairMode is how a call's (batch member, head) pairs become one job axis (f32Pairs).
type f32PairMode int

const (
	f32PairsNone    f32PairMode = iota // jobs along one axis: batch members, or key/value heads
	f32PairsStrided                    // pair p = b·Hq + h at element p·SH of every operand: strided batches
	f32PairsPtrs                       // pointer arrays (attn_f32_ptrs) into cublasSgemmBatched
)

// f32Pairs says whether and how a call's (batch member, head) pairs can be one job axis, so that one GEMM
// covers as many pairs as the scratch holds instead of one head's batch members (BERT-base at 32×128: 384
// pairs, against twelve GEMMs over 32). It needs one query head per key/value head (dK and dV of a pair are
// its own). When in every operand the batch stride is Hq head strides (the dense (B, H, T, D) layout) pair
// p = b·Hq + h starts at element p·SH and strided batches reach it; otherwise — the attention layers' rows
// layout (transformer.RowHeads: heads side by side in each token's row) — the products take pointer arrays,
// which needs the legacy cuBLAS (true FP32 only, as useBlas) and 16-byte aligned operands.
func (o *op) f32Pairs(g opcheck.Attention, ops ...opcheck.AttnOperand) f32PairMode {
	return f32PairKind(g, func() bool {
		if gemmF32Lt || o.b.allowTF32 {
			return false
		}
		_, err := o.cuBLAS()
		return err == nil
	}, ops...)
}

// f32PairKind is f32Pairs' rule; blas reports whether pointer-array products can run (asked only when needed).
// Pointer arrays also leave out causal calls with Tq > Tk, whose first row blocks see no key and are zeroed by
// the row kernels through a job stride.
func f32PairKind(g opcheck.Attention, blas func() bool, ops ...opcheck.AttnOperand) f32PairMode {
	if g.Hq != g.Hkv || f32NoMerge {
		return f32PairsNone
	}
	dense, aligned := true, true
	for _, x := range ops {
		dense = dense && x.SB == g.Hq*x.SH
		aligned = aligned && addr(x.T)%16 == 0 && x.SB%4 == 0 && x.SH%4 == 0 && x.ST%4 == 0
	}
	switch {
	case dense:
		return f32PairsStrided
	case aligned && !(g.Causal && g.Tq > g.Tk) && blas():
		return f32PairsPtrs
	}
	return f32PairsNone
}

// f32NoMerge, set by TUNE_ATTN_F32_MERGE=0 (or a test through export_f32_test.go), keeps one job axis (batch
// members or key/value heads) even where f32Pairs would merge: the chunking before the merged axis, for A/B runs.
var f32NoMerge = os.Getenv("TUNE_ATTN_F32_MERGE") == "0"

// visibleKeys returns how many keys (from key 0) a causal row block ending before query r1 can see.
func visibleKeys(g opcheck.Attention, r1 int) int {
	if !g.Causal {
		return g.Tk
	}
	return max(0, min(g.Tk, r1+g.Tk-g.Tq))
}

// f32Launch queues kernel name of attention_f32.cu over rows warps (eight per block) with argument block a.
func (o *op) f32Launch(name string, rows int, a *f32Rows) {
	if rows == 0 || attnF32NoRows {
		return
	}
	o.f32LaunchBlob(name, cdiv(rows, 8), unsafe.Slice((*byte)(unsafe.Pointer(a)), unsafe.Sizeof(*a)))
}

// f32LaunchBlob queues kernel name of attention_f32.cu over gx blocks of 256 threads with the argument block
// blob (one struct, copied by the driver).
func (o *op) f32LaunchBlob(name string, gx int, blob []byte) {
	if o.err != nil || gx == 0 {
		return
	}
	f, err := o.b.function("attention_f32.cu", name)
	if o.fail(err) != nil {
		return
	}
	fn := *(*unsafe.Pointer)(unsafe.Pointer(&f))
	st := *(*unsafe.Pointer)(unsafe.Pointer(&o.b.stream))
	if o.b.graph != nil { // recorded (graph.go): the parameters are copied, a may change after the op
		blob = append([]byte(nil), blob...)
	}
	run := func() error {
		if rc := C.tc_f32_launch(fn, C.uint(gx), 256, st, unsafe.Pointer(&blob[0])); rc != 0 {
			return driverErrCode("cuLaunchKernel", int(rc), fmt.Sprintf("%s (grid %d, block 256)", name, gx))
		}
		return nil
	}
	if o.b.graph == nil {
		o.fail(run())
		return
	}
	k := &kernelLaunch{name: name, fn: fn, gx: gx, gy: 1, gz: 1, bx: 256, by: 1, blob: blob}
	o.fail(o.issue(func() []byte { return kernelKey(fn, gx, 1, 1, 256, 1, 0) }, k, nil, run))
}

// f32Gemm queues one batched FP32 GEMM of chunking c: strided, or through pointer arrays when c.pairs is f32PairsPtrs. It
// reports false when cuBLASLt has no algorithm for the layout (nothing queued, o not failed) so that the
// caller can fall back.
func (o *op) f32Gemm(c f32Chunks, mm matmul) bool {
	if o.err != nil {
		return true
	}
	mm.ab, mm.cdt = tensor.F32, tensor.F32
	if c.pairs == f32PairsPtrs { // mm.a, mm.b, mm.c are pointer arrays (f32Args); f32Pairs checked that libcublas loads
		ok, err := o.blasMatmulPtrs(mm)
		if !ok {
			return false
		}
		o.fail(err)
		return true
	}
	if mm.batch == 1 {
		mm.sa, mm.sb, mm.sc = 0, 0, 0
	}
	if err := o.ltMatmul(mm); err != nil {
		if errNoAlgorithm(err) {
			return false
		}
		o.fail(err)
	}
	return true
}

// f32KeepBits reports whether the row kernels keep a call's dropout draws in its KeepBits (the forward
// stores them, the backward reads them instead of drawing again): dropout, Tk ≤ 512 (every row block of both
// passes then runs the register-cached kernels, which store and read the bits alike) and a 4-byte aligned
// buffer (opcheck checks its length, tensor.AttentionKeepBitsLen).
func f32KeepBits(g opcheck.Attention) bool {
	return g.DropoutP > 0 && g.KeepBits != nil && g.Tk <= 512 && addr(g.KeepBits)%4 == 0
}

// f32KeepMark is what an FP32-path forward stored in a KeepBits buffer: the draws of (Seed, Offset) at
// dropout probability p over its rows.
type f32KeepMark struct {
	seed, offset  uint64
	p             float32
	b, hq, tq, tk int
}

func keepMarkOf(g opcheck.Attention) f32KeepMark {
	return f32KeepMark{g.Seed, g.Offset, g.DropoutP, g.B, g.Hq, g.Tq, g.Tk}
}

// f32RowsOf fills the row kernels' arguments common to both passes.
func f32RowsOf(g opcheck.Attention, c f32Chunks) f32Rows {
	r := f32Rows{lse: addr(g.LSE), mask: addr(g.Mask), seg: addr(g.Segments), ld: int64(c.ld),
		Hq: int64(g.Hq), Tq: int64(g.Tq), Tk: int64(g.Tk), D: int64(g.D), p: g.DropoutP, dscale: 1, seed: g.Seed, offset: g.Offset}
	if g.DropoutP > 0 {
		r.dscale = 1 / (1 - g.DropoutP) // float32, as the Dropout op
	}
	if g.Causal {
		r.causal = 1
	}
	return r
}

// rowKernel picks the register-cached variant of a row kernel when a block's rows have at most 512 columns
// of keys (n).
func rowKernel(base string, n int) string {
	if n <= 512 {
		return base + "_c4"
	}
	return base + "_c0"
}

// f32Elem returns the device address of element e (in elements) of operand x's storage.
func f32Elem(x opcheck.AttnOperand, e int) uint64 { return addr(x.T) + 4*uint64(e) }

// f32Arg is one operand of a chunk's strided-batched GEMM: the address of its first job's matrix and the
// element distance between jobs; or, on a chunk of pairs through pointer arrays (f32PairsPtrs), the address
// of an array of the jobs' matrix addresses (s unused).
type f32Arg struct {
	a uint64
	s int
}

// f32Src names one operand of a chunk's products for f32Args: position t0 of attention operand x (on the
// query side, or with kv the key/value side), or, when x.T is nil, score block rows·ld of the scratch at base.
type f32Src struct {
	x    opcheck.AttnOperand
	t0   int
	kv   bool
	base uint64
}

// f32Ptrs mirrors struct F32Ptrs of kernels/attention_f32.cu.
type f32Ptrs struct {
	out             uint64
	n, p0, hq, narr int64
	base            [f32PtrsMax]uint64
	sb, sh, off     [f32PtrsMax]int64
}

// f32PtrsMax is F32_PTRS_MAX of kernels/attention_f32.cu: the most operands one attn_f32_ptrs call covers.
const f32PtrsMax = 10

// f32Args returns the GEMM operands of the nj jobs of chunk j from job c0 (block of rows rows): strided
// (every operand affine in the job), or, on a chunk of pairs through pointer arrays, the arrays attn_f32_ptrs
// writes into ptrs (f32PtrsMax·per addresses) for them.
func (o *op) f32Args(g opcheck.Attention, c f32Chunks, j f32Job, c0, nj, rows int, ptrs uint64, srcs ...f32Src) []f32Arg {
	out := make([]f32Arg, len(srcs))
	blk := rows * c.ld
	if c.pairs != f32PairsPtrs {
		for k, x := range srcs {
			switch {
			case x.x.T == nil:
				out[k] = f32Arg{x.base, blk}
			case x.kv:
				out[k] = f32Arg{f32Elem(x.x, j.kv(x.x, c0, x.t0)), j.kvStride(x.x)}
			default:
				out[k] = f32Arg{f32Elem(x.x, j.q(x.x, c0, x.t0)), j.qStride(x.x)}
			}
		}
		return out
	}
	a := f32Ptrs{out: ptrs, n: int64(nj), p0: int64(c0), hq: int64(g.Hq), narr: int64(len(srcs))}
	for k, x := range srcs {
		if x.x.T == nil { // block i of the scratch: base + 4·(p − p0)·blk
			a.base[k], a.sb[k], a.sh[k], a.off[k] = x.base, int64(g.Hq*blk), int64(blk), -int64(c0*blk)
		} else {
			a.base[k], a.sb[k], a.sh[k], a.off[k] = addr(x.x.T), int64(x.x.SB), int64(x.x.SH), int64(x.t0*x.x.ST)
		}
		out[k] = f32Arg{a: ptrs + uint64(8*k*nj)}
	}
	blob := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	o.f32LaunchBlob("attn_f32_ptrs", cdiv(len(srcs)*nj, 256), blob)
	return out
}

// f32Scores queues the scores-shaped product dst = alpha·X·Yᵀ of a chunk (S = Scale·Q·Kᵀ or dP' = dO·Vᵀ), one
// FP32 SGEMM: X the rows rows of query-side operand x, Y the n keys of key-side operand y, dst nj blocks of
// rows × n (row length c.ld) in the scratch. It reports false when cuBLASLt has no algorithm.
func (o *op) f32Scores(g opcheck.Attention, c f32Chunks, x opcheck.AttnOperand, xa f32Arg, y opcheck.AttnOperand, ya, dst f32Arg,
	rows, n, nj int, alpha float32) bool {
	return o.f32Gemm(c, matmul{transB: true, m: rows, n: n, k: g.D, batch: nj, a: xa.a, lda: x.ST, sa: xa.s,
		b: ya.a, ldb: y.ST, sb: ya.s, c: dst.a, ldc: c.ld, sc: dst.s, alpha: alpha})
}

// attnF32Forward runs Attention on the FP32 GEMM path when it covers the call; false means the caller runs
// the general kernel instead (nothing is left half done that it would not overwrite).
func (o *op) attnF32Forward(g opcheck.Attention) bool {
	if g.Q.T.DType != tensor.F32 {
		return false
	}
	// A backward reads the bits only after a forward on this path stored them all (marked at the end): a
	// forward that falls back to the general kernels, which do not store them, leaves no mark.
	keep := f32KeepBits(g)
	if g.KeepBits != nil {
		delete(o.b.f32Keep, addr(g.KeepBits))
	}
	if !f32Usable(g, g.Q, g.K, g.V, g.O) {
		return false
	}
	c := f32Plan(g, o.f32Pairs(g, g.Q, g.K, g.V, g.O), 1, 0, 0)
	buf := o.scratch(4 * c.per * c.rb * c.ld)
	var ptrs cu.DevicePtr
	if c.pairs == f32PairsPtrs {
		ptrs = o.scratch(8 * 5 * c.per)
	}
	if o.failed() {
		return true
	}
	defer o.release(buf)
	if c.pairs == f32PairsPtrs {
		defer o.release(ptrs)
	}
	for _, j := range f32Fixed(g, c) {
		for r0 := 0; r0 < g.Tq; r0 += c.rb {
			rows := min(c.rb, g.Tq-r0)
			n := visibleKeys(g, r0+rows)
			for c0 := 0; c0 < c.jobs; c0 += c.per {
				nj := min(c.per, c.jobs-c0)
				a := f32RowsOf(g, c)
				a.seed, a.offset = o.b.philoxArgs(a.p, a.seed, a.offset)
				if keep {
					a.bits, a.bitsw = addr(g.KeepBits), int64(tensor.AttentionKeepBitsLen(1, 1, 1, g.Tk))
				}
				a.s, a.n, a.rows, a.njobs = uint64(buf), int64(n), int64(rows), int64(nj)
				a.b0, a.db, a.h0, a.dh, a.i0 = int64(j.b+c0*j.db), int64(j.db), int64(j.h+c0*j.dh), int64(j.dh), int64(r0)
				if n == 0 { // no row of the block sees a key: LSE = −Inf, O = 0
					a.zero, a.zjob, a.zrow = f32Elem(g.O, j.q(g.O, c0, r0)), int64(j.qStride(g.O)), int64(g.O.ST)
					o.f32Launch(rowKernel("attn_f32_softmax", n), nj*rows, &a)
					continue
				}
				x := o.f32Args(g, c, j, c0, nj, rows, uint64(ptrs), f32Src{x: g.Q, t0: r0}, f32Src{x: g.K, kv: true},
					f32Src{x: g.V, kv: true}, f32Src{x: g.O, t0: r0}, f32Src{base: uint64(buf)})
				q, k, v, out, sc := x[0], x[1], x[2], x[3], x[4]
				if !o.f32Scores(g, c, g.Q, q, g.K, k, sc, rows, n, nj, g.Scale) {
					return false
				}
				o.f32Launch(rowKernel("attn_f32_softmax", n), nj*rows, &a)
				if !o.f32Gemm(c, matmul{m: rows, n: g.D, k: n, batch: nj, a: sc.a, lda: c.ld, sa: sc.s,
					b: v.a, ldb: g.V.ST, sb: v.s, c: out.a, ldc: g.O.ST, sc: out.s, alpha: 1}) {
					return false
				}
				if o.failed() {
					return true
				}
			}
		}
	}
	if keep {
		if o.b.f32Keep == nil {
			o.b.f32Keep = map[uint64]f32KeepMark{}
		}
		o.b.f32Keep[addr(g.KeepBits)] = keepMarkOf(g)
	}
	return true
}

// attnF32Backward runs AttentionBackward on the FP32 GEMM path when it covers the call; false means the caller
// runs the general kernels instead (they overwrite every output).
func (o *op) attnF32Backward(g opcheck.Attention) bool {
	if g.Q.T.DType != tensor.F32 || !f32Usable(g, g.Q, g.K, g.V, g.O, g.DO, g.DQ, g.DK, g.DV) {
		return false
	}
	keep := false
	if f32KeepBits(g) {
		m, ok := o.b.f32Keep[addr(g.KeepBits)]
		keep = ok && m == keepMarkOf(g)
	}
	c := f32Plan(g, o.f32Pairs(g, g.Q, g.K, g.V, g.O, g.DO, g.DQ, g.DK, g.DV), 2, 0, 0)
	blk := c.per * c.rb * c.ld
	buf := o.scratch(8 * blk)
	var ptrs cu.DevicePtr
	if c.pairs == f32PairsPtrs {
		ptrs = o.scratch(8 * 9 * c.per)
	}
	if o.failed() {
		return true
	}
	defer o.release(buf)
	if c.pairs == f32PairsPtrs {
		defer o.release(ptrs)
	}
	sBuf, dpBuf := uint64(buf), uint64(buf)+4*uint64(blk)
	G := g.Group()
	starts := c.backwardBlocks(g)
	for _, j := range f32Fixed(g, c) {
		gi := j.h % G // the query head's place in its group (the same for every job of the chunk)
		for bi, r0 := range starts {
			rows := min(c.rb, g.Tq-r0)
			n := visibleKeys(g, r0+rows)
			var beta float32 = 1
			if gi == 0 && bi == 0 {
				beta = 0
			}
			for c0 := 0; c0 < c.jobs; c0 += c.per {
				nj := min(c.per, c.jobs-c0)
				a := f32RowsOf(g, c)
				a.seed, a.offset = o.b.philoxArgs(a.p, a.seed, a.offset)
				if keep {
					a.bits, a.bitsw = addr(g.KeepBits), int64(tensor.AttentionKeepBitsLen(1, 1, 1, g.Tk))
				}
				a.s, a.dp, a.n, a.rows, a.njobs = sBuf, dpBuf, int64(n), int64(rows), int64(nj)
				a.b0, a.db, a.h0, a.dh, a.i0 = int64(j.b+c0*j.db), int64(j.db), int64(j.h+c0*j.dh), int64(j.dh), int64(r0)
				if n == 0 { // no row of the block sees a key: dQ = 0, nothing for dK and dV
					a.zero, a.zjob, a.zrow = f32Elem(g.DQ, j.q(g.DQ, c0, r0)), int64(j.qStride(g.DQ)), int64(g.DQ.ST)
					o.f32Launch(rowKernel("attn_f32_dsoftmax", n), nj*rows, &a)
					continue
				}
				x := o.f32Args(g, c, j, c0, nj, rows, uint64(ptrs), f32Src{x: g.Q, t0: r0}, f32Src{x: g.K, kv: true},
					f32Src{x: g.V, kv: true}, f32Src{x: g.DO, t0: r0}, f32Src{x: g.DQ, t0: r0}, f32Src{x: g.DK, kv: true},
					f32Src{x: g.DV, kv: true}, f32Src{base: sBuf}, f32Src{base: dpBuf})
				q, k, v, do, dq, dk, dv, sc, dp := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8]
				ok := o.f32Scores(g, c, g.Q, q, g.K, k, sc, rows, n, nj, g.Scale) &&
					o.f32Scores(g, c, g.DO, do, g.V, v, dp, rows, n, nj, 1)
				if !ok {
					return false
				}
				o.f32Launch(rowKernel("attn_f32_dsoftmax", n), nj*rows, &a)
				ok = o.f32Gemm(c, matmul{transA: true, m: n, n: g.D, k: rows, batch: nj, a: sc.a, lda: c.ld, sa: sc.s,
					b: do.a, ldb: g.DO.ST, sb: do.s, c: dv.a, ldc: g.DV.ST, sc: dv.s, alpha: 1, beta: beta}) &&
					o.f32Gemm(c, matmul{m: rows, n: g.D, k: n, batch: nj, a: dp.a, lda: c.ld, sa: dp.s,
						b: k.a, ldb: g.K.ST, sb: k.s, c: dq.a, ldc: g.DQ.ST, sc: dq.s, alpha: g.Scale}) &&
					o.f32Gemm(c, matmul{transA: true, m: n, n: g.D, k: rows, batch: nj, a: dp.a, lda: c.ld, sa: dp.s,
						b: q.a, ldb: g.Q.ST, sb: q.s, c: dk.a, ldc: g.DK.ST, sc: dk.s, alpha: g.Scale, beta: beta})
				if !ok {
					return false
				}
				if o.failed() {
					return true
				}
			}
		}
	}
	return true
}
