// attention.cu: fused scaled-dot-product attention (tensor.Backend.Attention and AttentionBackward), after
// FlashAttention-2 (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
// 2023): the (Tq, Tk) scores never leave registers; the forward keeps a running row max and sum (online
// softmax) and writes O and the FP32 log-sum-exp; the backward recomputes P from the LSE.
//
// Variants (every kernel takes one AttnParams, mirrored by attnParams in cuda/attention.go):
//
//   attn_fwd_{bf16,f16}_d{64,128}    tensor cores (mma.sync m16n8k16, FP32 accumulate, sm_80+). D = 64: 128
//                                    queries per block (4 warps × 32 rows: every K/V fragment read from shared
//                                    memory feeds two MMAs); D = 128: 64 queries (4 warps × 16 rows; two row
//                                    tiles need more than 255 registers). 64 keys per step. Q, K and V tiles move with cp.async
//                                    into XOR-swizzled shared memory (16-byte chunk c of row r lives at chunk
//                                    c ^ (r & 7), so ldmatrix's eight row addresses hit eight bank groups);
//                                    the V load of step n overlaps Q·Kᵀ of step n and the K load of step n+1
//                                    overlaps the softmax and P·V of step n. D = 64 keeps Q's fragments in
//                                    registers. Causal blocks past the diagonal are skipped, masks are
//                                    evaluated only in blocks that need them (tails, diagonal, segments).
//   attn_bwd_dkdv_{bf16,f16}_d{64,128}  one block per 64 keys of one KV head: 4 warps × 16 keys own dK and
//                                    dV (FP32 registers) while Q, dO, LSE and Δ tiles of 64 queries stream
//                                    through a cp.async double buffer, over every query block and every query
//                                    head of the group in a fixed order (GQA sums are deterministic).
//   attn_bwd_dq_{bf16,f16}_d{64,128}    runs first: one block per 64 queries, K/V tiles streaming through a
//                                    double buffer in one sweep (dq1_tc): dQ from FlashAttention-2's Δ̃ = dO·O
//                                    over the half O, corrected by the exact Δ_i = Σ_j P_ij·dP_ij summed in FP32
//                                    in the same sweep (docs/ATTENTION.md: not rowsum(dO∘O) over a half O),
//                                    which it stores for the dK/dV kernel. With dropout it also stores the
//                                    keep bits it draws, which the dK/dV kernel loads instead of drawing.
//                                    dQ has its own pass instead of FlashAttention-2's atomicAdd, so results
//                                    are bit-identical. attn_bwd_dq2_* is the earlier two-sweep kernel (dq_tc).
//   attn_fwd_ref, attn_bwd_dq_ref (also writes Δ), attn_bwd_dkdv_ref   the general path: one warp per query (or key) row,
//                                    FP32 with expf/logf, P' and dS rounded where tensor/cpu rounds them (P
//                                    normalised first), any float dtype, any strides, D ≤ 256.
//                                    Used for F32, for head sizes the tensor-core kernels do not cover and
//                                    for operands not aligned to 16 bytes; slow but exact to the contract.
//
// Numerics (docs/ATTENTION.md): S = Q·Kᵀ·scale + mask and the softmax statistics are FP32 in registers; P is
// rounded to the half dtype only as the A operand of P·V (forward) and of dV = P'ᵀ·dO, dS only as the A
// operand of dQ = dS·K and dK = dSᵀ·Q; O, dQ, dK, dV are rounded once on store (common.cuh's exact RNE).
// Without a mask and with scale > 0 the exponent is computed as FlashAttention does,
// exp2(s·scale·log2 e − m), one FMA per score; with a mask the natural-log domain is kept
// (exp2((s·scale + mask − m)·log2 e)) so a finfo.min mask cannot overflow. A row with no visible key gives
// O = 0 and LSE = −Inf. Dropout keeps element (b, h, i, j) exactly when the Dropout op keeps element
// n = ((b·Hq + h)·Tq + i)·Tk + j (tensor.PhiloxKeep: word n%4 of the Philox block at counter offset + n/4).
#include "common.cuh"

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
#define POS_INF __int_as_float(0x7f800000)

// AttnParams: every pointer is the operand's first element; strides are in elements ([0] batch, [1] head,
// [2] position; d is contiguous).
struct AttnParams {
	const void *q, *k, *v;
	void *o;
	float *lse;
	const float *mask;
	const int *seg;
	const void *dout;
	void *dq, *dk, *dv;
	float *delta;
	u16 *bits; // backward scratch: the dropout keep bits of every (query, key), bitsw words per query row
	i64 qs[3], ks[3], vs[3], os[3], dos[3], dqs[3], dks[3], dvs[3];
	i64 B, Hq, Hkv, Tq, Tk, D;
	float scale, p, dscale, pad0;
	u64 seed, offset;
	i64 causal, dtype, bitsw;
	i64 bitsready; // backward: p.bits already holds every keep bit (the forward drew them into AttentionArgs.KeepBits)
	float *dkp, *dvp; // backward v3 with GQA: FP32 partial dK, dV per query head, (B, Hq, Tk, D) contiguous
	i64 lpt;          // backward v3: (batch, head) pairs per block-order chunk (order_block)
};

// order_block maps a v3 kernel's linear block index to (row block rb, pair) for a grid of nrb row blocks of
// npair (batch, head) pairs: pairs in chunks of p.lpt; within a chunk the row block varies slowest, so every
// pair's row block 0 comes first, then row block 1, ... With the kernel's heaviest row block at rb = 0
// (causal) this schedules the longest blocks first (longest-processing-time order, as FlashAttention-3
// schedules causal blocks), while a chunk's K/V (or Q/dO) stay few enough to live in L2. p.lpt = 1 is the
// default kernels' order (row block fastest).
__device__ __forceinline__ void order_block(const AttnParams &p, int nrb, int npair, int &rb, int &pair) {
	const int C = (int)p.lpt, idx = blockIdx.x, chunk = idx / (C * nrb);
	const int cs = min(C, npair - chunk * C), w = idx - chunk * C * nrb;
	rb = w / cs;
	pair = chunk * C + w % cs;
}

// keep_thr is the integer form of PhiloxKeep's test: (w >> 8)·2⁻²⁴ ≥ p ⇔ (w >> 8) ≥ ceil(p·2²⁴) (both sides
// exact in FP32).
__device__ __forceinline__ u32 keep_thr(float p) { return (u32)ceilf(p * 16777216.0f); }

__device__ __forceinline__ u32 pick(uint4 v, int r) { return r == 0 ? v.x : r == 1 ? v.y : r == 2 ? v.z : v.w; }

// keep1 reports whether dense element n survives dropout.
__device__ __forceinline__ bool keep1(u64 n, const AttnParams &p, u32 thr) {
	u64 ctr = p.offset + (n >> 2);
	uint4 blk = philox4x32_10(make_uint4((u32)ctr, (u32)(ctr >> 32), 0u, 0u), make_uint2((u32)p.seed, (u32)(p.seed >> 32)));
	return (pick(blk, (int)(n & 3)) >> 8) >= thr;
}

// keep2 draws elements n and n+1 with one Philox block unless they straddle two.
__device__ __forceinline__ void keep2(u64 n, const AttnParams &p, u32 thr, bool &k0, bool &k1) {
	u64 ctr = p.offset + (n >> 2);
	uint2 key = make_uint2((u32)p.seed, (u32)(p.seed >> 32));
	uint4 blk = philox4x32_10(make_uint4((u32)ctr, (u32)(ctr >> 32), 0u, 0u), key);
	int r = (int)(n & 3);
	k0 = (pick(blk, r) >> 8) >= thr;
	if (r == 3) {
		u64 c2 = ctr + 1;
		uint4 b2 = philox4x32_10(make_uint4((u32)c2, (u32)(c2 >> 32), 0u, 0u), key);
		k1 = (b2.x >> 8) >= thr;
	} else {
		k1 = (pick(blk, r + 1) >> 8) >= thr;
	}
}

// ---------------------------------------------------------------------------------------------------------
// Tensor-core path (sm_80+).

__device__ __forceinline__ u32 smem_addr(const void *p) {
	u32 r;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
	return r;
}

__device__ __forceinline__ float ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

#if __CUDA_ARCH__ >= 800
#define TC_OK 1

// cp16 copies 16 bytes global → shared, or writes 16 zero bytes when !valid (src-size 0 reads nothing).
__device__ __forceinline__ void cp16(u32 dst, const void *src, bool valid) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ldsm4(u32 r[4], u32 a) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(a));
}
__device__ __forceinline__ void ldsm4t(u32 r[4], u32 a) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(a));
}

// mma: c (16×8 FP32) += a (16×16, row) · b (16×8, col), both BF16 or both FP16.
template <bool BF> __device__ __forceinline__ void mma(float c[4], const u32 a[4], u32 b0, u32 b1) {
	if constexpr (BF) {
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	} else {
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	}
}

// pack2 rounds (lo, hi) to two halves of one register (lo in the low 16 bits), for MMA operands only.
template <bool BF> __device__ __forceinline__ u32 pack2(float lo, float hi) {
	u32 r;
	if constexpr (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

// store2 rounds two outputs exactly as common.cuh's st (RNE, NaN rules of tensor.F32ToF16/F32ToBF16).
template <bool BF> __device__ __forceinline__ u32 store2(float lo, float hi) {
	if constexpr (BF) return (u32)f32_to_bf16(lo) | ((u32)f32_to_bf16(hi) << 16);
	else return (u32)f32_to_f16(lo) | ((u32)f32_to_f16(hi) << 16);
}
#endif

// swz is the offset (in halves) of 16-byte chunk ch of row r in a tile of rows of D halves.
template <int D> __device__ __forceinline__ int swz(int r, int ch) { return r * D + ((ch ^ (r & 7)) << 3); }

#ifdef TC_OK
// load_tile queues ROWS rows of D halves (row stride st elements) into s; rows ≥ nvalid are zero-filled.
template <int D, int ROWS> __device__ __forceinline__ void load_tile(u16 *s, const u16 *g, i64 st, int nvalid, int tid) {
	constexpr int CPR = D / 8, N = ROWS * CPR / 128;
#pragma unroll
	for (int it = 0; it < N; it++) {
		int c = tid + it * 128, r = c / CPR, ch = c % CPR;
		bool ok = r < nvalid;
		cp16(smem_addr(s + swz<D>(r, ch)), ok ? g + (i64)r * st + ch * 8 : g, ok);
	}
}

// store_rows copies a warp's ROWS staged rows (tile rows r0.., already rounded) to global rows r0+row0.. < nvalid.
template <int D, int ROWS> __device__ __forceinline__ void store_rows(u16 *g, i64 st, const u16 *s, int r0, int nvalid, int lane) {
	constexpr int CPR = D / 8;
#pragma unroll
	for (int it = 0; it < ROWS * CPR / 32; it++) {
		int c = lane + it * 32, r = r0 + c / CPR, ch = c % CPR;
		if (r < nvalid) *(uint4 *)(g + (i64)r * st + ch * 8) = *(const uint4 *)(s + swz<D>(r, ch));
	}
}

// forbidden reports whether query i may not see key j (tail, causal, segments); i < Tq is assumed or harmless.
__device__ __forceinline__ bool forbidden(const AttnParams &p, int b, int i, int j, int shift) {
	if (j >= p.Tk) return true;
	if (p.causal && j > i + shift) return true;
	if (p.seg && i < p.Tq && p.seg[(i64)b * p.Tq + i] != p.seg[(i64)b * p.Tk + j]) return true;
	return false;
}

// draw_bits fills bits (ROWS rows of COLS/16 words) with the dropout keep bits of a (query, key) tile: bit
// c % 16 of word r·COLS/16 + c/16 keeps dense element (hbase + r0 + r)·Tk + c0 + c. Needs Tk % 4 == 0 (and c0
// % 16 == 0), so each Philox block gives the words of four consecutive keys of one row: one block per four
// scores, shared by the block's threads through shared memory. With gb (the backward's p.bits) the words of
// rows r0 + r < Tq are also stored there, at word (hbase + r0 + r)·bitsw + c0/16 + c/16, for load_bits.
template <int ROWS, int COLS>
__device__ __forceinline__ void draw_bits(u16 *bits, const AttnParams &p, u64 hbase, int r0, int c0, u32 thr, int tid, u16 *gb = nullptr) {
	constexpr int W = COLS / 16;
	uint2 key = make_uint2((u32)p.seed, (u32)(p.seed >> 32));
#pragma unroll 1
	for (int w = tid; w < ROWS * W; w += 128) {
		u64 n = (hbase + (u64)(r0 + w / W)) * (u64)p.Tk + (u64)(c0 + (w % W) * 16);
		u64 ctr = p.offset + (n >> 2);
		u32 m = 0;
#pragma unroll
		for (int q = 0; q < 4; q++) {
			u64 c = ctr + q;
			uint4 blk = philox4x32_10(make_uint4((u32)c, (u32)(c >> 32), 0u, 0u), key);
			m |= ((u32)((blk.x >> 8) >= thr) | ((u32)((blk.y >> 8) >= thr) << 1) | ((u32)((blk.z >> 8) >= thr) << 2) |
			      ((u32)((blk.w >> 8) >= thr) << 3)) << (4 * q);
		}
		bits[w] = (u16)m;
		if (gb && r0 + w / W < p.Tq) gb[(hbase + (u64)(r0 + w / W)) * (u64)p.bitsw + (u64)(c0 / 16 + w % W)] = (u16)m;
	}
}

// cp4 copies 4 bytes global → shared, or writes 4 zero bytes when !valid.
__device__ __forceinline__ void cp4(u32 dst, const void *src, bool valid) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}

// cp8 copies 8 bytes global → shared, or writes 8 zero bytes when !valid.
__device__ __forceinline__ void cp8(u32 dst, const void *src, bool valid) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0));
}

