// attention.cuh: what the fused attention kernels share (kernels/attention_fwd.cu, attention_bwd.cu,
// attention_ref.cu; tensor.Backend.Attention and AttentionBackward, cuda/attention.go): the AttnParams argument
// block, the dropout keep bits (the Dropout op's Philox stream) and the tensor-core helpers (cp.async, ldmatrix,
// mma.sync, XOR-swizzled tiles, keep-bit masks in shared memory).
//
// The algorithm is FlashAttention-2's (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
// Partitioning", 2023): the (Tq, Tk) scores never leave registers; the forward keeps a running row max and sum
// (online softmax) and writes O and the FP32 log-sum-exp; the backward recomputes P from the LSE.
//
// Numerics (docs/ATTENTION.md): S = Q·Kᵀ·scale + mask and the softmax statistics are FP32 in registers; P is
// rounded to the half dtype only as the A operand of P·V (forward) and of dV = P'ᵀ·dO, dS only as the A
// operand of dQ = dS·K and dK = dSᵀ·Q; O, dQ, dK, dV are rounded once on store (common.cuh's exact RNE).
// Without a mask and with scale > 0 the exponent is computed as FlashAttention does,
// exp2(s·scale·log2 e − m), one FMA per score; with a mask the natural-log domain is kept
// (exp2((s·scale + mask − m)·log2 e)) so a finfo.min mask cannot overflow. A row with no visible key gives
// O = 0 and LSE = −Inf; a NaN score of a visible key makes the row sum NaN, so the row's O and LSE are NaN
// (fmaxf drops a NaN from the row max, not from the sum) and its gradients follow. Dropout keeps element
// (b, h, i, j) exactly when the Dropout op keeps element n = ((b·Hq + h)·Tq + i)·Tk + j (tensor.PhiloxKeep:
// 16-bit slice n%8 of the Philox block at counter offset + n/8).
#pragma once
#include "common.cuh"
#include "philox.cuh"
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
	i64 lpt;       // backward with ORD: (batch, head) pairs per block-order chunk (order_block)
	i64 ewgen;     // warpgroup backward: every tile through the general elementwise code (TUNE_ATTN_BWD_EW=general)
};

// keep_thr is the integer form of PhiloxKeep's test (common.cuh's philox_thr): slice·2⁻¹⁶ ≥ p ⇔ slice ≥
// ceil(p·2¹⁶).
__device__ __forceinline__ u32 keep_thr(float p) { return philox_thr(p); }

__device__ __forceinline__ uint2 attn_key(const AttnParams &p) { return make_uint2((u32)p.seed, (u32)(p.seed >> 32)); }

// keep1 reports whether dense element n survives dropout (slice n % 8 of the Philox block at offset + n/8).
__device__ __forceinline__ bool keep1(u64 n, const AttnParams &p, u32 thr) {
	return philox_slice(philox_block(p.offset + tune_philox_base + (n >> 3), attn_key(p)), (int)(n & 7)) >= thr;
}

