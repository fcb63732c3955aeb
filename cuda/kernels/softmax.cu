// softmax.cu: softmax over the last axis (with the additive attention mask), its backward, and cross-entropy
// forward and backward.
//
// Variants: one warp per row (8 rows per 256-thread block) for all four kernels; each pass re-reads the row,
// which stays in L1/L2 for the row lengths of attention (≤ a few thousand) and is still correct, if slower,
// for a vocabulary-sized row. Max and sums are FP32; max propagates NaN, so a NaN or +Inf anywhere gives a NaN
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