// load_bits queues the keep bits draw_bits stored in p.bits for the 64-key tile at key c0 of ROWS query rows
// r0.. (rows ≥ Tq read as zeros) into bits, laid out as draw_bits<ROWS, 64> lays them out: one 8-byte chunk
// per row (bitsw is a multiple of 4 and c0 of 64, so every chunk is aligned).
template <int ROWS> __device__ __forceinline__ void load_bits(u16 *bits, const AttnParams &p, u64 hbase, int r0, int c0, int tid) {
#pragma unroll 1
	for (int r = tid; r < ROWS; r += 128) {
		bool ok = r0 + r < p.Tq;
		const u16 *src = p.bits + (ok ? (hbase + (u64)(r0 + r)) * (u64)p.bitsw + (u64)(c0 / 16) : 0);
		cp8(smem_addr(bits + r * 4), src, ok);
	}
}

// bit_at reads bit (r, c) of a draw_bits mask of COLS columns.
template <int COLS> __device__ __forceinline__ bool bit_at(const u16 *bits, int r, int c) {
	return (bits[r * (COLS / 16) + (c >> 4)] >> (c & 15)) & 1;
}
#endif

// fwd_tc: ST = 1 loads V during Q·Kᵀ and the next K during the softmax and P·V; ST = 2 double-buffers K and V
// (step n+1's tiles load during step n; two barriers per step); ST = 3 keeps a ring of three K/V stages, loading
// step n+2's after the one barrier of step n (the stage it overwrites was last read in step n−1).
template <int D, bool BF, int MT, int BC, bool QREG, int ST, int NHF = 1> __device__ __forceinline__ void fwd_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BR = 4 * 16 * MT, NT = BC / 8, ND = D / 8, KD = D / 16, KC = BC / 16;
	extern __shared__ __align__(128) u16 smem[];
	constexpr bool DB = ST >= 2;
	static_assert(NHF == 1 || DB, "a step in parts needs the whole K tile loaded (ST >= 2)");
	u16 *sQ = smem, *sK = sQ + BR * D, *sV = sK + ST * BC * D, *sB = sV + ST * BC * D;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int qb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *Q = (const u16 *)p.q + b * p.qs[0] + h * p.qs[1] + (i64)q0 * p.qs[2];
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	int nb = (Tk + BC - 1) / BC;
	if (p.causal) {
		int last = min(Tq - 1, q0 + BR - 1) + shift;
		nb = last < 0 ? 0 : min(nb, last / BC + 1);
	}
	const bool fast = p.mask == 0 && p.scale > 0.0f;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16 * MT;
	// Dropout keep bits through shared memory (two buffers of BR × BC bits: step n+1's are drawn during step n)
	// when Tk % 4 == 0; otherwise each thread draws its own pairs (keep2).
	const bool sbits = drop && (Tk & 3) == 0;
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;
	if (sbits && nb > 0) draw_bits<BR, BC>(sB, p, hbase, q0, 0, thr, tid, p.bits); // p.bits: KeepBits, stored for the backward

	load_tile<D, BR>(sQ, Q, p.qs[2], Tq - q0, tid);
	if (nb > 0) load_tile<D, BC>(sK, K, p.ks[2], Tk, tid);
	if (DB && nb > 0) load_tile<D, BC>(sV, V, p.vs[2], Tk, tid);
	cp_commit();
	if (ST == 3) { // stage 1 in its own group (committed even when empty: one group per step from here on)
		if (nb > 1) {
			load_tile<D, BC>(sK + BC * D, K + (i64)BC * p.ks[2], p.ks[2], Tk - BC, tid);
			load_tile<D, BC>(sV + BC * D, V + (i64)BC * p.vs[2], p.vs[2], Tk - BC, tid);
		}
		cp_commit();
	}

	float o[MT][ND][4], m[MT][2], l[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
#pragma unroll
		for (int dn = 0; dn < ND; dn++) o[mt][dn][0] = o[mt][dn][1] = o[mt][dn][2] = o[mt][dn][3] = 0.0f;
		m[mt][0] = m[mt][1] = NEG_INF;
		l[mt][0] = l[mt][1] = 0.0f;
	}
	u32 qf[QREG ? MT : 1][QREG ? KD : 1][4];

	for (int n = 0; n < nb; n++) {
		const int k0 = n * BC;
		const u16 *cK = sK, *cV = sV;
		if constexpr (ST == 3) {
			const int cur = n % 3, nxt = (n + 2) % 3;
			cK = sK + cur * BC * D, cV = sV + cur * BC * D;
			cp_wait<1>(); // step n's group is complete (the one after it may be pending)
			__syncthreads();
			if (n + 2 < nb) {
				load_tile<D, BC>(sK + nxt * BC * D, K + (i64)(k0 + 2 * BC) * p.ks[2], p.ks[2], Tk - k0 - 2 * BC, tid);
				load_tile<D, BC>(sV + nxt * BC * D, V + (i64)(k0 + 2 * BC) * p.vs[2], p.vs[2], Tk - k0 - 2 * BC, tid);
			}
			cp_commit();
		} else if constexpr (DB) {
			// Two stages: K and V of step n+1 load while step n computes.
			cK = sK + (n & 1) * BC * D, cV = sV + (n & 1) * BC * D;
			if (n + 1 < nb) {
				load_tile<D, BC>(sK + ((n + 1) & 1) * BC * D, K + (i64)(k0 + BC) * p.ks[2], p.ks[2], Tk - k0 - BC, tid);
				load_tile<D, BC>(sV + ((n + 1) & 1) * BC * D, V + (i64)(k0 + BC) * p.vs[2], p.vs[2], Tk - k0 - BC, tid);
				cp_commit();
				cp_wait<1>();
			} else {
				cp_wait<0>();
			}
			__syncthreads();
		} else {
			cp_wait<0>();
			__syncthreads();
			load_tile<D, BC>(sV, V + (i64)k0 * p.vs[2], p.vs[2], Tk - k0, tid);
			cp_commit();
		}
		if (sbits && n + 1 < nb) draw_bits<BR, BC>(sB + ((n + 1) & 1) * BR * (BC / 16), p, hbase, q0, k0 + BC, thr, tid, p.bits);
		if (QREG && n == 0) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int kk = 0; kk < KD; kk++) ldsm4(qf[mt][kk], smem_addr(sQ + swz<D>(wr + mt * 16 + (lane & 15), kk * 2 + (lane >> 4))));
		}
		// NHF parts of BC / NHF keys each (NHF = 2 halves the S registers; the online softmax then updates its max
		// and sum per part, so the sums are grouped differently than with one part).
#pragma unroll
		for (int hf = 0; hf < NHF; hf++) {
		constexpr int NTH = NT / NHF;
		const int n0 = hf * NTH;
		float s[MT][NTH][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int nt = 0; nt < NTH; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[MT][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				if constexpr (QREG) {
					a[mt][0] = qf[mt][kk][0], a[mt][1] = qf[mt][kk][1], a[mt][2] = qf[mt][kk][2], a[mt][3] = qf[mt][kk][3];
				} else {
					ldsm4(a[mt], smem_addr(sQ + swz<D>(wr + mt * 16 + (lane & 15), kk * 2 + (lane >> 4))));
				}
			}
#pragma unroll
			for (int nt = 0; nt < NTH; nt += 2) {
				u32 bb[4];
				ldsm4(bb, smem_addr(cK + swz<D>((n0 + nt) * 8 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1))));
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					mma<BF>(s[mt][nt], a[mt], bb[0], bb[1]);
					mma<BF>(s[mt][nt + 1], a[mt], bb[2], bb[3]);
				}
			}
		}
		if constexpr (!DB) {
			cp_wait<0>();
			__syncthreads();
			if (n + 1 < nb) {
				load_tile<D, BC>(sK, K + (i64)(k0 + BC) * p.ks[2], p.ks[2], Tk - k0 - BC, tid);
				cp_commit();
			}
		}
		// Scores → probabilities (online softmax), in place in s.
		if (!fast) {
#pragma unroll
			for (int nt = 0; nt < NTH; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int j = k0 + (n0 + nt) * 8 + tig * 2 + e;
					float mk = (p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						s[mt][nt][e] = fmaf(s[mt][nt][e], p.scale, mk);
						s[mt][nt][2 + e] = fmaf(s[mt][nt][2 + e], p.scale, mk);
					}
				}
		}
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + shift);
		if (need) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int i = q0 + wr + mt * 16 + g + hh * 8;
#pragma unroll
					for (int nt = 0; nt < NTH; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++)
							if (forbidden(p, b, i, k0 + (n0 + nt) * 8 + tig * 2 + e, shift)) s[mt][nt][hh * 2 + e] = NEG_INF;
				}
		}
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				float mx = NEG_INF;
#pragma unroll
				for (int nt = 0; nt < NTH; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][hh * 2], s[mt][nt][hh * 2 + 1]));
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
				float mo = m[mt][hh], mn = fmaxf(mo, fast ? mx * sl2 : mx);
				float mu = mn == NEG_INF ? 0.0f : mn;
				float alpha = fast ? ex2(mo - mu) : ex2((mo - mu) * LOG2E);
				m[mt][hh] = mn;
				float sum = 0.0f;
#pragma unroll
				for (int nt = 0; nt < NTH; nt++)
#pragma unroll
					for (int e = 0; e < 2; e++) {
						float x = s[mt][nt][hh * 2 + e];
						float pv = fast ? ex2(fmaf(x, sl2, -mu)) : ex2((x - mu) * LOG2E);
						sum += pv;
						s[mt][nt][hh * 2 + e] = pv;
					}
				l[mt][hh] = l[mt][hh] * alpha + sum;
#pragma unroll
				for (int dn = 0; dn < ND; dn++) o[mt][dn][hh * 2] *= alpha, o[mt][dn][hh * 2 + 1] *= alpha;
			}
		if (sbits) {
			const u16 *cb = sB + (n & 1) * BR * (BC / 16);
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++)
#pragma unroll
					for (int nt = 0; nt < NTH; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++)
							if (!bit_at<BC>(cb, wr + mt * 16 + g + hh * 8, (n0 + nt) * 8 + tig * 2 + e)) s[mt][nt][hh * 2 + e] = 0.0f;
		} else if (drop) {
			// Keep bits of this thread's scores (bit 2·x + e of word x / 32, x = (mt·2 + hh)·NTH + nt), drawn in
			// a rolled loop so that the Philox code appears once per word.
			constexpr int NX = MT * 2 * NTH, NWD = (NX + 31) / 32;
			u64 bits[NWD];
#pragma unroll
			for (int w = 0; w < NWD; w++) {
				u64 acc = 0;
#pragma unroll 1
				for (int y = 0; y < 32 && w * 32 + y < NX; y++) {
					int x = w * 32 + y, nt = x % NTH, rh = x / NTH, i = q0 + wr + (rh >> 1) * 16 + g + (rh & 1) * 8, j = k0 + (n0 + nt) * 8 + tig * 2;
					bool k0b, k1b;
					keep2(((u64)((i64)b * p.Hq + h) * (u64)Tq + (u64)i) * (u64)Tk + (u64)j, p, thr, k0b, k1b);
					acc |= ((u64)k0b | ((u64)k1b << 1)) << (2 * y);
				}
				bits[w] = acc;
			}
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++)
#pragma unroll
					for (int nt = 0; nt < NTH; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							int x = (mt * 2 + hh) * NTH + nt;
							if (!((bits[x / 32] >> (2 * (x % 32) + e)) & 1)) s[mt][nt][hh * 2 + e] = 0.0f;
						}
		}
		// O += P·V.