// keep2 draws elements n and n+1 with one Philox block unless they straddle two.
__device__ __forceinline__ void keep2(u64 n, const AttnParams &p, u32 thr, bool &k0, bool &k1) {
	u64 ctr = p.offset + tune_philox_base + (n >> 3);
	uint2 key = attn_key(p);
	uint4 blk = philox_block(ctr, key);
	int r = (int)(n & 7);
	k0 = philox_slice(blk, r) >= thr;
	if (r == 7) k1 = philox_slice(philox_block(ctr + 1, key), 0) >= thr;
	else k1 = philox_slice(blk, r + 1) >= thr;
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

// key_blocks is the number of BC-key steps of the query block at q0 (BR rows): all of Tk, or under causal
// masking up to the last key its last row sees (0 when no row sees any key).
template <int BR, int BC> __device__ __forceinline__ int key_blocks(const AttnParams &p, int Tq, int Tk, int q0, int shift) {
	int nb = (Tk + BC - 1) / BC;
	if (p.causal) {
		int last = min(Tq - 1, q0 + BR - 1) + shift;
		nb = last < 0 ? 0 : min(nb, last / BC + 1);
	}
	return nb;
}

// unmasked_form reports whether a block whose scores use the keys [j0, j1) of batch member b takes the unmasked
// ("fast") form: scale > 0 and no mask, or a mask that is zero (±0) at every one of those keys. Adding a zero
// changes no score, so such a block computes what the same call without a mask computes, one FMA per score
// cheaper than the masked form and without loading the mask. Unpadded rows qualify (every row of a fixed-length
// or packed batch, the longest of a padded one), as do the dK/dV kernels' key blocks left of the padding;
// transformers' SDPA path drops an all-ones mask the same way, batch-wide. A NaN entry is not zero. Every
// thread of the block calls it (a barrier).
__device__ __forceinline__ bool unmasked_form(const AttnParams &p, int b, int j0, int j1) {
	if (!(p.scale > 0.0f)) return false;
	if (p.mask == 0) return true;
	int nz = 0;
	for (int j = j0 + (int)threadIdx.x; j < j1; j += (int)blockDim.x) nz |= p.mask[(i64)b * p.Tk + j] != 0.0f;
	return __syncthreads_or(nz) == 0;
}

// unmasked_keys is unmasked_form for a dK/dV block, whose threads have loaded the mask at their two key rows
// (mk: 0 past Tk), every key of the block among them, so one vote decides without loading the mask again.
__device__ __forceinline__ bool unmasked_keys(const AttnParams &p, const float (&mk)[2]) {
	if (!(p.scale > 0.0f)) return false;
	if (p.mask == 0) return true;
	return __syncthreads_or(mk[0] != 0.0f || mk[1] != 0.0f) == 0;
}

// bwd_rows loads the backward's per-row state of query rows i0 and i0 + 8 (head row base hbase = (b·Hq + h)·Tq):
// the LSE lv (log2 domain when fast; +Inf for a row past Tq or with no visible key), the segment id si and
// the dropout element index of the row's first key rowb.
__device__ __forceinline__ void bwd_rows(const AttnParams &p, int b, int Tq, int Tk, int i0, bool fast, u64 hbase,
					 float lv[2], int si[2], u64 rowb[2]) {
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int i = i0 + hh * 8;
		lv[hh] = POS_INF, si[hh] = 0;
		rowb[hh] = (hbase + (u64)i) * (u64)Tk;
		if (i < Tq) {
			float x = p.lse[(i64)hbase + i];
			lv[hh] = x == NEG_INF ? POS_INF : (fast ? x * LOG2E : x);
			if (p.seg) si[hh] = p.seg[(i64)b * Tq + i];
		}
	}
}

