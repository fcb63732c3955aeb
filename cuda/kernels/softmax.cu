// softmax.cu: softmax over the last axis (with the additive attention mask), its backward, cross-entropy
// forward and backward, and the row arg-max.
//
// Variants: one warp per row (8 rows per 256-thread block) for all four kernels; each pass re-reads the row,
// which stays in L1/L2 for the row lengths of attention (≤ a few thousand). Cross-entropy over a vocabulary
// (V ≥ 2048) takes xent_fwd_rows / xent_bwd_rows instead: one block per row. Max and sums are FP32; max propagates NaN, so a NaN or +Inf anywhere gives a NaN
// row and a row that is −Inf everywhere gives zeros, exactly as tensor/cpu. Only the summation order differs
// from the CPU (a warp tree instead of a left-to-right loop), and expf/logf instead of float64 exp/log.
#include "common.cuh"

// softmax_fwd: rows of C in x (B·R rows); z = x + mask[row / rows_per_mask] (mask (B, C) F32 or NULL).
extern "C" __global__ void softmax_fwd(void *out, int dto, const void *x, int dtx, const float *mask, i64 rows,
                                       int C, i64 rows_per_mask) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= rows) return;
	i64 base = row * C;
	const float *mr = mask ? mask + (row / rows_per_mask) * C : 0;
	float mx = NEG_INF;
	for (int c = lane; c < C; c += 32) {
		float z = ld(x, dtx, base + c);
		if (mr) z = z + mr[c];
		mx = maxnan(mx, z);
	}
	mx = warp_max(mx);
	if (mx == NEG_INF) {
		for (int c = lane; c < C; c += 32) st(out, dto, base + c, 0.0f);
		return;
	}
	float s = 0.0f;
	for (int c = lane; c < C; c += 32) {
		float z = ld(x, dtx, base + c);
		if (mr) z = z + mr[c];
		s += expf(z - mx);
	}
	float inv = 1.0f / warp_sum(s);
	for (int c = lane; c < C; c += 32) {
		float z = ld(x, dtx, base + c);
		if (mr) z = z + mr[c];
		st(out, dto, base + c, expf(z - mx) * inv);
	}
}

// softmax_bwd: dx = y·(dout − Σ dout·y) per row. dx may alias dout.
extern "C" __global__ void softmax_bwd(void *dx, int dtdx, const void *dout, int dtd, const void *y, int dty,
                                       i64 rows, int C) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= rows) return;
	i64 base = row * C;
	float dot = 0.0f;
	for (int c = lane; c < C; c += 32) dot += ld(dout, dtd, base + c) * ld(y, dty, base + c);
	dot = warp_sum(dot);
	for (int c = lane; c < C; c += 32) {
		float v = ld(y, dty, base + c);
		st(dx, dtdx, base + c, v * (ld(dout, dtd, base + c) - dot));
	}
}

// row_lse returns logsumexp of a row as max + log Σ exp(z − max) (NaN-propagating max).
__device__ __forceinline__ float row_lse(const void *x, int dtx, i64 base, int V, int lane) {
	float mx = NEG_INF;
	for (int c = lane; c < V; c += 32) mx = maxnan(mx, ld(x, dtx, base + c));
	mx = warp_max(mx);
	float s = 0.0f;
	for (int c = lane; c < V; c += 32) s += expf(ld(x, dtx, base + c) - mx);
	return logf(warp_sum(s)) + mx;
}

// xent_fwd: losses[i] = logsumexp(logits_i) − logits_i[label_i]; 0 for rows labelled ignore. Labels were
// checked against [0, V) by the host.
extern "C" __global__ void xent_fwd(float *losses, const void *logits, int dtl, const void *labels, int dtlab,
                                    i64 N, int V, i64 ignore) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 lab = ldi(labels, dtlab, row);
	if (lab == ignore) {
		if (lane == 0) losses[row] = 0.0f;
		return;
	}
	i64 base = row * V;
	float lse = row_lse(logits, dtl, base, V, lane);
	if (lane == 0) losses[row] = lse - ld(logits, dtl, base + lab);
}