#pragma unroll
		for (int kl = 0; kl < KC / NHF; kl++) {
			const int kc = hf * (KC / NHF) + kl;
			u32 a[MT][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				a[mt][0] = pack2<BF>(s[mt][2 * kl][0], s[mt][2 * kl][1]);
				a[mt][1] = pack2<BF>(s[mt][2 * kl][2], s[mt][2 * kl][3]);
				a[mt][2] = pack2<BF>(s[mt][2 * kl + 1][0], s[mt][2 * kl + 1][1]);
				a[mt][3] = pack2<BF>(s[mt][2 * kl + 1][2], s[mt][2 * kl + 1][3]);
			}
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bb[4];
				ldsm4t(bb, smem_addr(cV + swz<D>(kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dn + (lane >> 4))));
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					mma<BF>(o[mt][dn], a[mt], bb[0], bb[1]);
					mma<BF>(o[mt][dn + 1], a[mt], bb[2], bb[3]);
				}
			}
		}
		}
		if constexpr (ST == 2) __syncthreads();
	}
	// Epilogue: normalise, stage the warp's rows in its own part of sQ, store O and LSE.
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			float lt = l[mt][hh];
			lt += __shfl_xor_sync(0xffffffffu, lt, 1);
			lt += __shfl_xor_sync(0xffffffffu, lt, 2);
			float inv = lt > 0.0f ? p.dscale / lt : 0.0f;
			int r = wr + mt * 16 + g + hh * 8, i = q0 + r;
			if (tig == 0 && i < Tq) {
				float lse = NEG_INF;
				if (lt > 0.0f) lse = fast ? (m[mt][hh] + log2f(lt)) * LN2 : m[mt][hh] + log2f(lt) * LN2;
				p.lse[((i64)b * p.Hq + h) * Tq + i] = lse;
			}
#pragma unroll
			for (int dn = 0; dn < ND; dn++)
				*(u32 *)(sQ + swz<D>(r, dn) + tig * 2) = store2<BF>(o[mt][dn][hh * 2] * inv, o[mt][dn][hh * 2 + 1] * inv);
		}
	__syncwarp();
	store_rows<D, 16 * MT>((u16 *)p.o + b * p.os[0] + h * p.os[1] + (i64)q0 * p.os[2], p.os[2], sQ, wr, Tq - q0, lane);
#endif
}

// dkdv_tc: with V3 the block comes from order_block; with SPLIT (V3 and GQA) one block per key block of one
// query head, storing FP32 partial dK (unscaled) and dV to p.dkp/p.dvp for gqa_sum instead of rounding. KVR
// (D = 64 only) keeps K's and V's fragments in registers for the whole block.
template <int D, bool BF, bool V3 = false, bool SPLIT = false, bool KVR = true, int NH = 1, int RS = 2>
__device__ __forceinline__ void dkdv_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BC = 64, BR = 64, NQ = BR / 8, ND = D / 8, KD = D / 16, KQ = BR / 16;
	constexpr bool KVREG = D == 64 && KVR;
	extern __shared__ __align__(128) u16 smem[];
	// RS stages of the query tiles: 2 a double buffer (two barriers per step), 3 a ring (one barrier per step:
	// step it+2's tiles load after step it's barrier into the stage step it−1 read).
	u16 *sK = smem, *sV = sK + BC * D, *sQ = sV + BC * D, *sO = sQ + RS * BR * D;
	float *sL = (float *)(sO + RS * BR * D), *sDl = sL + RS * BR;
	u16 *sB = (u16 *)(sDl + RS * BR); // RS BR × BC keep-bit masks (draw_bits), rows = queries
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, G = (int)(p.Hq / p.Hkv), shift = Tk - Tq;
	int kb = blockIdx.x, hk = blockIdx.y, b = blockIdx.z, g0 = 0;
	if constexpr (V3) {
		const int gs = SPLIT ? G : 1;
		int pair;
		order_block(p, (Tk + BC - 1) / BC, (int)(p.B * p.Hkv) * gs, kb, pair);
		g0 = pair % gs, hk = (pair / gs) % (int)p.Hkv, b = pair / gs / (int)p.Hkv;
	}
	const int j0 = kb * BC, ng = SPLIT ? 1 : G;
	const bool fast = p.mask == 0 && p.scale > 0.0f;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0;

	int qb0 = 0;
	if (p.causal) {
		int imin = j0 - shift;
		qb0 = imin > 0 ? imin / BR : 0;
	}
	const int nqb = (Tq + BR - 1) / BR, nit = nqb > qb0 ? nqb - qb0 : 0, total = ng * nit;

	float mk[2];
	int sj[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int j = j0 + wr + g + hh * 8;
		mk[hh] = (p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
		sj[hh] = (p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
	}

	auto prefetch = [&](int it, int buf) {
		int hq = hk * G + g0 + it / nit, i0 = (qb0 + it % nit) * BR;
		load_tile<D, BR>(sQ + buf * BR * D, (const u16 *)p.q + b * p.qs[0] + hq * p.qs[1] + (i64)i0 * p.qs[2], p.qs[2], Tq - i0, tid);
		load_tile<D, BR>(sO + buf * BR * D, (const u16 *)p.dout + b * p.dos[0] + hq * p.dos[1] + (i64)i0 * p.dos[2], p.dos[2], Tq - i0, tid);
		{
			// LSE (threads 0..63) and Δ (64..127) of the tile's rows by cp.async, so no thread waits on them
			// here; rows ≥ Tq read as 0, harmless since their dO and Δ are 0. The LSE is converted where used.
			static_assert(2 * BR == 128, "one LSE or Δ element per thread");
			const int r = tid & (BR - 1), i = i0 + r;
			const bool ok = i < Tq;
			const i64 row = ok ? ((i64)b * p.Hq + hq) * Tq + i : 0;
			cp4(smem_addr((tid < BR ? sL : sDl) + buf * BR + r), (tid < BR ? p.lse : p.delta) + row, ok);
		}
		if (sbits && p.bits) load_bits<BR>(sB + buf * BR * (BC / 16), p, (u64)((i64)b * p.Hq + hq) * (u64)Tq, i0, j0, tid);
		else if (sbits) draw_bits<BR, BC>(sB + buf * BR * (BC / 16), p, (u64)((i64)b * p.Hq + hq) * (u64)Tq, i0, j0, thr, tid);
	};

	load_tile<D, BC>(sK, (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1] + (i64)j0 * p.ks[2], p.ks[2], Tk - j0, tid);
	load_tile<D, BC>(sV, (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1] + (i64)j0 * p.vs[2], p.vs[2], Tk - j0, tid);
	if (total > 0) prefetch(0, 0);
	cp_commit();
	if constexpr (RS == 3) {
		if (total > 1) prefetch(1, 1);
		cp_commit(); // one group per stage from here on, empty or not
		cp_wait<1>();
	} else {
		cp_wait<0>();
	}
	__syncthreads();
	u32 kf[KVREG ? KD : 1][4], vf[KVREG ? KD : 1][4];
	if constexpr (KVREG) {
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			ldsm4(kf[kk], smem_addr(sK + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			ldsm4(vf[kk], smem_addr(sV + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
		}
	}
	float dk[ND][4], dv[ND][4];
#pragma unroll
	for (int dn = 0; dn < ND; dn++)
#pragma unroll
		for (int c = 0; c < 4; c++) dk[dn][c] = dv[dn][c] = 0.0f;

	for (int it = 0; it < total; it++) {
		const int buf = RS == 3 ? it % 3 : it & 1;
		if constexpr (RS == 3) {
			cp_wait<1>(); // step it's group is complete (the one after it may be pending)
			__syncthreads();
			if (it + 2 < total) prefetch(it + 2, (it + 2) % 3);
			cp_commit();
		} else {
			if (it + 1 < total) {
				prefetch(it + 1, buf ^ 1);
				cp_commit();
				cp_wait<1>();
			} else {
				cp_wait<0>();
			}
			__syncthreads();
		}
		const int hq = hk * G + g0 + it / nit, i0 = (qb0 + it % nit) * BR;
		const u16 *cQ = sQ + buf * BR * D, *cO = sO + buf * BR * D;
		const float *cL = sL + buf * BR, *cD = sDl + buf * BR;
		const bool need = j0 + BC > Tk || p.seg || (p.causal && i0 < j0 + BC - 1 - shift);
		u64 hbase = (u64)((i64)b * p.Hq + hq) * (u64)Tq;
		u32 bits = 0; // keep bit of element (nt, e, hh) at (2·nt + e)·2 + hh, drawn in a rolled loop
		// NH parts of NQ / NH query columns each (NH = 2 halves the Sᵀ and dPᵀ registers); every sum still
		// runs over the queries in the same order.
#pragma unroll
		for (int hf = 0; hf < NH; hf++) {
		constexpr int NQH = NQ / NH;
		const int n0 = hf * NQH;
		float s[NQH][4], dp[NQH][4];
#pragma unroll
		for (int nt = 0; nt < NQH; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
		// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (rows: this warp's 16 keys; columns: the block's queries).
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[4], av[4];
			if constexpr (KVREG) {
#pragma unroll
				for (int c = 0; c < 4; c++) a[c] = kf[kk][c], av[c] = vf[kk][c];
			} else {
				ldsm4(a, smem_addr(sK + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
				ldsm4(av, smem_addr(sV + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			}
#pragma unroll
			for (int nt = 0; nt < NQH; nt += 2) {
				u32 bb[4], bo[4];
				int r = (n0 + nt) * 8 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
				ldsm4(bb, smem_addr(cQ + swz<D>(r, ch)));
				ldsm4(bo, smem_addr(cO + swz<D>(r, ch)));
				mma<BF>(s[nt], a, bb[0], bb[1]);
				mma<BF>(s[nt + 1], a, bb[2], bb[3]);
				mma<BF>(dp[nt], av, bo[0], bo[1]);
				mma<BF>(dp[nt + 1], av, bo[2], bo[3]);
			}
		}
		if (hf == 0) { // after the first part's products, as with NH = 1 (fewer registers live across them)
			if (sbits) {
				const u16 *cb = sB + buf * BR * (BC / 16);
#pragma unroll
				for (int x = 0; x < NQ * 4; x++) bits |= (u32)bit_at<BC>(cb, (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), wr + g + (x & 1) * 8) << x;
			} else if (drop) {
#pragma unroll 1
				for (int x = 0; x < NQ * 4; x++) {
					int i = i0 + (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), j = j0 + wr + g + (x & 1) * 8;
					bits |= (u32)keep1((hbase + (u64)i) * (u64)Tk + (u64)j, p, thr) << x;
				}
			}
		}
#pragma unroll
		for (int nl = 0; nl < NQH; nl++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int nt = n0 + nl;
				int ic = nt * 8 + tig * 2 + e, i = i0 + ic;
				float lv = cL[ic], dl = cD[ic];
				lv = lv == NEG_INF ? POS_INF : (fast ? lv * LOG2E : lv);
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int j = j0 + wr + g + hh * 8, c = hh * 2 + e;
					float x = s[nl][c];
					float pv = fast ? ex2(fmaf(x, sl2, -lv)) : ex2((fmaf(x, p.scale, mk[hh]) - lv) * LOG2E);
					if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && i < Tq && sj[hh] != p.seg[(i64)b * Tq + i]))) pv = 0.0f;
					float dpv = dp[nl][c], pd = pv;
					if (drop) {
						bool kp = (bits >> ((nt * 2 + e) * 2 + hh)) & 1;
						pd = kp ? pv * p.dscale : 0.0f;
						dpv = kp ? dpv * p.dscale : 0.0f;
					}
					dp[nl][c] = pv * (dpv - dl);
					s[nl][c] = pd;
				}
			}
		// dV += P'ᵀ·dO, dK += dSᵀ·Q (A: this warp's keys × queries; B: the query tile, transposed by ldmatrix).
#pragma unroll
		for (int kl = 0; kl < KQ / NH; kl++) {
			const int kq = hf * (KQ / NH) + kl;
			u32 a[4], ad[4];
			a[0] = pack2<BF>(s[2 * kl][0], s[2 * kl][1]);
			a[1] = pack2<BF>(s[2 * kl][2], s[2 * kl][3]);
			a[2] = pack2<BF>(s[2 * kl + 1][0], s[2 * kl + 1][1]);
			a[3] = pack2<BF>(s[2 * kl + 1][2], s[2 * kl + 1][3]);
			ad[0] = pack2<BF>(dp[2 * kl][0], dp[2 * kl][1]);
			ad[1] = pack2<BF>(dp[2 * kl][2], dp[2 * kl][3]);
			ad[2] = pack2<BF>(dp[2 * kl + 1][0], dp[2 * kl + 1][1]);
			ad[3] = pack2<BF>(dp[2 * kl + 1][2], dp[2 * kl + 1][3]);
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bo[4], bq[4];
				int r = kq * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), ch = dn + (lane >> 4);
				ldsm4t(bo, smem_addr(cO + swz<D>(r, ch)));
				ldsm4t(bq, smem_addr(cQ + swz<D>(r, ch)));
				mma<BF>(dv[dn], a, bo[0], bo[1]);
				mma<BF>(dv[dn + 1], a, bo[2], bo[3]);
				mma<BF>(dk[dn], ad, bq[0], bq[1]);
				mma<BF>(dk[dn + 1], ad, bq[2], bq[3]);
			}
		}
		}
		if constexpr (RS == 2) __syncthreads();
	}
	cp_wait<0>();
	if constexpr (SPLIT) {
		const i64 base = ((i64)b * p.Hq + hk * G + g0) * Tk;
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			int j = j0 + wr + g + hh * 8;
			if (j >= Tk) continue;
#pragma unroll
			for (int dn = 0; dn < ND; dn++) {
				i64 off = (base + j) * D + dn * 8 + tig * 2;
				*(float2 *)(p.dkp + off) = make_float2(dk[dn][hh * 2], dk[dn][hh * 2 + 1]);
				*(float2 *)(p.dvp + off) = make_float2(dv[dn][hh * 2], dv[dn][hh * 2 + 1]);
			}
		}
		return;
	}
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < ND; dn++) {
			*(u32 *)(sK + swz<D>(r, dn) + tig * 2) = store2<BF>(dk[dn][hh * 2] * p.scale, dk[dn][hh * 2 + 1] * p.scale);
			*(u32 *)(sV + swz<D>(r, dn) + tig * 2) = store2<BF>(dv[dn][hh * 2], dv[dn][hh * 2 + 1]);
		}
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dk + b * p.dks[0] + hk * p.dks[1] + (i64)j0 * p.dks[2], p.dks[2], sK, wr, Tk - j0, lane);
	store_rows<D, 16>((u16 *)p.dv + b * p.dvs[0] + hk * p.dvs[1] + (i64)j0 * p.dvs[2], p.dvs[2], sV, wr, Tk - j0, lane);