// delta_rows returns in dt Δ̃ = dO·O of the thread's tile rows r0 and r0 + 8 (query q0 + r): the quad's four
// threads (tig) take D/4 columns each (dO from the swizzled shared tile sO, O from global memory, 16 bytes at a
// time), summed by two shuffles; rows ≥ Tq give 0. All 32 lanes must call it.
template <int D, bool BF>
__device__ __forceinline__ void delta_rows(const AttnParams &p, const u16 *sO, int b, int h, int Tq, int q0, int r0, int tig, float dt[2]) {
	const u16 *O = (const u16 *)p.o + b * p.os[0] + h * p.os[1];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = r0 + hh * 8, i = q0 + r;
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

// keep16 returns keep_word's 16 bits from the two Philox blocks of elements n … n+15 (n % 8 == 0) with thr ≤
// 0xffff: slice 2k + 1 (a high half) is compared as the whole word against thr·2¹⁶ and slice 2k (a low half)
// shifted up, the same comparisons without extracting either half.
__device__ __forceinline__ u32 keep16(uint4 b0, uint4 b1, u32 thr) {
	const u32 th = thr << 16, v[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
	u32 m = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) m |= ((u32)((v[k] << 16) >= th) << (2 * k)) | ((u32)(v[k] >= th) << (2 * k + 1));
	return m;
}

// keep_word returns the 16 keep bits of dense elements n … n+15 (bit k for n + k), n % 4 == 0: two Philox
// blocks when n % 8 == 0, else three (slices 4 … 7 of the first, all of the second, 0 … 3 of the third).
__device__ __forceinline__ u32 keep_word(u64 n, u64 offset, uint2 key, u32 thr) {
	u64 ctr = offset + (n >> 3);
	uint4 b0 = philox_block(ctr, key), b1 = philox_block(ctr + 1, key);
	u32 m = 0;
	if ((n & 7) == 0) {
#pragma unroll
		for (int k = 0; k < 8; k++) m |= ((u32)(philox_slice(b0, k) >= thr) << k) | ((u32)(philox_slice(b1, k) >= thr) << (8 + k));
	} else {
		uint4 b2 = philox_block(ctr + 2, key);
#pragma unroll
		for (int k = 0; k < 4; k++) m |= ((u32)(philox_slice(b0, 4 + k) >= thr) << k) | ((u32)(philox_slice(b2, k) >= thr) << (12 + k));
#pragma unroll
		for (int k = 0; k < 8; k++) m |= (u32)(philox_slice(b1, k) >= thr) << (4 + k);
	}
	return m;
}

// draw_bits fills bits (ROWS rows of COLS/16 words) with the dropout keep bits of a (query, key) tile: bit
// c % 16 of word r·COLS/16 + c/16 keeps dense element (hbase + r0 + r)·Tk + c0 + c. Needs Tk % 4 == 0 (and c0
// % 16 == 0), so the 16 keys of a word start at slice 0 or 4 of a Philox block (keep_word): a Philox block per
// eight scores, shared by the block's threads through shared memory.
// With gb (the backward's p.bits) the words of rows r0 + r < Tq are also stored there, at
// word (hbase + r0 + r)·bitsw + c0/16 + c/16 (those below bitsw), for load_bits.
template <int ROWS, int COLS>
__device__ __forceinline__ void draw_bits(u16 *bits, const AttnParams &p, u64 hbase, int r0, int c0, u32 thr, int tid, u16 *gb = nullptr) {
	constexpr int W = COLS / 16;
	uint2 key = attn_key(p);
#pragma unroll 1
	for (int w = tid; w < ROWS * W; w += 128) {
		u64 n = (hbase + (u64)(r0 + w / W)) * (u64)p.Tk + (u64)(c0 + (w % W) * 16);
		u32 m = keep_word(n, p.offset + tune_philox_base, key, thr);
		bits[w] = (u16)m;
		if (gb && r0 + w / W < p.Tq && (i64)(c0 / 16 + w % W) < p.bitsw) gb[(hbase + (u64)(r0 + w / W)) * (u64)p.bitsw + (u64)(c0 / 16 + w % W)] = (u16)m;
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

// order_block maps an ORD kernel's linear block index to (row block rb, pair) for a grid of nrb row blocks of
// npair (batch, head) pairs: pairs in chunks of p.lpt; within a chunk the row block varies slowest, so every
// pair's row block 0 comes first, then row block 1, ... With the kernel's heaviest row block at rb = 0
// (causal) this schedules the longest blocks first (longest-processing-time order, as FlashAttention-3
// schedules causal blocks), while a chunk's K/V (or Q/dO) stay few enough to live in L2. p.lpt = 1 (always
// without causal masking, where all blocks are equally long) is the row block fastest.
__device__ __forceinline__ void order_block(const AttnParams &p, int nrb, int npair, int &rb, int &pair) {
	const int C = (int)p.lpt, idx = blockIdx.x, chunk = idx / (C * nrb);
	const int cs = min(C, npair - chunk * C), w = idx - chunk * C * nrb;
	rb = w / cs;
	pair = chunk * C + w % cs;
}