// xent_bwd: dlogits_i = scale·(softmax(logits_i) − onehot(label_i)), softmax as exp(z − lse); 0 for ignored
// rows. dlogits may alias logits (the row's statistics are complete before the first write). scale_by, when
// given, multiplies scale first (the loss scale on the device; tensor.Backend.CrossEntropyBackward).
extern "C" __global__ void xent_bwd(void *dlogits, int dtd, const void *logits, int dtl, const void *labels,
                                    int dtlab, i64 N, int V, float scale, i64 ignore, const float *scale_by) {
	if (scale_by) scale = __fmul_rn(scale, *scale_by);
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 lab = ldi(labels, dtlab, row);
	i64 base = row * V;
	if (lab == ignore) {
		for (int c = lane; c < V; c += 32) st(dlogits, dtd, base + c, 0.0f);
		return;
	}
	float lse = row_lse(logits, dtl, base, V, lane);
	__syncwarp();
	for (int c = lane; c < V; c += 32) {
		float p = expf(ld(logits, dtl, base + c) - lse);
		if (c == lab) p = p - 1.0f;
		st(dlogits, dtd, base + c, scale * p);
	}
}

// Vocabulary-sized rows (a causal LM's head: V = 32k–152k): one 256-thread block per row instead of one warp.
// A warp per row left a chunk of a few hundred rows with fewer warps than the GPU has SMs, each walking a
// 300 KB row with 2-byte loads (156 GB/s on the H200). Here every thread reads 16 bytes per access (vec=1:
// V % 8 == 0 and the buffers 16-byte aligned; 8 half or 4 F32 values) and keeps an online (max, Σ exp(z − max))
// pair, rescaling its sum when its max grows (Milakov & Gimelshein 2018, "Online normalizer calculation for
// softmax"), so the forward reads the row once and the backward twice (statistics, then the gradient). The
// pairs are combined across the block in a fixed tree. Semantics as the warp kernels and tensor/cpu: a NaN
// or +Inf logit makes the row NaN (the reference's exp(z − max) is NaN at an infinite max); summation order
// and expf/logf differ from the CPU's float64 reference by FP32 rounding only.

#define POS_INF __int_as_float(0x7f800000)

// lse_add folds logit z into a thread's running (m, s).
__device__ __forceinline__ void lse_add(float &m, float &s, float z) {
	if (z > m) {
		s = z == POS_INF ? __int_as_float(0x7fc00000) : s * expf(m - z) + 1.0f;
		m = z;
	} else if (z != z) {
		m = z, s = z;
	} else if (z != NEG_INF) {
		s += expf(z - m);
	}
}

// lse_merge combines two (m, s) pairs.
__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
	float mm = maxnan(m, m2);
	float a = m == NEG_INF ? 0.0f : s * expf(m - mm);
	float b = m2 == NEG_INF ? 0.0f : s2 * expf(m2 - mm);
	if (mm != mm) a = mm;
	m = mm, s = a + b;
}

// ld16b reads 8 consecutive values (16 bytes; half dtypes) or 4 (F32) at element i into v; returns the count.
__device__ __forceinline__ int ld16b(const void *p, int dt, i64 i, float *v) {
	if (dt == DT_F32) {
		float4 q = *(const float4 *)((const float *)p + i);
		v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
		return 4;
	}
	uint4 q = *(const uint4 *)((const u16 *)p + i);
	u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
	for (int k = 0; k < 4; k++) {
		v[2 * k] = half_to_f32((u16)(w[k] & 0xffffu), dt);
		v[2 * k + 1] = half_to_f32((u16)(w[k] >> 16), dt);
	}
	return 8;
}