#endif
}

template <int D, bool BF> __device__ __forceinline__ void dq_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BR = 64, BC = 64, NT = BC / 8, ND = D / 8, KD = D / 16, KC = BC / 16;
	constexpr bool QREG = D == 64;
	extern __shared__ __align__(128) u16 smem[];
	u16 *sQ = smem, *sO = sQ + BR * D, *sK = sO + BR * D, *sV = sK + 2 * BC * D, *sB = sV + 2 * BC * D;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int qb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	int nb = (Tk + BC - 1) / BC;
	if (p.causal) {
		int last = min(Tq - 1, q0 + BR - 1) + shift;
		nb = last < 0 ? 0 : min(nb, last / BC + 1);
	}
	const bool fast = p.mask == 0 && p.scale > 0.0f;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0; // keep bits through shared memory (draw_bits), two buffers
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;

	float lv[2], dl[2];
	int si[2];
	u64 rowb[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int i = q0 + wr + g + hh * 8;
		lv[hh] = POS_INF, dl[hh] = 0.0f, si[hh] = 0;
		rowb[hh] = (((u64)((i64)b * p.Hq + h)) * (u64)Tq + (u64)i) * (u64)Tk;
		if (i < Tq) {
			i64 row = ((i64)b * p.Hq + h) * Tq + i;
			float x = p.lse[row];
			lv[hh] = x == NEG_INF ? POS_INF : (fast ? x * LOG2E : x);
			if (p.seg) si[hh] = p.seg[(i64)b * Tq + i];
		}
	}

	load_tile<D, BR>(sQ, (const u16 *)p.q + b * p.qs[0] + h * p.qs[1] + (i64)q0 * p.qs[2], p.qs[2], Tq - q0, tid);
	load_tile<D, BR>(sO, (const u16 *)p.dout + b * p.dos[0] + h * p.dos[1] + (i64)q0 * p.dos[2], p.dos[2], Tq - q0, tid);
	cp_commit();
	if (nb > 0) {
		load_tile<D, BC>(sK, K, p.ks[2], Tk, tid);
		load_tile<D, BC>(sV, V, p.vs[2], Tk, tid);
		if (sbits && p.bitsready) load_bits<BR>(sB, p, hbase, q0, 0, tid);
		else if (sbits) draw_bits<BR, BC>(sB, p, hbase, q0, 0, thr, tid, p.bits);
	}
	cp_commit();
	cp_wait<1>();
	__syncthreads();
	u32 qf[QREG ? KD : 1][4], of[QREG ? KD : 1][4];
	if constexpr (QREG) {
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			ldsm4(qf[kk], smem_addr(sQ + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			ldsm4(of[kk], smem_addr(sO + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
		}
	}
	float dq[ND][4];
#pragma unroll
	for (int dn = 0; dn < ND; dn++) dq[dn][0] = dq[dn][1] = dq[dn][2] = dq[dn][3] = 0.0f;

	// Two sweeps over the key blocks: the first sums Δ_i = Σ_j P_ij·dP_ij (FP32, from S and dP only), the
	// second forms dS = P∘(dP − Δ) and dQ. Step it works on block it % nb in buffer it & 1.
	float dsum[2] = {0.0f, 0.0f};
	for (int it = 0; it < 2 * nb; it++) {
		const int pass = it >= nb, n = it - pass * nb, buf = it & 1, k0 = n * BC;
		if (it + 1 < 2 * nb) {
			const int k1 = ((it + 1) % nb) * BC;
			load_tile<D, BC>(sK + (buf ^ 1) * BC * D, K + (i64)k1 * p.ks[2], p.ks[2], Tk - k1, tid);
			load_tile<D, BC>(sV + (buf ^ 1) * BC * D, V + (i64)k1 * p.vs[2], p.vs[2], Tk - k1, tid);
			// With p.bits the first sweep draws each tile's keep bits once and stores them; the second
			// sweep (and the dK/dV kernel) loads them back instead of drawing again.
			const bool reuse = sbits && p.bits && (it + 1 >= nb || p.bitsready);
			if (reuse) load_bits<BR>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, tid);
			cp_commit();
			if (sbits && !reuse) draw_bits<BR, BC>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, thr, tid, p.bits);
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncthreads();
		const u16 *cK = sK + buf * BC * D, *cV = sV + buf * BC * D;
		float s[NT][4], dp[NT][4];
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[4], ao[4];
			if constexpr (QREG) {
#pragma unroll
				for (int c = 0; c < 4; c++) a[c] = qf[kk][c], ao[c] = of[kk][c];
			} else {
				ldsm4(a, smem_addr(sQ + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
				ldsm4(ao, smem_addr(sO + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			}
#pragma unroll
			for (int nt = 0; nt < NT; nt += 2) {
				u32 bk[4], bv[4];
				int r = nt * 8 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
				ldsm4(bk, smem_addr(cK + swz<D>(r, ch)));
				ldsm4(bv, smem_addr(cV + swz<D>(r, ch)));
				mma<BF>(s[nt], a, bk[0], bk[1]);
				mma<BF>(s[nt + 1], a, bk[2], bk[3]);
				mma<BF>(dp[nt], ao, bv[0], bv[1]);
				mma<BF>(dp[nt + 1], ao, bv[2], bv[3]);
			}
		}
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + shift);
		u32 bits = 0; // keep bit of element (nt, hh, e) at (2·nt + hh)·2 + e, drawn in a rolled loop
		if (sbits) {
			const u16 *cb = sB + buf * BR * (BC / 16);
#pragma unroll
			for (int x = 0; x < NT * 4; x++) bits |= (u32)bit_at<BC>(cb, wr + g + ((x >> 1) & 1) * 8, (x >> 2) * 8 + tig * 2 + (x & 1)) << x;
		} else if (drop) {
#pragma unroll 1
			for (int x = 0; x < NT * 2; x++) {
				bool k0b, k1b;
				keep2(rowb[x & 1] + (u64)(k0 + (x >> 1) * 8 + tig * 2), p, thr, k0b, k1b);
				bits |= ((u32)k0b | ((u32)k1b << 1)) << (2 * x);
			}
		}
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				int j = k0 + nt * 8 + tig * 2 + e;
				float mk = (!fast && p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
				int sjv = (need && p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int i = q0 + wr + g + hh * 8, c = hh * 2 + e;
					float x = s[nt][c];
					float pv = fast ? ex2(fmaf(x, sl2, -lv[hh])) : ex2((fmaf(x, p.scale, mk) - lv[hh]) * LOG2E);
					if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && si[hh] != sjv))) pv = 0.0f;
					float dpv = dp[nt][c];
					if (drop) dpv = ((bits >> ((nt * 2 + hh) * 2 + e)) & 1) ? dpv * p.dscale : 0.0f;
					if (pass) dp[nt][c] = pv * (dpv - dl[hh]);
					else dsum[hh] += pv * dpv;
				}
			}
		if (!pass) {
			if (n == nb - 1) {
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					float t = dsum[hh];
					t += __shfl_xor_sync(0xffffffffu, t, 1);
					t += __shfl_xor_sync(0xffffffffu, t, 2);
					dl[hh] = t;
					int i = q0 + wr + g + hh * 8;
					if (tig == 0 && i < Tq) p.delta[((i64)b * p.Hq + h) * Tq + i] = t;
				}
			}
			__syncthreads();
			continue;
		}
		// dQ += dS·K.
#pragma unroll
		for (int kc = 0; kc < KC; kc++) {
			u32 a[4];
			a[0] = pack2<BF>(dp[2 * kc][0], dp[2 * kc][1]);
			a[1] = pack2<BF>(dp[2 * kc][2], dp[2 * kc][3]);
			a[2] = pack2<BF>(dp[2 * kc + 1][0], dp[2 * kc + 1][1]);
			a[3] = pack2<BF>(dp[2 * kc + 1][2], dp[2 * kc + 1][3]);
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bb[4];
				ldsm4t(bb, smem_addr(cK + swz<D>(kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dn + (lane >> 4))));
				mma<BF>(dq[dn], a, bb[0], bb[1]);
				mma<BF>(dq[dn + 1], a, bb[2], bb[3]);
			}
		}
		__syncthreads();
	}
	if (nb == 0) {
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			int i = q0 + wr + g + hh * 8;
			if (tig == 0 && i < Tq) p.delta[((i64)b * p.Hq + h) * Tq + i] = 0.0f;
		}
	}
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < ND; dn++) *(u32 *)(sQ + swz<D>(r, dn) + tig * 2) = store2<BF>(dq[dn][hh * 2] * p.scale, dq[dn][hh * 2 + 1] * p.scale);
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dq + b * p.dqs[0] + h * p.dqs[1] + (i64)q0 * p.dqs[2], p.dqs[2], sQ, wr, Tq - q0, lane);
#endif
}

