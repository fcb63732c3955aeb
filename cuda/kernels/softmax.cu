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
// rows. dlogits may alias logits (the row's statistics are complete before the first write).
extern "C" __global__ void xent_bwd(void *dlogits, int dtd, const void *logits, int dtl, const void *labels,
                                    int dtlab, i64 N, int V, float scale, i64 ignore) {
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

// Vocabulary-sized rows (a causal LM's head: V = 32k–152k): one 256-thread block per row instead of one warp,
// and with vec=1 (V % 4 == 0, the buffers aligned) four elements per access. A warp per row left a chunk of
// a few hundred rows with fewer warps than the GPU has SMs, each walking a 300 KB row with 2-byte loads; a
// block per row spreads every row over the SM and its passes re-read the row from L2 (a row per block, at most
// a few hundred blocks resident, fits the 50 MB L2). Same arithmetic as the warp kernels (max pass, then
// Σ exp(z − max), expf/logf); only the summation tree differs.

// block_max and block_sum reduce v over a block of whole warps (≤ 32 of them) through sh; every thread gets
// the result. The leading barrier lets sh be reused by consecutive calls.
__device__ __forceinline__ float block_max(float v, float *sh) {
	int w = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) sh[w] = v;
	__syncthreads();
	return warp_max(lane < nw ? sh[lane] : NEG_INF);
}

__device__ __forceinline__ float block_sum(float v, float *sh) {
	int w = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) sh[w] = v;
	__syncthreads();
	return warp_sum(lane < nw ? sh[lane] : 0.0f);
}

// block_lse returns logsumexp of the row at base as max + log Σ exp(z − max) (NaN-propagating max).
__device__ __forceinline__ float block_lse(const void *x, int dtx, i64 base, int V, int vec, float *sh) {
	int t = threadIdx.x, nt = blockDim.x;
	float mx = NEG_INF;
	if (vec) {
		for (int c = 4 * t; c < V; c += 4 * nt) {
			F4 a = ld4(x, dtx, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) mx = maxnan(mx, a.v[k]);
		}
	} else {
		for (int c = t; c < V; c += nt) mx = maxnan(mx, ld(x, dtx, base + c));
	}
	mx = block_max(mx, sh);
	float s = 0.0f;
	if (vec) {
		for (int c = 4 * t; c < V; c += 4 * nt) {
			F4 a = ld4(x, dtx, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) s += expf(a.v[k] - mx);
		}
	} else {
		for (int c = t; c < V; c += nt) s += expf(ld(x, dtx, base + c) - mx);
	}
	return logf(block_sum(s, sh)) + mx;
}

// xent_fwd_rows: xent_fwd with one block per row (grid N).
extern "C" __global__ void xent_fwd_rows(float *losses, const void *logits, int dtl, const void *labels, int dtlab,
                                         i64 N, int V, i64 ignore, int vec) {
	__shared__ float sh[32];
	i64 row = blockIdx.x;
	if (row >= N) return;
	i64 lab = ldi(labels, dtlab, row);
	if (lab == ignore) {
		if (threadIdx.x == 0) losses[row] = 0.0f;
		return;
	}
	i64 base = row * V;
	float lse = block_lse(logits, dtl, base, V, vec, sh);
	if (threadIdx.x == 0) losses[row] = lse - ld(logits, dtl, base + lab);
}

// xent_bwd_rows: xent_bwd with one block per row (grid N). dlogits may alias logits: every thread's reads of
// the row end before block_sum's barriers, the writes come after.
extern "C" __global__ void xent_bwd_rows(void *dlogits, int dtd, const void *logits, int dtl, const void *labels,
                                         int dtlab, i64 N, int V, float scale, i64 ignore, int vec) {
	__shared__ float sh[32];
	i64 row = blockIdx.x;
	if (row >= N) return;
	int t = threadIdx.x, nt = blockDim.x;
	i64 lab = ldi(labels, dtlab, row);
	i64 base = row * V;
	if (lab == ignore) {
		for (int c = t; c < V; c += nt) st(dlogits, dtd, base + c, 0.0f);
		return;
	}
	float lse = block_lse(logits, dtl, base, V, vec, sh);
	if (vec) {
		for (int c = 4 * t; c < V; c += 4 * nt) {
			F4 a = ld4(logits, dtl, base + c), o;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float p = expf(a.v[k] - lse);
				if (c + k == lab) p = p - 1.0f;
				o.v[k] = scale * p;
			}
			st4(dlogits, dtd, base + c, o);
		}
	} else {
		for (int c = t; c < V; c += nt) {
			float p = expf(ld(logits, dtl, base + c) - lse);
			if (c == lab) p = p - 1.0f;
			st(dlogits, dtd, base + c, scale * p);
		}
	}
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
