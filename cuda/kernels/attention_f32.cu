// attention_f32.cu: the row work of the FP32 fused attention path (cuda/attention_f32.go). The products
// S = Scale·Q·Kᵀ, O = P'·V and, in the backward, dP' = dO·Vᵀ, dV = P'ᵀ·dO, dQ = Scale·dS·K, dK = Scale·dSᵀ·Q
// are FP32 cuBLASLt GEMMs over a chunk of (batch, head) pairs whose score rows live in a bounded scratch
// buffer; these kernels turn a chunk's scores into probabilities (forward) or into P' and dS (backward), one
// warp per score row, with the visibility rules, dropout draws and numerics of the general kernels
// (attention.cu's attn_*_ref): FP32 expf/logf, P normalised before dropout scales it, Δ_i = Σ_j P_ij·dP_ij in
// FP32 (docs/ATTENTION.md). Every sum runs in a fixed order: results are bit-identical from run to run.
//
// attn_f32_ptrs (at the end) writes the pointer arrays of a chunk of (batch member, head) pairs whose products
// run as cublasSgemmBatched.
//
// A chunk is njobs score blocks of rows rows each; job c is query head h = h0 + c·dh of batch member
// b = b0 + c·db (h ≥ Hq counts pairs: head h % Hq of member b + h / Hq), and row r of its block is query
// i = i0 + r. Block c's row r starts at element
// (c·rows + r)·ld of the scratch; its first n columns are keys 0 .. n−1 (keys ≥ n are not visible to any row of
// the chunk: causal); the kernels zero the padding columns up to the next multiple of 4 and leave the rest, which
// no product reads.
#include "common.cuh"
#include "philox.cuh"

// F32Rows is the argument block of the row kernels (mirrored by f32Rows in cuda/attention_f32.go; every field
// 8 bytes, or two 4-byte values, so the layouts agree without padding).
struct F32Rows {
	float *s;          // scores (in), P' (out)
	float *dp;         // backward: dP' = dO·Vᵀ (in), dS (out); nullptr in the forward
	float *lse;        // (B, Hq, Tq): written by the forward, read by the backward
	const float *mask; // (B, Tk) additive key mask or nullptr
	const int *seg;    // (B, T) segment ids or nullptr
	float *zero;       // rows to zero when n == 0 (O in the forward, dQ in the backward) or nullptr
	i64 zjob, zrow;    // element strides of zero's jobs and rows
	i64 ld, n, rows, njobs;
	i64 b0, db, h0, dh, i0;
	i64 Hq, Tq, Tk, D, causal;
	float p, dscale; // dropout probability, 1/(1 − p)
	u64 seed, offset;
	u32 *bits; // with dropout and Tk ≤ 512: the caller's KeepBits, bitsw words per LSE row (bit j%32 of
	i64 bitsw; // word j/32 is key j's keep flag): the forward stores its draws, the backward reads them; or nullptr
};

// f32_keep_thr is PhiloxKeep's test in integer form: slice·2⁻¹⁶ ≥ p ⇔ slice ≥ ceil(p·2¹⁶) (common.cuh's philox_thr).
__device__ __forceinline__ u32 f32_keep_thr(float p) { return philox_thr(p); }

// f32_keep4 returns the keep flags (bit k for element n + k) of dense elements n .. n+3 of the dropout mask:
// slice (n + k) % 8 of the Philox block at counter offset + (n + k) / 8, one block when n % 8 ≤ 4, else two.
__device__ __forceinline__ u32 f32_keep4(const F32Rows &p, u64 n, u32 thr) {
	uint2 key = make_uint2((u32)p.seed, (u32)(p.seed >> 32));
	u64 c0 = p.offset + tune_philox_base + (n >> 3);
	int r = (int)(n & 7);
	uint4 a = philox_block(c0, key), b = a;
	if (r > 4) b = philox_block(c0 + 1, key);
	u32 bits = 0;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		int s = r + k;
		if ((s < 8 ? philox_slice(a, s) : philox_slice(b, s - 8)) >= thr) bits |= 1u << k;
	}
	return bits;
}