// dq1_tc is the dQ kernel in one sweep over the keys (the default; dq_tc is the two-sweep design it
// replaced). It starts from Δ̃_i = dO_i·O_i over the stored (half) O, which FlashAttention-2 uses as Δ but which
// carries O's rounding (docs/ATTENTION.md), and forms dS̃ = P∘(dP − Δ̃) for dQ̃ = dS̃·K. In the same sweep it sums
// the exact Δ_i = Σ_j P_ij·dP_ij in FP32 (the first sweep of dq_tc, in the same order, so the Δ it stores for
// the dK/dV kernel is bit-identical) and R_i = Σ_j P_ij·K_j; since dS = dS̃ − P∘ε with ε_i = Δ_i − Δ̃_i,
// dQ = scale·(dQ̃ − ε·R). Four products per tile instead of five, and each K fragment read by ldmatrix feeds two
// MMAs (dS̃ and P as A operands). QREG keeps Q's and dO's fragments in registers.
template <int D, bool BF, bool QREG, bool V3 = false, int NH = 1, int RS = 2> __device__ __forceinline__ void dq1_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BR = 64, BC = 64, NT = BC / 8, ND = D / 8, KD = D / 16, KC = BC / 16;
	extern __shared__ __align__(128) u16 smem[];
	// RS stages of K/V: 2 a double buffer (two barriers per step), 3 a ring (one barrier per step).
	u16 *sQ = smem, *sO = sQ + BR * D, *sK = sO + BR * D, *sV = sK + RS * BC * D, *sB = sV + RS * BC * D;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	int qb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	if constexpr (V3) { // heaviest (last) query block first
		const int nqb = ((int)p.Tq + BR - 1) / BR;
		int rb, pair;
		order_block(p, nqb, (int)(p.B * p.Hq), rb, pair);
		qb = nqb - 1 - rb, h = pair % (int)p.Hq, b = pair / (int)p.Hq;
	}
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	int nb = (Tk + BC - 1) / BC;
	if (p.causal) {
		int last = min(Tq - 1, q0 + BR - 1) + shift;
		nb = last < 0 ? 0 : min(nb, last / BC + 1);
	}
	const bool fast = p.mask == 0 && p.scale > 0.0f;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0; // keep bits through shared memory (draw_bits), two buffers
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;

	float lv[2];
	int si[2];
	u64 rowb[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int i = q0 + wr + g + hh * 8;
		lv[hh] = POS_INF, si[hh] = 0;
		rowb[hh] = (((u64)((i64)b * p.Hq + h)) * (u64)Tq + (u64)i) * (u64)Tk;
		if (i < Tq) {
			i64 row = ((i64)b * p.Hq + h) * Tq + i;
			float x = p.lse[row];
			lv[hh] = x == NEG_INF ? POS_INF : (fast ? x * LOG2E : x);
			if (p.seg) si[hh] = p.seg[(i64)b * Tq + i];
		}
	}

	load_tile<D, BR>(sQ, (const u16 *)p.q + b * p.qs[0] + h * p.qs[1] + (i64)q0 * p.qs[2], p.qs[2], Tq - q0, tid);
	load_tile<D, BR>(sO, (const u16 *)p.dout + b * p.dos[0] + h * p.dos[1] + (i64)q0 * p.dos[2], p.dos[2], Tq - q0, tid);
	cp_commit();
	if (nb > 0) {
		load_tile<D, BC>(sK, K, p.ks[2], Tk, tid);
		load_tile<D, BC>(sV, V, p.vs[2], Tk, tid);
		if (sbits && p.bitsready) load_bits<BR>(sB, p, hbase, q0, 0, tid);
		else if (sbits) draw_bits<BR, BC>(sB, p, hbase, q0, 0, thr, tid, p.bits);
	}
	cp_commit();
	if constexpr (RS == 3) { // stage 1 in its own group (committed even when empty: one group per step from here on)
		if (nb > 1) {
			load_tile<D, BC>(sK + BC * D, K + (i64)BC * p.ks[2], p.ks[2], Tk - BC, tid);
			load_tile<D, BC>(sV + BC * D, V + (i64)BC * p.vs[2], p.vs[2], Tk - BC, tid);
			if (sbits && p.bitsready) load_bits<BR>(sB + BR * (BC / 16), p, hbase, q0, BC, tid);
		}
		cp_commit();
		if (nb > 1 && sbits && !p.bitsready) draw_bits<BR, BC>(sB + BR * (BC / 16), p, hbase, q0, BC, thr, tid, p.bits);
		cp_wait<2>(); // Q and dO
	} else {
		cp_wait<1>();
	}
	__syncthreads();
	// Δ̃ of the thread's rows g and g + 8: the quad's four threads take D/4 columns each (dO from shared
	// memory, O from global memory, 16 bytes at a time), summed by two shuffles.
	float dt[2];
	{
		const u16 *O = (const u16 *)p.o + b * p.os[0] + h * p.os[1];
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			int r = wr + g + hh * 8, i = q0 + r;
			float acc = 0.0f;
			if (i < Tq) {
#pragma unroll
				for (int c = 0; c < D / 32; c++) {
					int ch = tig * (D / 32) + c;
					uint4 ov = *(const uint4 *)(O + (i64)i * p.os[2] + ch * 8);
					uint4 dv = *(const uint4 *)(sO + swz<D>(r, ch));
					const u32 ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float o0, o1, d0, d1;
						if constexpr (BF) {
							o0 = __uint_as_float(ow[e] << 16), o1 = __uint_as_float(ow[e] & 0xffff0000u);
							d0 = __uint_as_float(dw[e] << 16), d1 = __uint_as_float(dw[e] & 0xffff0000u);
						} else {
							o0 = f16_to_f32((u16)(ow[e] & 0xffffu)), o1 = f16_to_f32((u16)(ow[e] >> 16));
							d0 = f16_to_f32((u16)(dw[e] & 0xffffu)), d1 = f16_to_f32((u16)(dw[e] >> 16));
						}
						acc = fmaf(d0, o0, acc);
						acc = fmaf(d1, o1, acc);
					}
				}
			}
			acc += __shfl_xor_sync(0xffffffffu, acc, 1);
			acc += __shfl_xor_sync(0xffffffffu, acc, 2);
			dt[hh] = acc;
		}
	}
	u32 qf[QREG ? KD : 1][4], of[QREG ? KD : 1][4];
	if constexpr (QREG) {
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			ldsm4(qf[kk], smem_addr(sQ + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			ldsm4(of[kk], smem_addr(sO + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
		}
	}
	float dq[ND][4], rk[ND][4];
#pragma unroll
	for (int dn = 0; dn < ND; dn++)
#pragma unroll
		for (int c = 0; c < 4; c++) dq[dn][c] = rk[dn][c] = 0.0f;

	float dsum[2] = {0.0f, 0.0f};
	for (int n = 0; n < nb; n++) {
		const int buf = RS == 3 ? n % 3 : n & 1, k0 = n * BC;
		if constexpr (RS == 3) {
			cp_wait<1>(); // step n's group is complete (the one after it may be pending)
			__syncthreads();
			const int k2 = k0 + 2 * BC, nx = (n + 2) % 3;
			if (n + 2 < nb) {
				load_tile<D, BC>(sK + nx * BC * D, K + (i64)k2 * p.ks[2], p.ks[2], Tk - k2, tid);
				load_tile<D, BC>(sV + nx * BC * D, V + (i64)k2 * p.vs[2], p.vs[2], Tk - k2, tid);
				if (sbits && p.bitsready) load_bits<BR>(sB + nx * BR * (BC / 16), p, hbase, q0, k2, tid);
			}
			cp_commit();
			if (n + 2 < nb && sbits && !p.bitsready) draw_bits<BR, BC>(sB + nx * BR * (BC / 16), p, hbase, q0, k2, thr, tid, p.bits);
		} else if (n + 1 < nb) {
			const int k1 = k0 + BC;
			load_tile<D, BC>(sK + (buf ^ 1) * BC * D, K + (i64)k1 * p.ks[2], p.ks[2], Tk - k1, tid);
			load_tile<D, BC>(sV + (buf ^ 1) * BC * D, V + (i64)k1 * p.vs[2], p.vs[2], Tk - k1, tid);
			if (sbits && p.bitsready) load_bits<BR>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, tid);
			cp_commit();
			if (sbits && !p.bitsready) draw_bits<BR, BC>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, thr, tid, p.bits);
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		if constexpr (RS == 2) __syncthreads();
		const u16 *cK = sK + buf * BC * D, *cV = sV + buf * BC * D;
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + shift);
		u32 bits = 0; // keep bit of element (nt, hh, e) at (2·nt + hh)·2 + e
		// NH parts of NT / NH key columns each (NH = 2 halves the S and dP registers); every sum still runs
		// over the columns in the same order.
#pragma unroll
		for (int hf = 0; hf < NH; hf++) {
		constexpr int NTH = NT / NH;
		const int n0 = hf * NTH;
		float s[NTH][4], dp[NTH][4];
#pragma unroll
		for (int nt = 0; nt < NTH; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[4], ao[4];
			if constexpr (QREG) {
#pragma unroll
				for (int c = 0; c < 4; c++) a[c] = qf[kk][c], ao[c] = of[kk][c];
			} else {
				ldsm4(a, smem_addr(sQ + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
				ldsm4(ao, smem_addr(sO + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			}
#pragma unroll
			for (int nt = 0; nt < NTH; nt += 2) {
				u32 bk[4], bv[4];
				int r = (n0 + nt) * 8 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
				ldsm4(bk, smem_addr(cK + swz<D>(r, ch)));
				ldsm4(bv, smem_addr(cV + swz<D>(r, ch)));
				mma<BF>(s[nt], a, bk[0], bk[1]);
				mma<BF>(s[nt + 1], a, bk[2], bk[3]);
				mma<BF>(dp[nt], ao, bv[0], bv[1]);
				mma<BF>(dp[nt + 1], ao, bv[2], bv[3]);
			}
		}
		if (hf == 0) { // after the first part's products, as with NH = 1 (fewer registers live across them)
			if (sbits) {
				const u16 *cb = sB + buf * BR * (BC / 16);
#pragma unroll
				for (int x = 0; x < NT * 4; x++) bits |= (u32)bit_at<BC>(cb, wr + g + ((x >> 1) & 1) * 8, (x >> 2) * 8 + tig * 2 + (x & 1)) << x;
			} else if (drop) {
#pragma unroll 1
				for (int x = 0; x < NT * 2; x++) {
					bool k0b, k1b;
					keep2(rowb[x & 1] + (u64)(k0 + (x >> 1) * 8 + tig * 2), p, thr, k0b, k1b);
					bits |= ((u32)k0b | ((u32)k1b << 1)) << (2 * x);
				}
			}
		}
#pragma unroll
		for (int nl = 0; nl < NTH; nl++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int nt = n0 + nl, j = k0 + nt * 8 + tig * 2 + e;
				float mk = (!fast && p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
				int sjv = (need && p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int i = q0 + wr + g + hh * 8, c = hh * 2 + e;
					float x = s[nl][c];
					float pv = fast ? ex2(fmaf(x, sl2, -lv[hh])) : ex2((fmaf(x, p.scale, mk) - lv[hh]) * LOG2E);
					if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && si[hh] != sjv))) pv = 0.0f;
					float dpv = dp[nl][c];
					if (drop) dpv = ((bits >> ((nt * 2 + hh) * 2 + e)) & 1) ? dpv * p.dscale : 0.0f;
					dsum[hh] += pv * dpv;
					dp[nl][c] = pv * (dpv - dt[hh]);
					s[nl][c] = pv;
				}
			}
		// dQ̃ += dS̃·K and R += P·K (one K fragment, two MMAs).
#pragma unroll
		for (int kl = 0; kl < KC / NH; kl++) {
			const int kc = hf * (KC / NH) + kl;
			u32 a[4], ap[4];
			a[0] = pack2<BF>(dp[2 * kl][0], dp[2 * kl][1]);
			a[1] = pack2<BF>(dp[2 * kl][2], dp[2 * kl][3]);
			a[2] = pack2<BF>(dp[2 * kl + 1][0], dp[2 * kl + 1][1]);
			a[3] = pack2<BF>(dp[2 * kl + 1][2], dp[2 * kl + 1][3]);
			ap[0] = pack2<BF>(s[2 * kl][0], s[2 * kl][1]);
			ap[1] = pack2<BF>(s[2 * kl][2], s[2 * kl][3]);
			ap[2] = pack2<BF>(s[2 * kl + 1][0], s[2 * kl + 1][1]);
			ap[3] = pack2<BF>(s[2 * kl + 1][2], s[2 * kl + 1][3]);
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bb[4];
				ldsm4t(bb, smem_addr(cK + swz<D>(kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dn + (lane >> 4))));
				mma<BF>(dq[dn], a, bb[0], bb[1]);
				mma<BF>(dq[dn + 1], a, bb[2], bb[3]);
				mma<BF>(rk[dn], ap, bb[0], bb[1]);
				mma<BF>(rk[dn + 1], ap, bb[2], bb[3]);
			}
		}
		}
		if constexpr (RS == 2) __syncthreads();
	}
	// Δ for the dK/dV kernel, ε = Δ − Δ̃, dQ = scale·(dQ̃ − ε·R).
	float eps[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		float t = dsum[hh];
		t += __shfl_xor_sync(0xffffffffu, t, 1);
		t += __shfl_xor_sync(0xffffffffu, t, 2);
		eps[hh] = t - dt[hh];
		int i = q0 + wr + g + hh * 8;
		if (tig == 0 && i < Tq) p.delta[((i64)b * p.Hq + h) * Tq + i] = t;
	}
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < ND; dn++) {
			float x0 = dq[dn][hh * 2] - eps[hh] * rk[dn][hh * 2], x1 = dq[dn][hh * 2 + 1] - eps[hh] * rk[dn][hh * 2 + 1];
			*(u32 *)(sQ + swz<D>(r, dn) + tig * 2) = store2<BF>(x0 * p.scale, x1 * p.scale);
		}
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dq + b * p.dqs[0] + h * p.dqs[1] + (i64)q0 * p.dqs[2], p.dqs[2], sQ, wr, Tq - q0, lane);
#endif
}