// st16b writes n = 8 (half) or 4 (F32) values at element i with one 16-byte access.
__device__ __forceinline__ void st16b(void *p, int dt, i64 i, const float *v) {
	if (dt == DT_F32) {
		*(float4 *)((float *)p + i) = make_float4(v[0], v[1], v[2], v[3]);
		return;
	}
	uint4 q;
	u32 *w = &q.x;
#pragma unroll
	for (int k = 0; k < 4; k++) w[k] = (u32)f32_to_half(v[2 * k], dt) | ((u32)f32_to_half(v[2 * k + 1], dt) << 16);
	*(uint4 *)((u16 *)p + i) = q;
}

// block_lse returns logsumexp of the row at base, every thread of the block getting it.
__device__ __forceinline__ float block_lse(const void *x, int dtx, i64 base, int V, int vec) {
	__shared__ float shm[32], shs[32];
	int t = threadIdx.x, nt = blockDim.x, w = t / 32, lane = t % 32, nw = nt / 32;
	float m = NEG_INF, s = 0.0f;
	if (vec) {
		int per = dtx == DT_F32 ? 4 : 8;
		for (int c = per * t; c < V; c += per * nt) {
			float v[8];
			int n = ld16b(x, dtx, base + c, v);
#pragma unroll
			for (int k = 0; k < 8; k++)
				if (k < n) lse_add(m, s, v[k]);
		}
	} else {
		for (int c = t; c < V; c += nt) lse_add(m, s, ld(x, dtx, base + c));
	}
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, m2, s2);
	}
	if (lane == 0) shm[w] = m, shs[w] = s;
	__syncthreads();
	m = lane < nw ? shm[lane] : NEG_INF;
	s = lane < nw ? shs[lane] : 0.0f;
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, m2, s2);
	}
	return logf(s) + m;
}

// xent_fwd_rows: xent_fwd with one block per row (grid N).
extern "C" __global__ void xent_fwd_rows(float *losses, const void *logits, int dtl, const void *labels, int dtlab,
                                         i64 N, int V, i64 ignore, int vec) {
	i64 row = blockIdx.x;
	if (row >= N) return;
	i64 lab = ldi(labels, dtlab, row);
	if (lab == ignore) {
		if (threadIdx.x == 0) losses[row] = 0.0f;
		return;
	}
	i64 base = row * V;
	float lse = block_lse(logits, dtl, base, V, vec);
	if (threadIdx.x == 0) losses[row] = lse - ld(logits, dtl, base + lab);
}

// xent_grad_row writes thread t's part (of nt) of the row of dlogits = scale·(exp(logits − lse) − onehot(lab)), 16 bytes per access
// when vec and the dtypes agree (xent_bwd_rows, xent_fused_rows); each element is read before it is written.
__device__ __forceinline__ void xent_grad_row(void *dlogits, int dtd, const void *logits, int dtl, i64 base, int V,
                                              i64 lab, float lse, float scale, int vec, int t, int nt) {
	if (vec && dtd == dtl) {
		int per = dtl == DT_F32 ? 4 : 8;
		for (int c = per * t; c < V; c += per * nt) {
			float v[8];
			int n = ld16b(logits, dtl, base + c, v);
#pragma unroll
			for (int k = 0; k < 8; k++) {
				if (k >= n) break;
				float p = expf(v[k] - lse);
				if (c + k == lab) p = p - 1.0f;
				v[k] = scale * p;
			}
			st16b(dlogits, dtd, base + c, v);
		}
	} else {
		for (int c = t; c < V; c += nt) {
			float p = expf(ld(logits, dtl, base + c) - lse);
			if (c == lab) p = p - 1.0f;
			st(dlogits, dtd, base + c, scale * p);
		}
	}
}

// xent_bwd_rows: xent_bwd with one block per row (grid N). dlogits may alias logits: every thread's reads for
// the statistics end before block_lse's barrier, and each element is read before it is written.
extern "C" __global__ void xent_bwd_rows(void *dlogits, int dtd, const void *logits, int dtl, const void *labels,
                                         int dtlab, i64 N, int V, float scale, i64 ignore, int vec, const float *scale_by) {
	if (scale_by) scale = __fmul_rn(scale, *scale_by);
	i64 row = blockIdx.x;
	if (row >= N) return;
	int t = threadIdx.x, nt = blockDim.x;
	i64 lab = ldi(labels, dtlab, row);
	i64 base = row * V;
	if (lab == ignore) {
		for (int c = t; c < V; c += nt) st(dlogits, dtd, base + c, 0.0f);
		return;
	}
	float lse = block_lse(logits, dtl, base, V, vec);
	xent_grad_row(dlogits, dtd, logits, dtl, base, V, lab, lse, scale, vec, t, nt);
}