// F32Row is one score row's coordinates.
struct F32Row {
	i64 b, h, i;
	float *s, *dp;
	u64 nbase;         // dense dropout index of key 0: ((b·Hq + h)·Tq + i)·Tk
	i64 lrow;          // index into LSE
	const float *mrow; // the row's mask (nullptr without one)
	bool fast;         // no causal limit, no segments, and the mask row 16-byte aligned
	bool ok;           // the warp has a row
};

// f32_row finds the warp's row (dividing in 32 bits when the chunk's rows allow it).
__device__ __forceinline__ F32Row f32_row(const F32Rows &p) {
	F32Row w;
	i64 gr = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	w.ok = gr < p.njobs * p.rows;
	if (!w.ok) gr = 0;
	i64 c, r;
	if (p.njobs * p.rows <= 0xffffffffll) {
		u32 q = (u32)gr / (u32)p.rows;
		c = q, r = gr - (i64)q * p.rows;
	} else {
		c = gr / p.rows, r = gr - c * p.rows;
	}
	w.b = p.b0 + c * p.db, w.h = p.h0 + c * p.dh, w.i = p.i0 + r;
	if (w.h >= p.Hq) { // a chunk of merged jobs (cuda/attention_f32.go's f32Merged): pair h = b·Hq + h
		w.b += w.h / p.Hq;
		w.h %= p.Hq;
	}
	w.s = p.s + gr * p.ld;
	w.dp = p.dp ? p.dp + gr * p.ld : nullptr;
	w.lrow = (w.b * p.Hq + w.h) * p.Tq + w.i;
	w.nbase = (u64)w.lrow * (u64)p.Tk;
	w.mrow = p.mask ? p.mask + w.b * p.Tk : nullptr;
	w.fast = !p.causal && !p.seg && ((unsigned long long)w.mrow & 15) == 0;
	return w;
}

// f32_visible reports whether the row's query sees key j (< n), with its mask value: attn_*_ref's ref_visible.
__device__ __forceinline__ bool f32_visible(const F32Rows &p, const F32Row &w, i64 j, float &mk) {
	if (j >= p.n) return false;
	if (p.causal && j > w.i + (p.Tk - p.Tq)) return false;
	if (p.seg && p.seg[w.b * p.Tq + w.i] != p.seg[w.b * p.Tk + j]) return false;
	mk = p.mask ? p.mask[w.b * p.Tk + j] : 0.0f;
	return mk != NEG_INF;
}

// f32_zero_row writes zeros over the row's D outputs in p.zero (a block of keys none of which is visible).
__device__ __forceinline__ void f32_zero_row(const F32Rows &p, int lane) {
	i64 gr = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	i64 c = gr / p.rows, r = gr - c * p.rows;
	float *z = p.zero + c * p.zjob + r * p.zrow;
	for (i64 d = lane; d < p.D; d += 32) z[d] = 0.0f;
}

// f32_scores4 returns keys j0 .. j0+3 of the row as s_ij + mask_j, −Inf where not visible (j0 % 4 == 0 and
// ld % 4 == 0, so the four are one aligned float4 of the row).
// With w.fast and all four keys below n, visibility is the mask's alone: one float4 of it (x + 0 without a mask,
// as the general test adds mk = 0).
__device__ __forceinline__ float4 f32_scores4(const F32Rows &p, const F32Row &w, i64 j0) {
	float4 v = *(const float4 *)(w.s + j0);
	if (w.fast && j0 + 4 <= p.n) {
		float4 mk = w.mrow ? *(const float4 *)(w.mrow + j0) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		return make_float4(mk.x == NEG_INF ? NEG_INF : v.x + mk.x, mk.y == NEG_INF ? NEG_INF : v.y + mk.y,
		                   mk.z == NEG_INF ? NEG_INF : v.z + mk.z, mk.w == NEG_INF ? NEG_INF : v.w + mk.w);
	}
	float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int k = 0; k < 4; k++) {
		float mk;
		x[k] = f32_visible(p, w, j0 + k, mk) ? x[k] + mk : NEG_INF;
	}
	return make_float4(x[0], x[1], x[2], x[3]);
}