// Modules. This file is compiled into several kernel modules (cuda/nvrtc.go's kernelVariants, named by
// cuda/attention.go's attnModule), each with a few macros defined first and holding only its kernels, so that a
// process compiles only the family it launches (NVRTC takes 1-2 s per tensor-core kernel; the whole file took
// 30-45 s cold):
//
//   attention.cu                        no macro: the general kernels (attn_*_ref)
//   attention_{bf16,f16}_d{64,128}.cu   ATTN_D, ATTN_BF, ATTN_SET 0: the family's default forward and backward
//                                       kernels (the backward of v8 and v10 for D = 64, of v2 for D = 128)
//   attention_bench_*.cu                ATTN_SET 1: the microbenchmark's forward and dQ variants
//   attention_v2_*_d64.cu               ATTN_SET 2: the backward of v2 for D = 64
//   attention_v3_*.cu                   ATTN_SET 3: the backward variants v3 and v4
//   attention_v5_*_d64.cu               ATTN_SET 5: the backward variants v5, v6, v7, v11 and v12
#ifdef ATTN_D
#if ATTN_D == 64 && ATTN_BF
#define ATTN_FAMILY(M) M(64, bf16, true)
#elif ATTN_D == 64
#define ATTN_FAMILY(M) M(64, f16, false)
#elif ATTN_BF
#define ATTN_FAMILY(M) M(128, bf16, true)
#else
#define ATTN_FAMILY(M) M(128, f16, false)
#endif
#endif

// Forward query rows per block: 128 (MT = 2 m-tiles per warp) for D = 64, 64 for D = 128, where two m-tiles
// spill registers; K and V are double-buffered for D = 64 (4% faster at (64, 12, 512, 64)), not for D = 128 (4%
// slower causal at (8, 32, 2048, 128)).
#define TC_FWD_KERNEL(D, NAME, BF)                                                                                \
	extern "C" __global__ void __launch_bounds__(128) attn_fwd_##NAME##_d##D(const AttnParams p) { fwd_tc<D, BF, D == 64 ? 2 : 1, 64, D == 64, D == 64 ? 2 : 1>(p); }

// The backward of v2: the dQ and dK/dV kernels on (blocks, heads, batch) grids, 244-255 registers.
#define TC_V2_KERNELS(D, NAME, BF)                                                                                \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_##NAME##_d##D(const AttnParams p) { dkdv_tc<D, BF>(p); } \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_##NAME##_d##D(const AttnParams p) { dq1_tc<D, BF, D == 64>(p); }

// The backward of v8 and v10 (v10, without v3's GQA split, is the default for D = 64; cuda/attention.go
// v3Backward): v3's longest-first block order, at three blocks per SM (__launch_bounds__(128, 3), at most 168 registers, where v2's kernels
// take 244-253 and so run two blocks, eight warps, per SM). The dQ kernel reads Q's and dO's fragments from
// shared memory and handles each 64-key step in two halves of 32 keys (dq1_tc NH = 2: half the S and dP
// registers); the dK/dV kernel holds K's and V's fragments and handles each 64-query step in quarters of 16
// queries (dkdv_tc NH = 4). Every sum runs over the same elements in the same order as in v3: same results.
#define TC_V8_KERNELS(D, NAME, BF)                                                                                \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_##NAME##_d##D##_h3v3(const AttnParams p) { dq1_tc<D, BF, false, true, 2>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_q3v3(const AttnParams p) { dkdv_tc<D, BF, true, false, true, 4>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_q3v3s(const AttnParams p) { dkdv_tc<D, BF, true, true, true, 4>(p); }

// The microbenchmark's variants: attn_bwd_dq2_* (every family) and, BF16 only, the forward variants _m2 (D =
// 128 with 128 rows), _bc128 (D = 64 with 128 keys per step, Q from shared memory), _db (D = 128
// double-buffered), _sb (D = 64 single-buffered: V loads during Q·Kᵀ, K during P·V), _m1 (D = 64 with 64 rows:
// 168 registers, three blocks per SM), _m1o4 (the same held to 128 registers, four blocks per SM), _m1s3 and _s3
// (_m1 and the default with a three-stage K/V ring: one barrier per step), _h3 and _h3s3 (the default's 128 rows,
// each 64-key step in two halves of 32 keys with the online softmax updated per half, Q's fragments from shared
// memory, at three blocks per SM; not bit-identical to the default: the sums are grouped per half) and the dQ
// kernel _smq (D = 64, Q and dO fragments read from shared memory each step).
#define TC_BENCH_KERNELS(D, NAME, BF)                                                                             \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq2_##NAME##_d##D(const AttnParams p) { dq_tc<D, BF>(p); }

// The backward variants v3 and v4 (TUNE_ATTN_BWD, cuda/attention.go). v3: one-dimensional grids in
// order_block's order; with GQA the dK/dV blocks split the group's query heads (_v3s) and gqa_sum adds their
// partials.
#define TC_V3_KERNELS(D, NAME, BF)                                                                                \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_##NAME##_d##D##_v3(const AttnParams p) { dq1_tc<D, BF, D == 64, true>(p); } \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_##NAME##_d##D##_v3(const AttnParams p) { dkdv_tc<D, BF, true, false>(p); } \
	extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_##NAME##_d##D##_v3s(const AttnParams p) { dkdv_tc<D, BF, true, true>(p); }

// dkdv2_tc is the dK/dV kernel of variant v4 (D = 64): 128 keys per block, each warp two 16-key tiles (32
// keys), query tiles of 32 rows streaming through the double buffer, so every Q and dO fragment ldmatrix reads
// feeds both key tiles (half the shared-memory reads per MMA of dkdv_tc in the dV/dK products); K and V
// fragments come from shared memory each step (the registers hold dK and dV of 32 keys). Blocks are in
// order_block's order; SPLIT as in dkdv_tc. Every accumulator receives the same 16-query MMA chunks in the
// same order as in dkdv_tc, so dK and dV equal its results (up to the sign of a zero).
template <bool BF, bool SPLIT> __device__ __forceinline__ void dkdv2_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int D = 64, BC = 128, BR = 32, NQ = BR / 8, ND = D / 8, KD = D / 16, KQ = BR / 16, MT = 2;
	extern __shared__ __align__(128) u16 smem[];
	u16 *sK = smem, *sV = sK + BC * D, *sQ = sV + BC * D, *sO = sQ + 2 * BR * D;
	float *sL = (float *)(sO + 2 * BR * D), *sDl = sL + 2 * BR;
	u16 *sB = (u16 *)(sDl + 2 * BR); // per buffer two BR × 64 keep-bit masks: keys j0.. and j0 + 64..
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, G = (int)(p.Hq / p.Hkv), shift = Tk - Tq;
	int kb, hk, b, g0;
	{
		const int gs = SPLIT ? G : 1;
		int pair;
		order_block(p, (Tk + BC - 1) / BC, (int)(p.B * p.Hkv) * gs, kb, pair);
		g0 = pair % gs, hk = (pair / gs) % (int)p.Hkv, b = pair / gs / (int)p.Hkv;
	}
	const int j0 = kb * BC, ng = SPLIT ? 1 : G;
	const bool fast = p.mask == 0 && p.scale > 0.0f;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 32; // tile t holds keys j0 + wr + 16·t ..
	const bool sbits = drop && (Tk & 3) == 0;

	int qb0 = 0;
	if (p.causal) {
		int imin = j0 - shift;
		qb0 = imin > 0 ? imin / BR : 0;
	}
	const int nqb = (Tq + BR - 1) / BR, nit = nqb > qb0 ? nqb - qb0 : 0, total = ng * nit;

	float mk[MT][2];
	int sj[MT][2];