// argmax_better reports whether (v, i) beats (bv, bi): larger, or NaN over a number, or equal (both NaN
// included) with a lower index: torch.argmax's first maximum, NaN counting as the largest.
__device__ __forceinline__ bool argmax_better(float v, int i, float bv, int bi) {
	bool vn = v != v, bn = bv != bv;
	if (vn != bn) return vn;
	if (vn || v == bv) return i < bi;
	return v > bv;
}

// argmax_rows: out[row] (I32) = the first index of the largest entry of each row of V in x, one warp per
// row; -Inf rows give 0 as on the CPU.
extern "C" __global__ void argmax_rows(int *out, const void *x, int dtx, i64 N, int V) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * V;
	float bv = NEG_INF;
	int bi = V;
	for (int c = lane; c < V; c += 32) {
		float v = ld(x, dtx, base + c);
		if (bi == V || argmax_better(v, c, bv, bi)) {
			bv = v;
			bi = c;
		}
	}
	for (int off = 16; off > 0; off >>= 1) {
		float ov = __shfl_down_sync(0xffffffffu, bv, off);
		int oi = __shfl_down_sync(0xffffffffu, bi, off);
		if (oi < V && (bi == V || argmax_better(ov, oi, bv, bi))) {
			bv = ov;
			bi = oi;
		}
	}
	if (lane == 0) out[row] = bi == V ? 0 : bi;
}

// argmax_block: argmax_rows with one block per row (grid N) for a vocabulary, 16-byte loads with vec=1 (as
// xent_*_rows). argmax_better is a total order (ties to the lower index), so the result does not depend on
// the order the entries are visited in: it equals the warp kernel's and the CPU's.
extern "C" __global__ void argmax_block(int *out, const void *x, int dtx, i64 N, int V, int vec) {
	__shared__ float sv[32];
	__shared__ int si[32];
	i64 row = blockIdx.x;
	if (row >= N) return;
	int t = threadIdx.x, nt = blockDim.x, w = t / 32, lane = t % 32, nw = nt / 32;
	i64 base = row * V;
	float bv = NEG_INF;
	int bi = V;
	if (vec) {
		int per = dtx == DT_F32 ? 4 : 8;
		for (int c = per * t; c < V; c += per * nt) {
			float v[8];
			int n = ld16b(x, dtx, base + c, v);
#pragma unroll
			for (int k = 0; k < 8; k++) {
				if (k < n && (bi == V || argmax_better(v[k], c + k, bv, bi))) {
					bv = v[k];
					bi = c + k;
				}
			}
		}
	} else {
		for (int c = t; c < V; c += nt) {
			float v = ld(x, dtx, base + c);
			if (bi == V || argmax_better(v, c, bv, bi)) {
				bv = v;
				bi = c;
			}
		}
	}
	for (int off = 16; off > 0; off >>= 1) {
		float ov = __shfl_down_sync(0xffffffffu, bv, off);
		int oi = __shfl_down_sync(0xffffffffu, bi, off);
		if (oi < V && (bi == V || argmax_better(ov, oi, bv, bi))) {
			bv = ov;
			bi = oi;
		}
	}
	if (lane == 0) sv[w] = bv, si[w] = bi;
	__syncthreads();
	if (w != 0) return;
	bv = lane < nw ? sv[lane] : NEG_INF;
	bi = lane < nw ? si[lane] : V;
	for (int off = 16; off > 0; off >>= 1) {
		float ov = __shfl_down_sync(0xffffffffu, bv, off);
		int oi = __shfl_down_sync(0xffffffffu, bi, off);
		if (oi < V && (bi == V || argmax_better(ov, oi, bv, bi))) {
			bv = ov;
			bi = oi;
		}
	}
	if (lane == 0) out[row] = bi == V ? 0 : bi;
}