__device__ __forceinline__ float f32_get(float4 v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

// f32_softmax_row is attn_f32_softmax's work on one row, with the row's scores held in QC float4 registers per
// lane when the row has at most 128·QC columns (else read again from the scratch in each pass; cached, the
// exponentials too): the row max m, l = Σ_j exp(s_ij − m) (each lane's part, then a warp sum: a fixed order),
// LSE = m + log l (−Inf when no key is visible), and P'_ij = exp(s_ij − m)·(1/l)·f_ij written over S, f_ij the
// dropout factor keep_ij/(1 − p) (0 for keys not visible). A NaN score of a visible key makes m, l, LSE and the
// row's P' NaN (docs/ATTENTION.md: NaN propagates as in softmax); the factor multiplies, so a dropped key's P' is
// NaN there too, as tensor/cpu computes it.
template <int QC>
__device__ __forceinline__ void f32_softmax_row(const F32Rows &p, const F32Row &w, int lane) {
	float4 c[QC > 0 ? QC : 1];
	const i64 lim = (p.n + 3) & ~(i64)3; // columns n .. lim−1 are padding; the products never read past n
	const i64 nq = (lim + 127) / 128;
	const bool cached = nq <= QC;
	float m = NEG_INF;
	if (cached) {
#pragma unroll
		for (int q = 0; q < QC; q++) {
			i64 j0 = 4 * lane + 128 * q;
			c[q] = j0 < lim ? f32_scores4(p, w, j0) : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
			m = maxnan(m, maxnan(maxnan(c[q].x, c[q].y), maxnan(c[q].z, c[q].w)));
		}
	} else {
		for (i64 j0 = 4 * lane; j0 < lim; j0 += 128) {
			float4 v = f32_scores4(p, w, j0);
			m = maxnan(m, maxnan(maxnan(v.x, v.y), maxnan(v.z, v.w)));
		}
	}
	m = warp_max(m);
	float l = 0.0f;
	if (m != NEG_INF) {
		if (cached) { // c[q] becomes the exponentials (0 for keys not visible)
#pragma unroll
			for (int q = 0; q < QC; q++) {
				float e[4];
#pragma unroll
				for (int k = 0; k < 4; k++) {
					float sc = f32_get(c[q], k);
					e[k] = sc == NEG_INF ? 0.0f : expf(sc - m);
					l += e[k];
				}
				c[q] = make_float4(e[0], e[1], e[2], e[3]);
			}
		} else {
			for (i64 j0 = 4 * lane; j0 < lim; j0 += 128) {
				float4 v = f32_scores4(p, w, j0);
#pragma unroll
				for (int k = 0; k < 4; k++) {
					float sc = f32_get(v, k);
					l += sc == NEG_INF ? 0.0f : expf(sc - m);
				}
			}
		}
	}
	l = warp_sum(l);
	// l == 0: no key visible (m = −Inf), P' = 0 and LSE = −Inf; l NaN: a NaN row, everything NaN.
	float inv = l != 0.0f ? 1.0f / l : 0.0f;
	if (lane == 0) p.lse[w.lrow] = l != 0.0f ? m + logf(l) : NEG_INF;
	u32 thr = f32_keep_thr(p.p);
	// out4 writes P' of keys j0 .. j0+3 from their exponentials (cached) or, with exp, from their scores, and
	// returns their keep flags.
	auto out4 = [&](i64 j0, float4 v, bool exp) -> u32 {
		u32 keep = p.p > 0.0f && j0 < p.n ? f32_keep4(p, w.nbase + (u64)j0, thr) : 0xfu;
		float o[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float x = f32_get(v, k), f = (keep >> k & 1u) ? p.dscale : 0.0f;
			if (exp) x = (l == 0.0f || x == NEG_INF) ? 0.0f : expf(x - m);
			o[k] = (l == 0.0f || x == 0.0f) ? 0.0f : x * inv * f; // l == 0: c still holds the (−Inf) scores
		}
		*(float4 *)(w.s + j0) = make_float4(o[0], o[1], o[2], o[3]);
		return keep;
	};
	if (cached) {
#pragma unroll
		for (int q = 0; q < QC; q++) {
			i64 j0 = 4 * lane + 128 * q;
			u32 kp = j0 < lim ? out4(j0, c[q], false) : 0u;
			if (p.bits) { // eight lanes' flags make one word (every lane of the warp takes part)
				u32 v = (kp & 0xfu) << (4 * (lane & 7));
				v |= __shfl_xor_sync(0xffffffffu, v, 1);
				v |= __shfl_xor_sync(0xffffffffu, v, 2);
				v |= __shfl_xor_sync(0xffffffffu, v, 4);
				if ((lane & 7) == 0 && j0 < lim) p.bits[w.lrow * p.bitsw + (j0 >> 5)] = v;
			}
		}
	} else {
		for (i64 j0 = 4 * lane; j0 < lim; j0 += 128) out4(j0, f32_scores4(p, w, j0), true);
	}
}

// attn_f32_softmax_{c4,c0}: one warp per score row of the chunk (f32_softmax_row; c4 keeps rows of up to 512
// columns in registers). A block with no visible key (n == 0) writes LSE = −Inf and zeros p.zero's rows (O).
#define F32_SOFTMAX(QC)                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) attn_f32_softmax_c##QC(const F32Rows p) {                  \
		F32Row w = f32_row(p);                                                                                   \
		int lane = threadIdx.x % 32;                                                                             \
		if (!w.ok) return;                                                                                       \
		if (p.n == 0) {                                                                                          \
			if (lane == 0) p.lse[w.lrow] = NEG_INF;                                                              \
			if (p.zero) f32_zero_row(p, lane);                                                                   \
			return;                                                                                              \
		}                                                                                                        \
		f32_softmax_row<QC>(p, w, lane);                                                                         \
	}