#pragma unroll
	for (int t = 0; t < MT; t++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			int j = j0 + wr + t * 16 + g + hh * 8;
			mk[t][hh] = (p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
			sj[t][hh] = (p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
		}

	auto prefetch = [&](int it, int buf) {
		int hq = hk * G + g0 + it / nit, i0 = (qb0 + it % nit) * BR;
		load_tile<D, BR>(sQ + buf * BR * D, (const u16 *)p.q + b * p.qs[0] + hq * p.qs[1] + (i64)i0 * p.qs[2], p.qs[2], Tq - i0, tid);
		load_tile<D, BR>(sO + buf * BR * D, (const u16 *)p.dout + b * p.dos[0] + hq * p.dos[1] + (i64)i0 * p.dos[2], p.dos[2], Tq - i0, tid);
		if (tid < 2 * BR) { // LSE (threads 0..31) and Δ (32..63); rows ≥ Tq read as 0
			const int r = tid & (BR - 1), i = i0 + r;
			const bool ok = i < Tq;
			const i64 row = ok ? ((i64)b * p.Hq + hq) * Tq + i : 0;
			cp4(smem_addr((tid < BR ? sL : sDl) + buf * BR + r), (tid < BR ? p.lse : p.delta) + row, ok);
		}
		const u64 hbase = (u64)((i64)b * p.Hq + hq) * (u64)Tq;
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			if (j0 + hf * 64 >= Tk) break; // keys past Tk are masked whatever their bits
			u16 *mb = sB + (buf * 2 + hf) * BR * 4;
			if (sbits && p.bits) load_bits<BR>(mb, p, hbase, i0, j0 + hf * 64, tid);
			else if (sbits) draw_bits<BR, 64>(mb, p, hbase, i0, j0 + hf * 64, thr, tid);
		}
	};

	load_tile<D, BC>(sK, (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1] + (i64)j0 * p.ks[2], p.ks[2], Tk - j0, tid);
	load_tile<D, BC>(sV, (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1] + (i64)j0 * p.vs[2], p.vs[2], Tk - j0, tid);
	if (total > 0) prefetch(0, 0);
	cp_commit();
	cp_wait<0>();
	__syncthreads();
	float dk[MT][ND][4], dv[MT][ND][4];
#pragma unroll
	for (int t = 0; t < MT; t++)
#pragma unroll
		for (int dn = 0; dn < ND; dn++)
#pragma unroll
			for (int c = 0; c < 4; c++) dk[t][dn][c] = dv[t][dn][c] = 0.0f;

	for (int it = 0; it < total; it++) {
		const int buf = it & 1;
		if (it + 1 < total) {
			prefetch(it + 1, buf ^ 1);
			cp_commit();
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncthreads();
		const int hq = hk * G + g0 + it / nit, i0 = (qb0 + it % nit) * BR;
		const u16 *cQ = sQ + buf * BR * D, *cO = sO + buf * BR * D;
		const float *cL = sL + buf * BR, *cD = sDl + buf * BR;
		float s[MT][NQ][4], dp[MT][NQ][4];
#pragma unroll
		for (int t = 0; t < MT; t++)
#pragma unroll
			for (int nt = 0; nt < NQ; nt++)
#pragma unroll
				for (int c = 0; c < 4; c++) s[t][nt][c] = dp[t][nt][c] = 0.0f;
		// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for both key tiles; each Q/dO fragment feeds both.
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[MT][4], av[MT][4];
#pragma unroll
			for (int t = 0; t < MT; t++) {
				ldsm4(a[t], smem_addr(sK + swz<D>(wr + t * 16 + (lane & 15), kk * 2 + (lane >> 4))));
				ldsm4(av[t], smem_addr(sV + swz<D>(wr + t * 16 + (lane & 15), kk * 2 + (lane >> 4))));
			}
#pragma unroll
			for (int nt = 0; nt < NQ; nt += 2) {
				u32 bb[4], bo[4];
				int r = nt * 8 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
				ldsm4(bb, smem_addr(cQ + swz<D>(r, ch)));
				ldsm4(bo, smem_addr(cO + swz<D>(r, ch)));
#pragma unroll
				for (int t = 0; t < MT; t++) {
					mma<BF>(s[t][nt], a[t], bb[0], bb[1]);
					mma<BF>(s[t][nt + 1], a[t], bb[2], bb[3]);
					mma<BF>(dp[t][nt], av[t], bo[0], bo[1]);
					mma<BF>(dp[t][nt + 1], av[t], bo[2], bo[3]);
				}
			}
		}
		const bool need = j0 + BC > Tk || p.seg || (p.causal && i0 < j0 + BC - 1 - shift);
		u64 hbase = (u64)((i64)b * p.Hq + hq) * (u64)Tq;
		u32 bits[MT] = {0u, 0u}; // keep bit of element (nt, e, hh) of tile t at (2·nt + e)·2 + hh
		if (sbits) {
			const u16 *mb = sB + (buf * 2 + (warp >> 1)) * BR * 4; // the 64-key half holding this warp's keys
#pragma unroll
			for (int t = 0; t < MT; t++)
#pragma unroll
				for (int x = 0; x < NQ * 4; x++)
					bits[t] |= (u32)bit_at<64>(mb, (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), (warp & 1) * 32 + t * 16 + g + (x & 1) * 8) << x;
		} else if (drop) {
#pragma unroll
			for (int t = 0; t < MT; t++)
#pragma unroll 1
				for (int x = 0; x < NQ * 4; x++) {
					int i = i0 + (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), j = j0 + wr + t * 16 + g + (x & 1) * 8;
					bits[t] |= (u32)keep1((hbase + (u64)i) * (u64)Tk + (u64)j, p, thr) << x;
				}
		}
#pragma unroll
		for (int nt = 0; nt < NQ; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				int ic = nt * 8 + tig * 2 + e, i = i0 + ic;
				float lv = cL[ic], dl = cD[ic];
				lv = lv == NEG_INF ? POS_INF : (fast ? lv * LOG2E : lv);
#pragma unroll
				for (int t = 0; t < MT; t++)
#pragma unroll
					for (int hh = 0; hh < 2; hh++) {
						int j = j0 + wr + t * 16 + g + hh * 8, c = hh * 2 + e;
						float x = s[t][nt][c];
						float pv = fast ? ex2(fmaf(x, sl2, -lv)) : ex2((fmaf(x, p.scale, mk[t][hh]) - lv) * LOG2E);
						if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && i < Tq && sj[t][hh] != p.seg[(i64)b * Tq + i]))) pv = 0.0f;
						float dpv = dp[t][nt][c], pd = pv;
						if (drop) {
							bool kp = (bits[t] >> ((nt * 2 + e) * 2 + hh)) & 1;
							pd = kp ? pv * p.dscale : 0.0f;
							dpv = kp ? dpv * p.dscale : 0.0f;
						}
						dp[t][nt][c] = pv * (dpv - dl);
						s[t][nt][c] = pd;
					}
			}
		// dV += P'ᵀ·dO, dK += dSᵀ·Q; each dO/Q fragment (ldmatrix.trans) feeds both key tiles.
#pragma unroll
		for (int kq = 0; kq < KQ; kq++) {
			u32 a[MT][4], ad[MT][4];
#pragma unroll
			for (int t = 0; t < MT; t++) {
				a[t][0] = pack2<BF>(s[t][2 * kq][0], s[t][2 * kq][1]);
				a[t][1] = pack2<BF>(s[t][2 * kq][2], s[t][2 * kq][3]);
				a[t][2] = pack2<BF>(s[t][2 * kq + 1][0], s[t][2 * kq + 1][1]);
				a[t][3] = pack2<BF>(s[t][2 * kq + 1][2], s[t][2 * kq + 1][3]);
				ad[t][0] = pack2<BF>(dp[t][2 * kq][0], dp[t][2 * kq][1]);
				ad[t][1] = pack2<BF>(dp[t][2 * kq][2], dp[t][2 * kq][3]);
				ad[t][2] = pack2<BF>(dp[t][2 * kq + 1][0], dp[t][2 * kq + 1][1]);
				ad[t][3] = pack2<BF>(dp[t][2 * kq + 1][2], dp[t][2 * kq + 1][3]);
			}
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bo[4], bq[4];
				int r = kq * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), ch = dn + (lane >> 4);
				ldsm4t(bo, smem_addr(cO + swz<D>(r, ch)));
				ldsm4t(bq, smem_addr(cQ + swz<D>(r, ch)));
#pragma unroll
				for (int t = 0; t < MT; t++) {
					mma<BF>(dv[t][dn], a[t], bo[0], bo[1]);
					mma<BF>(dv[t][dn + 1], a[t], bo[2], bo[3]);
					mma<BF>(dk[t][dn], ad[t], bq[0], bq[1]);
					mma<BF>(dk[t][dn + 1], ad[t], bq[2], bq[3]);
				}
			}
		}
		__syncthreads();
	}
	cp_wait<0>();
	if constexpr (SPLIT) {
		const i64 base = ((i64)b * p.Hq + hk * G + g0) * Tk;
#pragma unroll
		for (int t = 0; t < MT; t++)
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				int j = j0 + wr + t * 16 + g + hh * 8;
				if (j >= Tk) continue;
#pragma unroll
				for (int dn = 0; dn < ND; dn++) {
					i64 off = (base + j) * D + dn * 8 + tig * 2;
					*(float2 *)(p.dkp + off) = make_float2(dk[t][dn][hh * 2], dk[t][dn][hh * 2 + 1]);
					*(float2 *)(p.dvp + off) = make_float2(dv[t][dn][hh * 2], dv[t][dn][hh * 2 + 1]);
				}
			}
		return;
	}
	__syncthreads();
#pragma unroll
	for (int t = 0; t < MT; t++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			int r = wr + t * 16 + g + hh * 8;
#pragma unroll
			for (int dn = 0; dn < ND; dn++) {
				*(u32 *)(sK + swz<D>(r, dn) + tig * 2) = store2<BF>(dk[t][dn][hh * 2] * p.scale, dk[t][dn][hh * 2 + 1] * p.scale);
				*(u32 *)(sV + swz<D>(r, dn) + tig * 2) = store2<BF>(dv[t][dn][hh * 2], dv[t][dn][hh * 2 + 1]);
			}
		}
	__syncwarp();
	store_rows<D, 32>((u16 *)p.dk + b * p.dks[0] + hk * p.dks[1] + (i64)j0 * p.dks[2], p.dks[2], sK, wr, Tk - j0, lane);
	store_rows<D, 32>((u16 *)p.dv + b * p.dvs[0] + hk * p.dvs[1] + (i64)j0 * p.dvs[2], p.dvs[2], sV, wr, Tk - j0, lane);
#endif
}
// gqa_sum finishes the split dK/dV: dK = round(scale·Σ_g dKp_g), dV = round(Σ_g dVp_g) over the group's query
// heads g in order (fixed, so bit-identical from run to run); one thread per two adjacent d.
template <bool BF> __device__ __forceinline__ void gqa_sum(const AttnParams &p) {
#ifdef TC_OK
	const int D = (int)p.D, G = (int)(p.Hq / p.Hkv), Tk = (int)p.Tk;
	const i64 n = (i64)blockIdx.x * blockDim.x + threadIdx.x, half = D / 2;
	if (n >= p.B * p.Hkv * Tk * half) return;
	const int d = (int)(n % half) * 2;
	const i64 r = n / half;
	const int j = (int)(r % Tk), hk = (int)(r / Tk % p.Hkv), b = (int)(r / Tk / p.Hkv);
	float k0 = 0.0f, k1 = 0.0f, v0 = 0.0f, v1 = 0.0f;
	for (int gi = 0; gi < G; gi++) {
		const i64 off = (((i64)b * p.Hq + hk * G + gi) * Tk + j) * D + d;
		const float2 a = *(const float2 *)(p.dkp + off), c = *(const float2 *)(p.dvp + off);
		k0 += a.x, k1 += a.y, v0 += c.x, v1 += c.y;
	}
	*(u32 *)((u16 *)p.dk + b * p.dks[0] + hk * p.dks[1] + (i64)j * p.dks[2] + d) = store2<BF>(k0 * p.scale, k1 * p.scale);
	*(u32 *)((u16 *)p.dv + b * p.dvs[0] + hk * p.dvs[1] + (i64)j * p.dvs[2] + d) = store2<BF>(v0, v1);
#endif
}
#define GQA_SUM_KERNEL(D, NAME, BF) \
	extern "C" __global__ void __launch_bounds__(256) attn_bwd_gqa_sum_##NAME(const AttnParams p) { gqa_sum<BF>(p); }

// The backward variants v5 and v6 (D = 64): the kernels of v2 and v3 with Q/dO (dQ) and K/V (dK/dV) fragments
// read from shared memory each step instead of held in registers, compiled for three blocks per SM
// (__launch_bounds__(128, 3): at most 168 registers, where the default kernels take 244-253 and so run two
// blocks, eight warps, per SM). Same arithmetic in the same order: results bit-identical to v2 (v5) and v3 (v6).
// v7 is v3 with the _h3v3 kernels: each step's tile in two halves (NH = 2: half the S and dP registers, same
// sums in the same order), at three blocks per SM with K/V fragments held (dK/dV) and Q/dO from shared memory
// (dQ); results bit-identical to v3 (v8, the D = 64 default, is v7 with the dK/dV kernel in quarter-tile steps,
// TC_V8_KERNELS above). v11 is v8 with rings of three tile stages (RS = 3: one barrier per step instead of two;
// _h3r3, _q3r3), same results. v12 is v8 with the dK/dV kernel at four blocks per SM (128 registers; K and V
// fragments from shared memory each step; _q4v3), same results.
#define TC_V5_KERNELS(D, NAME, BF)                                                                                \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_##NAME##_d##D##_o3(const AttnParams p) { dq1_tc<D, BF, false>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_o3(const AttnParams p) { dkdv_tc<D, BF, false, false, false>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_##NAME##_d##D##_o3v3(const AttnParams p) { dq1_tc<D, BF, false, true>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_o3v3(const AttnParams p) { dkdv_tc<D, BF, true, false, false>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_o3v3s(const AttnParams p) { dkdv_tc<D, BF, true, true, false>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_##NAME##_d##D##_h3v3(const AttnParams p) { dq1_tc<D, BF, false, true, 2>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_h3v3(const AttnParams p) { dkdv_tc<D, BF, true, false, true, 2>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_h3v3s(const AttnParams p) { dkdv_tc<D, BF, true, true, true, 2>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_##NAME##_d##D##_h3r3(const AttnParams p) { dq1_tc<D, BF, false, true, 2, 3>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_q3r3(const AttnParams p) { dkdv_tc<D, BF, true, false, true, 4, 3>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_##NAME##_d##D##_q3r3s(const AttnParams p) { dkdv_tc<D, BF, true, true, true, 4, 3>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 4) attn_bwd_dkdv_##NAME##_d##D##_q4v3(const AttnParams p) { dkdv_tc<D, BF, true, false, false, 4>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 4) attn_bwd_dkdv_##NAME##_d##D##_q4v3s(const AttnParams p) { dkdv_tc<D, BF, true, true, false, 4>(p); }