// xent_fused_rows: xent_fwd_rows, argmax_block and xent_bwd_rows of one row in one block (grid N), the row
// read twice instead of four times (statistics and arg-max, then the gradient): a causal LM head's chunk.
// The (m, s) pairs take block_lse's operations in its order, so lse — and with it the loss and the gradient —
// has the bits of the separate kernels; the arg-max is argmax_better's total order, so any visiting order gives
// argmax_block's result. Every row's arg-max is written (pred may be NULL); an ignored row gets loss 0 and a
// zero gradient. dlogits may alias logits: the statistics and the label's logit are read before a barrier,
// and each element is read before it is written.
extern "C" __global__ void xent_fused_rows(float *losses, int *pred, void *dlogits, int dtd, const void *logits, int dtl,
                                           const void *labels, int dtlab, i64 N, int V, float scale, i64 ignore, int vec,
                                           const float *scale_by) {
	if (scale_by) scale = __fmul_rn(scale, *scale_by);
	__shared__ float shm[32], shs[32], sv[32];
	__shared__ int si[32];
	i64 row = blockIdx.x;
	if (row >= N) return;
	int t = threadIdx.x, nt = blockDim.x, w = t / 32, lane = t % 32, nw = nt / 32;
	i64 lab = ldi(labels, dtlab, row);
	i64 base = row * V;
	float m = NEG_INF, s = 0.0f, bv = NEG_INF;
	int bi = V;
	int per = dtl == DT_F32 ? 4 : 8;
	if (vec) {
		for (int c = per * t; c < V; c += per * nt) {
			float v[8];
			int n = ld16b(logits, dtl, base + c, v);
#pragma unroll
			for (int k = 0; k < 8; k++) {
				if (k < n) {
					lse_add(m, s, v[k]);
					if (bi == V || argmax_better(v[k], c + k, bv, bi)) bv = v[k], bi = c + k;
				}
			}
		}
	} else {
		for (int c = t; c < V; c += nt) {
			float v = ld(logits, dtl, base + c);
			lse_add(m, s, v);
			if (bi == V || argmax_better(v, c, bv, bi)) bv = v, bi = c;
		}
	}
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, m2, s2);
		float ov = __shfl_down_sync(0xffffffffu, bv, o);
		int oi = __shfl_down_sync(0xffffffffu, bi, o);
		if (oi < V && (bi == V || argmax_better(ov, oi, bv, bi))) bv = ov, bi = oi;
	}
	if (lane == 0) shm[w] = m, shs[w] = s, sv[w] = bv, si[w] = bi;
	__syncthreads();
	m = lane < nw ? shm[lane] : NEG_INF;
	s = lane < nw ? shs[lane] : 0.0f;
	bv = lane < nw ? sv[lane] : NEG_INF;
	bi = lane < nw ? si[lane] : V;
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, m2, s2);
		float ov = __shfl_down_sync(0xffffffffu, bv, o);
		int oi = __shfl_down_sync(0xffffffffu, bi, o);
		if (oi < V && (bi == V || argmax_better(ov, oi, bv, bi))) bv = ov, bi = oi;
	}
	float lse = logf(s) + m;
	if (t == 0) {
		if (pred) pred[row] = bi == V ? 0 : bi;
		losses[row] = lab == ignore ? 0.0f : lse - ld(logits, dtl, base + lab);
	}
	__syncthreads(); // the label's logit is read before any thread overwrites it (dlogits may alias logits)
	if (lab == ignore) {
		for (int c = t; c < V; c += nt) st(dlogits, dtd, base + c, 0.0f);
		return;
	}
	xent_grad_row(dlogits, dtd, logits, dtl, base, V, lab, lse, scale, vec, t, nt);
}