F32_SOFTMAX(4)
F32_SOFTMAX(0)

// f32_dsoftmax_row is attn_f32_dsoftmax's work on one row (P and dP held in registers as f32_softmax_row holds
// S): with P_ij = exp(s_ij − LSE_i) (0 for keys not visible and for rows with LSE = −Inf) and dP_ij =
// dP'_ij·keep_ij/(1 − p), Δ_i = Σ_j P_ij·dP_ij (each lane's part, then a warp sum), dS_ij = P_ij·(dP_ij − Δ_i)
// written over dP' and P'_ij = P_ij·keep_ij/(1 − p) over S. A NaN row (LSE NaN) gets NaN P, dS and P' at every
// visible key, so its dQ and the dK, dV of the keys it sees are NaN.
template <int QC>
__device__ __forceinline__ void f32_dsoftmax_row(const F32Rows &p, const F32Row &w, int lane) {
	float4 cp[QC > 0 ? QC : 1], cd[QC > 0 ? QC : 1];
	const i64 lim = (p.n + 3) & ~(i64)3; // columns n .. lim−1 are padding; the products never read past n
	const i64 nq = (lim + 127) / 128;
	const bool cached = nq <= QC;
	const float lse = p.lse[w.lrow];
	const u32 thr = f32_keep_thr(p.p);
	// pd4 computes P and dP (dropout applied) of keys j0 .. j0+3 and their keep flags.
	auto pd4 = [&](i64 j0, float4 &pr, float4 &dp, u32 &keep) {
		if (p.bits) // the forward's draws (keys the forward's block did not reach are not visible here)
			keep = p.bits[w.lrow * p.bitsw + (j0 >> 5)] >> (j0 & 31) & 0xfu;
		else
			keep = p.p > 0.0f && j0 < p.n ? f32_keep4(p, w.nbase + (u64)j0, thr) : 0xfu;
		float4 s = f32_scores4(p, w, j0), d = *(const float4 *)(w.dp + j0);
		float a[4], b[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float sc = f32_get(s, k);
			a[k] = (sc == NEG_INF || lse == NEG_INF) ? 0.0f : expf(sc - lse);
			b[k] = f32_get(d, k);
			if (p.p > 0.0f) b[k] = b[k] * ((keep >> k & 1u) ? p.dscale : 0.0f); // the factor multiplies (NaN stays)
			if (a[k] == 0.0f) b[k] = 0.0f; // keys not visible: no NaN from an unread dP'
		}
		pr = make_float4(a[0], a[1], a[2], a[3]);
		dp = make_float4(b[0], b[1], b[2], b[3]);
	};
	float dl = 0.0f;
	u32 keeps = 0; // cached: bit 4q + k is key 4·lane + 128q + k's keep flag
	if (cached) {
#pragma unroll
		for (int q = 0; q < QC; q++) {
			i64 j0 = 4 * lane + 128 * q;
			u32 kp = 0;
			if (j0 < lim) pd4(j0, cp[q], cd[q], kp);
			else cp[q] = cd[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
			keeps |= (kp & 0xfu) << (4 * q);
			dl += cp[q].x * cd[q].x + cp[q].y * cd[q].y + cp[q].z * cd[q].z + cp[q].w * cd[q].w;
		}
	} else {
		for (i64 j0 = 4 * lane; j0 < lim; j0 += 128) {
			float4 a, b;
			u32 kp;
			pd4(j0, a, b, kp);
			dl += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
		}
	}
	dl = warp_sum(dl);
	// out4 writes P' and dS of keys j0 .. j0+3 from their P (a), dP (b) and keep flags.
	auto out4 = [&](i64 j0, float4 a, float4 b, u32 kp) {
		float pd[4], ds[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float pr = f32_get(a, k);
			pd[k] = p.p > 0.0f ? pr * ((kp >> k & 1u) ? p.dscale : 0.0f) : pr; // a NaN row's dropped P' is NaN
			ds[k] = pr * (f32_get(b, k) - dl);
		}
		*(float4 *)(w.s + j0) = make_float4(pd[0], pd[1], pd[2], pd[3]);
		*(float4 *)(w.dp + j0) = make_float4(ds[0], ds[1], ds[2], ds[3]);
	};
	if (cached) {
#pragma unroll
		for (int q = 0; q < QC; q++)
			if (4 * lane + 128 * q < lim) out4(4 * lane + 128 * q, cp[q], cd[q], keeps >> (4 * q));
	} else {
		for (i64 j0 = 4 * lane; j0 < lim; j0 += 128) {
			float4 a, b;
			u32 kp;
			pd4(j0, a, b, kp);
			out4(j0, a, b, kp);
		}
	}
}

// attn_f32_dsoftmax_{c4,c0}: one warp per score row of the chunk (f32_dsoftmax_row). A block with no visible
// key (n == 0) zeros p.zero's rows (dQ).
#define F32_DSOFTMAX(QC)                                                                                         \
	extern "C" __global__ void __launch_bounds__(256) attn_f32_dsoftmax_c##QC(const F32Rows p) {                 \
		F32Row w = f32_row(p);                                                                                   \
		int lane = threadIdx.x % 32;                                                                             \
		if (!w.ok) return;                                                                                       \
		if (p.n == 0) {                                                                                          \
			if (p.zero) f32_zero_row(p, lane);                                                                   \
			return;                                                                                              \
		}                                                                                                        \
		f32_dsoftmax_row<QC>(p, w, lane);                                                                        \
	}