#if defined(ATTN_D) && ATTN_SET == 0
ATTN_FAMILY(TC_FWD_KERNEL)
#if ATTN_D == 64
ATTN_FAMILY(TC_V8_KERNELS)
ATTN_FAMILY(GQA_SUM_KERNEL)
#else
ATTN_FAMILY(TC_V2_KERNELS)
#endif
#elif defined(ATTN_D) && ATTN_SET == 2 && ATTN_D == 64
ATTN_FAMILY(TC_V2_KERNELS)
#elif defined(ATTN_D) && ATTN_SET == 1
ATTN_FAMILY(TC_BENCH_KERNELS)
#if ATTN_D == 64 && ATTN_BF
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d64_bc128(const AttnParams p) { fwd_tc<64, true, 2, 128, false, 1>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d64_sb(const AttnParams p) { fwd_tc<64, true, 2, 64, true, 1>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d64_m1(const AttnParams p) { fwd_tc<64, true, 1, 64, true, 2>(p); }
extern "C" __global__ void __launch_bounds__(128, 4) attn_fwd_bf16_d64_m1o4(const AttnParams p) { fwd_tc<64, true, 1, 64, true, 2>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d64_m1s3(const AttnParams p) { fwd_tc<64, true, 1, 64, true, 3>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d64_s3(const AttnParams p) { fwd_tc<64, true, 2, 64, true, 3>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) attn_fwd_bf16_d64_h3(const AttnParams p) { fwd_tc<64, true, 2, 64, false, 2, 2>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) attn_fwd_bf16_d64_h3s3(const AttnParams p) { fwd_tc<64, true, 2, 64, false, 3, 2>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_bf16_d64_smq(const AttnParams p) { dq1_tc<64, true, false>(p); }
#elif ATTN_D == 128 && ATTN_BF
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d128_m2(const AttnParams p) { fwd_tc<128, true, 2, 64, false, 1>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d128_db(const AttnParams p) { fwd_tc<128, true, 1, 64, false, 2>(p); }
#endif
#elif defined(ATTN_D) && ATTN_SET == 3
ATTN_FAMILY(TC_V3_KERNELS)
ATTN_FAMILY(GQA_SUM_KERNEL)
#if ATTN_D == 64 && ATTN_BF
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv2_bf16_d64(const AttnParams p) { dkdv2_tc<true, false>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv2_bf16_d64_s(const AttnParams p) { dkdv2_tc<true, true>(p); }
#elif ATTN_D == 64
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv2_f16_d64(const AttnParams p) { dkdv2_tc<false, false>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv2_f16_d64_s(const AttnParams p) { dkdv2_tc<false, true>(p); }
#endif
#elif defined(ATTN_D) && ATTN_SET == 5 && ATTN_D == 64
ATTN_FAMILY(TC_V5_KERNELS)
ATTN_FAMILY(GQA_SUM_KERNEL)
#endif

#ifndef ATTN_D
// ---------------------------------------------------------------------------------------------------------
// The general path.

#define REF_MAXD 256
#define REF_PER (REF_MAXD / 32)

// ref_rnd rounds a product input to the operands' half dtype (identity for F32), as tensor/cpu's reference
// rounds P' and dS.
__device__ __forceinline__ float ref_rnd(float x, int dt) { return dt == DT_F32 ? x : half_to_f32(f32_to_half(x, dt), dt); }

// ref_visible reports whether query i sees key j, and its additive mask value.
__device__ __forceinline__ bool ref_visible(const AttnParams &p, i64 b, i64 i, i64 j, float &mk) {
	if (p.causal && j > i + (p.Tk - p.Tq)) return false;
	if (p.seg && p.seg[b * p.Tq + i] != p.seg[b * p.Tk + j]) return false;
	mk = p.mask ? p.mask[b * p.Tk + j] : 0.0f;
	return mk != NEG_INF;
}

// ref_dot returns Σ_d x[xb + d]·y[yb + d] over the warp's lanes (x held in registers xr).
__device__ __forceinline__ float ref_dot(const float xr[REF_PER], const void *y, int dt, i64 yb, int D, int lane) {
	float s = 0.0f;
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) s += xr[k] * ld(y, dt, yb + d);
	}
	return warp_sum(s);
}

__device__ __forceinline__ void ref_load(float r[REF_PER], const void *x, int dt, i64 base, int D, int lane) {
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		r[k] = d < D ? ld(x, dt, base + d) : 0.0f;
	}
}

// attn_fwd_ref: one warp per query row; a first sweep over the keys finds the row's max and sum (online, FP32,
// expf), the second accumulates O = Σ_j rnd(P_ij·f_ij)·V_j with P normalised first, as tensor/cpu rounds it.
extern "C" __global__ void attn_fwd_ref(const AttnParams p) {
	i64 i = (i64)blockIdx.x * 8 + threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x % 32, dt = (int)p.dtype, D = (int)p.D;
	if (i >= p.Tq) return;
	i64 hk = h / (p.Hq / p.Hkv);
	float q[REF_PER], o[REF_PER];
	ref_load(q, p.q, dt, b * p.qs[0] + h * p.qs[1] + i * p.qs[2], D, lane);
#pragma unroll
	for (int k = 0; k < REF_PER; k++) o[k] = 0.0f;
	float m = NEG_INF, l = 0.0f;
	u32 thr = keep_thr(p.p);
	u64 rowbase = ((u64)(b * p.Hq + h) * (u64)p.Tq + (u64)i) * (u64)p.Tk;
	for (i64 j = 0; j < p.Tk; j++) {
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		float sc = ref_dot(q, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane) * p.scale + mk;
		if (sc == NEG_INF) continue;
		float mn = fmaxf(m, sc);
		l = l * expf(m - mn) + expf(sc - mn);
		m = mn;
	}
	float inv = l > 0.0f ? 1.0f / l : 0.0f;
	for (i64 j = 0; j < p.Tk && l > 0.0f; j++) {
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		float sc = ref_dot(q, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane) * p.scale + mk;
		if (sc == NEG_INF) continue;
		float f = (p.p > 0.0f && !keep1(rowbase + (u64)j, p, thr)) ? 0.0f : p.dscale;
		float pd = ref_rnd(expf(sc - m) * inv * f, dt);
		if (pd == 0.0f) continue;
		i64 vb = b * p.vs[0] + hk * p.vs[1] + j * p.vs[2];
#pragma unroll
		for (int k = 0; k < REF_PER; k++) {
			int d = lane + 32 * k;
			if (d < D) o[k] += pd * ld(p.v, dt, vb + d);
		}
	}
	i64 obase = b * p.os[0] + h * p.os[1] + i * p.os[2];
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) st(p.o, dt, obase + d, o[k]);
	}
	if (lane == 0) p.lse[(b * p.Hq + h) * p.Tq + i] = l > 0.0f ? m + logf(l) : NEG_INF;
}

// attn_bwd_dq_ref: one warp per query row: dQ_i = scale·Σ_j dS_ij·K_j.
extern "C" __global__ void attn_bwd_dq_ref(const AttnParams p) {
	i64 i = (i64)blockIdx.x * 8 + threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x % 32, dt = (int)p.dtype, D = (int)p.D;
	if (i >= p.Tq) return;
	i64 hk = h / (p.Hq / p.Hkv), row = (b * p.Hq + h) * p.Tq + i;
	float q[REF_PER], dO[REF_PER], dq[REF_PER];
	ref_load(q, p.q, dt, b * p.qs[0] + h * p.qs[1] + i * p.qs[2], D, lane);
	ref_load(dO, p.dout, dt, b * p.dos[0] + h * p.dos[1] + i * p.dos[2], D, lane);
#pragma unroll
	for (int k = 0; k < REF_PER; k++) dq[k] = 0.0f;
	float lse = p.lse[row], dl = 0.0f;
	u32 thr = keep_thr(p.p);
	u64 rowbase = (u64)row * (u64)p.Tk;
	for (i64 j = 0; j < p.Tk && lse != NEG_INF; j++) { // Δ = Σ_j P_ij·dP_ij
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		float sc = ref_dot(q, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane) * p.scale + mk;
		float dpv = ref_dot(dO, p.v, dt, b * p.vs[0] + hk * p.vs[1] + j * p.vs[2], D, lane);
		if (p.p > 0.0f) dpv = keep1(rowbase + (u64)j, p, thr) ? dpv * p.dscale : 0.0f;
		dl += expf(sc - lse) * dpv;
	}
	if (lane == 0) p.delta[row] = dl;
	for (i64 j = 0; j < p.Tk && lse != NEG_INF; j++) {
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		i64 kb = b * p.ks[0] + hk * p.ks[1] + j * p.ks[2];
		float sc = ref_dot(q, p.k, dt, kb, D, lane) * p.scale + mk;
		float pr = expf(sc - lse);
		float dpv = ref_dot(dO, p.v, dt, b * p.vs[0] + hk * p.vs[1] + j * p.vs[2], D, lane);
		if (p.p > 0.0f) dpv = keep1(rowbase + (u64)j, p, thr) ? dpv * p.dscale : 0.0f;
		float ds = ref_rnd(pr * (dpv - dl), dt);
#pragma unroll
		for (int k = 0; k < REF_PER; k++) {
			int d = lane + 32 * k;
			if (d < D) dq[k] += ds * ld(p.k, dt, kb + d);
		}
	}
	i64 base = b * p.dqs[0] + h * p.dqs[1] + i * p.dqs[2];
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) st(p.dq, dt, base + d, dq[k] * p.scale);
	}
}

// attn_bwd_dkdv_ref: one warp per key row of one KV head: dV_j = Σ_h Σ_i P'_ij·dO_i, dK_j = scale·Σ_h Σ_i
// dS_ij·Q_i over the group's query heads h in order.
extern "C" __global__ void attn_bwd_dkdv_ref(const AttnParams p) {
	i64 j = (i64)blockIdx.x * 8 + threadIdx.x / 32, hk = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x % 32, dt = (int)p.dtype, D = (int)p.D;
	if (j >= p.Tk) return;
	i64 G = p.Hq / p.Hkv;
	float kr[REF_PER], vr[REF_PER], dk[REF_PER], dv[REF_PER];
	ref_load(kr, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane);
	ref_load(vr, p.v, dt, b * p.vs[0] + hk * p.vs[1] + j * p.vs[2], D, lane);
#pragma unroll
	for (int k = 0; k < REF_PER; k++) dk[k] = dv[k] = 0.0f;
	u32 thr = keep_thr(p.p);
	for (i64 h = hk * G; h < (hk + 1) * G; h++)
		for (i64 i = 0; i < p.Tq; i++) {
			float mk;
			if (!ref_visible(p, b, i, j, mk)) continue;
			i64 row = (b * p.Hq + h) * p.Tq + i;
			float lse = p.lse[row];
			if (lse == NEG_INF) continue;
			i64 qb = b * p.qs[0] + h * p.qs[1] + i * p.qs[2], ob = b * p.dos[0] + h * p.dos[1] + i * p.dos[2];
			float sc = ref_dot(kr, p.q, dt, qb, D, lane) * p.scale + mk;
			float pr = expf(sc - lse), pd = pr;
			float dpv = ref_dot(vr, p.dout, dt, ob, D, lane);
			if (p.p > 0.0f) {
				bool kp = keep1((u64)row * (u64)p.Tk + (u64)j, p, thr);
				pd = kp ? pr * p.dscale : 0.0f;
				dpv = kp ? dpv * p.dscale : 0.0f;
			}
			pd = ref_rnd(pd, dt);
			float ds = ref_rnd(pr * (dpv - p.delta[row]), dt);
#pragma unroll
			for (int k = 0; k < REF_PER; k++) {
				int d = lane + 32 * k;
				if (d < D) {
					dv[k] += pd * ld(p.dout, dt, ob + d);
					dk[k] += ds * ld(p.q, dt, qb + d);
				}
			}
		}
	i64 kb = b * p.dks[0] + hk * p.dks[1] + j * p.dks[2], vb = b * p.dvs[0] + hk * p.dvs[1] + j * p.dvs[2];
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) {
			st(p.dk, dt, kb + d, dk[k] * p.scale);
			st(p.dv, dt, vb + d, dv[k]);
		}
	}
}
#endif // !ATTN_D