F32_DSOFTMAX(4)
F32_DSOFTMAX(0)

// F32Ptrs is the argument block of attn_f32_ptrs (mirrored by f32Ptrs in cuda/attention_f32.go): narr arrays
// of n device addresses each, array k at out + k·n. Entry i of array k is the address of job i's matrix of
// operand k, job i being (batch member, head) pair p = p0 + i, b = p / Hq, h = p % Hq:
// base[k] + 4·(off[k] + b·sb[k] + h·sh[k]). (A chunk's score scratch is sb = Hq·blk, sh = blk,
// off = −p0·blk: block i.)
#define F32_PTRS_MAX 10
struct F32Ptrs {
	u64 *out;
	i64 n, p0, Hq, narr;
	u64 base[F32_PTRS_MAX];
	i64 sb[F32_PTRS_MAX], sh[F32_PTRS_MAX], off[F32_PTRS_MAX];
};

// attn_f32_ptrs fills the pointer arrays of a merged chunk's cublasSgemmBatched products, one thread an entry.
extern "C" __global__ void attn_f32_ptrs(const F32Ptrs p) {
	i64 x = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= p.n * p.narr) return;
	int k = (int)(x / p.n);
	i64 i = x - (i64)k * p.n, pr = p.p0 + i, b = pr / p.Hq, h = pr - b * p.Hq;
	p.out[x] = p.base[k] + 4ull * (u64)(p.off[k] + b * p.sb[k] + h * p.sh[k]);
}
