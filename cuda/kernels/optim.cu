// optim.cu: multi-tensor kernels for the optimizer step: the global gradient norm (to the host or kept on the
// device), gradient clipping by a norm on the device, the fused non-finite check and unscale of GradScaler,
// and AdamW (which can clip the gradients by the norm as it reads them: no pass of its own).
//
// Variants: each kernel walks a list of work chunks uploaded by the host (at most 65536 elements each). A
// chunk is (pointer, element count, dtype or flag); block b takes chunk b, so one launch covers every tensor
// (or every segment of the flat parameter buffer) whatever their sizes. The chunks of a segment list start at
// arbitrary element offsets: sumsq_partial goes by groups of four elements, as float4 loads for an F32 chunk
// on a 16-byte boundary and one by one otherwise, in one summation order either way; clip_scale loads OPT_U
// elements per thread before it uses any, or goes by float4 groups for an F32
// chunk that starts on a 16-byte boundary; adamw goes by float4 groups between the chunk's first 16-byte
// boundary and its last full group.
#include "common.cuh"

// OPT_U is how many elements a thread of clip_scale loads before it uses any; SUMSQ_U how many groups of four
// elements a thread of sumsq_partial loads before it adds any (64 bytes a thread in flight, as the 16 single
// loads before). Either count gives the same additions in the same order.
#define OPT_U 4
#define SUMSQ_U 4

struct Chunk {
	u64 ptr; // device address of the chunk's first element
	i64 n;   // elements in the chunk
	i64 tag; // dtype (norm), or 1/0 for "weight decay applies" (AdamW)
};

// sumsq_partial: partial[b] = Σ x² over chunk b, accumulated in float64 (each x widened exactly), so that the
// host's float64 sum of partials matches tensor/cpu's float64 accumulation up to summation order. The order is
// fixed by the chunk's element indices alone, not by its dtype or alignment: thread t takes the groups of four
// elements j = t, t + blockDim, … (elements 4j … 4j+3) in increasing j, element 4j+c adding onto the thread's
// accumulator c of four (four independent float64 chains), then the n % 4 last elements onto accumulator 0 of
// threads 0 … n%4−1; a thread's sum is (a0 + a1) + (a2 + a3), and the block's the warp tree of those. An F32
// chunk on a 16-byte boundary loads its groups as float4 (SUMSQ_U of them in flight a thread); other chunks
// load the same elements one by one (4·SUMSQ_U in flight), giving the same additions.
extern "C" __global__ void sumsq_partial(double *partial, const Chunk *chunks) {
	__shared__ double warps[32];
	Chunk ch = chunks[blockIdx.x];
	double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
	const void *x = (const void *)ch.ptr;
	int dt = (int)ch.tag;
	i64 b = blockDim.x, groups = ch.n / 4, j = threadIdx.x;
	if (dt == DT_F32 && ch.ptr % 16 == 0) {
		const float4 *x4 = (const float4 *)x;
		for (; j + (SUMSQ_U - 1) * b < groups; j += SUMSQ_U * b) {
			float4 q[SUMSQ_U];
#pragma unroll
			for (int u = 0; u < SUMSQ_U; u++) q[u] = x4[j + u * b];
#pragma unroll
			for (int u = 0; u < SUMSQ_U; u++) {
				double v0 = (double)q[u].x, v1 = (double)q[u].y, v2 = (double)q[u].z, v3 = (double)q[u].w;
				a0 += v0 * v0, a1 += v1 * v1, a2 += v2 * v2, a3 += v3 * v3;
			}
		}
		for (; j < groups; j += b) {
			float4 q = x4[j];
			double v0 = (double)q.x, v1 = (double)q.y, v2 = (double)q.z, v3 = (double)q.w;
			a0 += v0 * v0, a1 += v1 * v1, a2 += v2 * v2, a3 += v3 * v3;
		}
	} else {
		for (; j + (SUMSQ_U - 1) * b < groups; j += SUMSQ_U * b) {
			float q[SUMSQ_U][4];
#pragma unroll
			for (int u = 0; u < SUMSQ_U; u++)
#pragma unroll
				for (int c = 0; c < 4; c++) q[u][c] = ld(x, dt, 4 * (j + u * b) + c);
#pragma unroll
			for (int u = 0; u < SUMSQ_U; u++) {
				double v0 = (double)q[u][0], v1 = (double)q[u][1], v2 = (double)q[u][2], v3 = (double)q[u][3];
				a0 += v0 * v0, a1 += v1 * v1, a2 += v2 * v2, a3 += v3 * v3;
			}
		}
		for (; j < groups; j += b) {
			double v0 = (double)ld(x, dt, 4 * j), v1 = (double)ld(x, dt, 4 * j + 1), v2 = (double)ld(x, dt, 4 * j + 2),
			       v3 = (double)ld(x, dt, 4 * j + 3);
			a0 += v0 * v0, a1 += v1 * v1, a2 += v2 * v2, a3 += v3 * v3;
		}
	}
	if (threadIdx.x < ch.n - 4 * groups) {
		double v = (double)ld(x, dt, 4 * groups + threadIdx.x);
		a0 += v * v;
	}
	double s = (a0 + a1) + (a2 + a3);
	s = warp_sum_d(s);
	int w = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0) warps[w] = s;
	__syncthreads();
	if (w == 0) {
		double t = lane < (int)(blockDim.x / 32) ? warps[lane] : 0.0;
		t = warp_sum_d(t);
		if (lane == 0) partial[blockIdx.x] = t;
	}
}

// NORM_LANES is how many sums norm_finish (and GlobalNorm on the host, cuda/optim.go normSum) splits the
// partials into.
#define NORM_LANES 32

// norm_finish: one warp; *norm = the bits of sqrt(Σ partial[i]) in float64 in a fixed two-level order: lane l
// adds the partials i ≡ l (mod 32) in increasing i, then lane 0 adds the 32 lane sums in order l = 0..31 onto
// 0. The float64 GlobalNorm returns (the host's normSum of the same partials, the same order), left on the
// device. (One thread adding all 1671 partials of BERT-base in order, eight loads in flight, took ~30 µs.)
extern "C" __global__ void norm_finish(long long *norm, const double *partial, int n) {
	__shared__ double lanes[NORM_LANES];
	if (blockIdx.x != 0 || threadIdx.x >= NORM_LANES) return;
	int l = threadIdx.x;
	double s = 0.0;
	int i = l;
	for (; i + 3 * NORM_LANES < n; i += 4 * NORM_LANES) { // four loads in flight, added in order
		double q0 = partial[i], q1 = partial[i + NORM_LANES], q2 = partial[i + 2 * NORM_LANES], q3 = partial[i + 3 * NORM_LANES];
		s += q0, s += q1, s += q2, s += q3;
	}
	for (; i < n; i += NORM_LANES) s += partial[i];
	lanes[l] = s;
	__syncwarp();
	if (l == 0) {
		double t = 0.0;
		for (int j = 0; j < NORM_LANES; j++) t += lanes[j];
		*norm = __double_as_longlong(sqrt(t));
	}
}

// clip_coef: clip_scale's coefficient for the norm total (the bits GlobalNormTo left) and max_norm, and whether
// clip_scale scales by it: total finite, max_norm > 0 and coef < 1. (1/(float(total) + 1e-6f))·max_norm, each
// step rounded to FP32, as the host's amp.ClipGradNorm and tensor/cpu compute it.
__device__ __forceinline__ bool clip_coef(long long bits, float max_norm, float &coef) {
	double total = __longlong_as_double(bits);
	coef = 1.0f;
	if (!isfinite(total) || !(max_norm > 0.0f)) return false;
	float c = __fmul_rn(__fdiv_rn(1.0f, __fadd_rn((float)total, 1e-6f)), max_norm);
	if (c >= 1.0f) return false;
	coef = c;
	return true;
}

// clip_scale: torch.nn.utils.clip_grad_norm_'s scaling from the norm on the device. With total the float64 of
// *norm: a non-finite total sets *nonfinite (when given) and scales nothing; else coef =
// (1/(float(total) + 1e-6f))·max_norm, each step rounded to FP32 as the host's amp.ClipGradNorm computes it,
// multiplies every element of chunk b (of dtype tag) when coef < 1 and max_norm > 0.
extern "C" __global__ void clip_scale(const long long *norm, int *nonfinite, const Chunk *chunks, float max_norm) {
	double total = __longlong_as_double(*norm);
	if (!isfinite(total)) {
		if (nonfinite && blockIdx.x == 0 && threadIdx.x == 0) *nonfinite = 1;
		return;
	}
	float coef;
	if (!clip_coef(*norm, max_norm, coef)) return;
	Chunk ch = chunks[blockIdx.x];
	void *x = (void *)ch.ptr;
	int dt = (int)ch.tag;
	i64 i = threadIdx.x, b = blockDim.x;
	if (dt == DT_F32 && ch.ptr % 16 == 0) { // an F32 chunk on a 16-byte boundary: float4 groups, then the tail
		float4 *x4 = (float4 *)x;
		i64 groups = ch.n / 4, j = threadIdx.x;
		for (; j + (OPT_U - 1) * b < groups; j += OPT_U * b) {
			float4 q[OPT_U];
#pragma unroll
			for (int u = 0; u < OPT_U; u++) q[u] = x4[j + u * b];
#pragma unroll
			for (int u = 0; u < OPT_U; u++)
				x4[j + u * b] = make_float4(__fmul_rn(q[u].x, coef), __fmul_rn(q[u].y, coef), __fmul_rn(q[u].z, coef),
				                            __fmul_rn(q[u].w, coef));
		}
		for (; j < groups; j += b) {
			float4 q = x4[j];
			x4[j] = make_float4(__fmul_rn(q.x, coef), __fmul_rn(q.y, coef), __fmul_rn(q.z, coef), __fmul_rn(q.w, coef));
		}
		i = 4 * groups + threadIdx.x;
	} else {
		for (; i + (OPT_U - 1) * b < ch.n; i += OPT_U * b) {
			float q[OPT_U];
#pragma unroll
			for (int u = 0; u < OPT_U; u++) q[u] = ld(x, dt, i + u * b);
#pragma unroll
			for (int u = 0; u < OPT_U; u++) st(x, dt, i + u * b, __fmul_rn(q[u], coef));
		}
	}
	for (; i < ch.n; i += b) st(x, dt, i, __fmul_rn(ld(x, dt, i), coef));
}

// unscale: x = x·inv_scale over every F32 chunk (skipped when inv_scale == 1); *found = 1 if any x was Inf or
// NaN before scaling (PyTorch's _amp_foreach_non_finite_check_and_unscale_; x − x is NaN exactly for those).
extern "C" __global__ void unscale(int *found, const Chunk *chunks, float inv_scale) {
	Chunk ch = chunks[blockIdx.x];
	float *x = (float *)ch.ptr;
	int bad = 0;
	for (i64 i = threadIdx.x; i < ch.n; i += blockDim.x) {
		float v = x[i];
		if (v - v != 0.0f) bad = 1;
		if (inv_scale != 1.0f) x[i] = v * inv_scale;
	}
	if (__syncthreads_or(bad) && threadIdx.x == 0) *found = 1;
}

// adamw_el is one element of adamw: tensor/cpu's operations in its order (see adamw).
__device__ __forceinline__ void adamw_el(float &p, float g, float &m, float &v, int decays, float decay, float beta1,
                                         float beta2, float ob1, float ob2, float step, float bc2, float eps) {
	float pi = p;
	if (decays) pi = pi * decay;
	float mi = beta1 * m + ob1 * g;
	float vi = beta2 * v + ob2 * g * g;
	float denom = sqrtf(vi) / bc2 + eps;
	p = pi - step * mi / denom;
	m = mi;
	v = vi;
}

// clipped and clipped4 are a gradient as adamw uses it: clip_scale's product g·coef when clip is set.
__device__ __forceinline__ float clipped(float g, bool clip, float coef) { return clip ? __fmul_rn(g, coef) : g; }
__device__ __forceinline__ float4 clipped4(float4 g, bool clip, float coef) {
	if (!clip) return g;
	return make_float4(__fmul_rn(g.x, coef), __fmul_rn(g.y, coef), __fmul_rn(g.z, coef), __fmul_rn(g.w, coef));
}

// ADAMW_U is how many float4 groups of each buffer a thread of adamw loads before it computes and stores any.
#define ADAMW_U 2

// unscale_dev: unscale with the scale on the device: inv_scale = (float)(1.0 / (double)*scale), as PyTorch's
// scale.double().reciprocal().float() and the host's amp.GradScaler compute it (IEEE division, rounded once).
extern "C" __global__ void unscale_dev(int *found, const Chunk *chunks, const float *scale) {
	float inv_scale = __double2float_rn(__ddiv_rn(1.0, (double)*scale));
	Chunk ch = chunks[blockIdx.x];
	float *x = (float *)ch.ptr;
	int bad = 0;
	for (i64 i = threadIdx.x; i < ch.n; i += blockDim.x) {
		float v = x[i];
		if (v - v != 0.0f) bad = 1;
		if (inv_scale != 1.0f) x[i] = v * inv_scale;
	}
	if (__syncthreads_or(bad) && threadIdx.x == 0) *found = 1;
}

// update_scale: _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu) with tune's floor min_scale on a
// backoff (tensor.UpdateScaleArgs): the products in double, rounded once to float; a grown scale that
// overflows to Inf is not taken. Each when given: *record = the step's flag, *steps counts the steps without
// an inf, *skipped the consecutive ones with; *found is reset unless *skipped reached max_skipped (> 0).
extern "C" __global__ void update_scale(float *scale, int *tracker, int *found, int *record, int *steps, int *skipped,
                                        int max_skipped, double growth, double backoff, int interval, float min_scale) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	int inf = *found != 0;
	if (inf) {
		*scale = fmaxf(__double2float_rn(__dmul_rn((double)*scale, backoff)), min_scale);
		*tracker = 0;
	} else if (*tracker + 1 == interval) {
		float g = __double2float_rn(__dmul_rn((double)*scale, growth));
		if (isfinite(g)) *scale = g;
		*tracker = 0;
	} else {
		*tracker += 1;
	}
	if (record) *record = inf;
	if (steps && !inf) *steps += 1;
	int halt = 0;
	if (skipped) {
		*skipped = inf ? *skipped + 1 : 0;
		halt = max_skipped > 0 && *skipped >= max_skipped;
	}
	if (!halt) *found = 0;
}

// adamw: unless *skip (when given) is set, one step of torch.optim.AdamW (decoupled weight decay, _single_tensor_adam) over chunk b of the flat
// F32 buffers; chunk pointers point into params, and grads, exp_avg, exp_avg_sq are at the same element offsets.
// The scalars are PyTorch's Python floats, computed by the host in float64 and rounded to float32 (as PyTorch
// casts a scalar to the tensor's type, and as tensor/cpu does): decay = 1 − lr·wd, ob1 = 1 − β1, ob2 = 1 − β2,
// step = lr/(1 − β1^t), bc2 = √(1 − β2^t). Per element, in tensor/cpu's operation order:
//   p = p·decay                  (chunks whose segment decays)
//   m = β1·m + ob1·g
//   v = β2·v + ob2·g·g
//   p = p − step·m / (√v/bc2 + eps)
// When the four buffers are 16-byte aligned, the chunk's elements from its first 16-byte boundary on go as
// float4 groups, ADAMW_U groups of each buffer loaded per thread before any is stored (the four streams of
// 16-byte loads keep the H200's memory busy; one scalar load per buffer and thread gave 1.5 TB/s); the few
// elements before that boundary and after the last full group go one by one. Each element sees the same
// operations either way.
// With table (AdamWArgs.Table, rows (decay, step, bc2)) the three come from row *row of it, clamped to
// [0, rows), instead of the arguments. With gnorm (AdamWArgs.GradNorm) every g is first clipped as clip_scale
// would clip it in memory, g = g·coef rounded to FP32 (clip_coef; nothing when clip_scale would not scale),
// and grads is only read.
extern "C" __global__ void adamw(const Chunk *chunks, u64 params, u64 grads, u64 exp_avg, u64 exp_avg_sq,
                                 float decay, float beta1, float beta2, float ob1, float ob2, float step, float bc2,
                                 float eps, const int *skip, const float *table, const int *row, int rows,
                                 const long long *gnorm, float max_norm) {
	if (skip && *skip) return; // a step the device flagged (AdamWArgs.Skip)
	if (table) {
		int k = min(max(*row, 0), rows - 1);
		decay = table[3 * k], step = table[3 * k + 1], bc2 = table[3 * k + 2];
	}
	float coef = 1.0f;
	bool clip = gnorm && clip_coef(*gnorm, max_norm, coef);
	Chunk ch = chunks[blockIdx.x];
	i64 off = (i64)(ch.ptr - params) / 4;
	float *p = (float *)params + off;
	const float *g = (const float *)grads + off;
	float *m = (float *)exp_avg + off;
	float *v = (float *)exp_avg_sq + off;
	int dec = (int)ch.tag;
	bool aligned = ((params | grads | exp_avg | exp_avg_sq) & 15) == 0;
	i64 head = aligned ? min(ch.n, (i64)((4 - (off & 3)) & 3)) : ch.n;
	i64 groups = (ch.n - head) / 4;
	for (i64 i = threadIdx.x; i < head; i += blockDim.x)
		adamw_el(p[i], clipped(g[i], clip, coef), m[i], v[i], dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
	float4 *p4 = (float4 *)(p + head), *m4 = (float4 *)(m + head), *v4 = (float4 *)(v + head);
	const float4 *g4 = (const float4 *)(g + head);
	i64 j = threadIdx.x;
	for (; j + (ADAMW_U - 1) * blockDim.x < groups; j += ADAMW_U * blockDim.x) {
		float4 pq[ADAMW_U], gq[ADAMW_U], mq[ADAMW_U], vq[ADAMW_U];
#pragma unroll
		for (int u = 0; u < ADAMW_U; u++) {
			i64 k = j + u * blockDim.x;
			pq[u] = p4[k], gq[u] = clipped4(g4[k], clip, coef), mq[u] = m4[k], vq[u] = v4[k];
		}
#pragma unroll
		for (int u = 0; u < ADAMW_U; u++) {
			adamw_el(pq[u].x, gq[u].x, mq[u].x, vq[u].x, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
			adamw_el(pq[u].y, gq[u].y, mq[u].y, vq[u].y, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
			adamw_el(pq[u].z, gq[u].z, mq[u].z, vq[u].z, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
			adamw_el(pq[u].w, gq[u].w, mq[u].w, vq[u].w, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
			i64 k = j + u * blockDim.x;
			p4[k] = pq[u], m4[k] = mq[u], v4[k] = vq[u];
		}
	}
	for (; j < groups; j += blockDim.x) {
		float4 pq = p4[j], gq = clipped4(g4[j], clip, coef), mq = m4[j], vq = v4[j];
		adamw_el(pq.x, gq.x, mq.x, vq.x, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
		adamw_el(pq.y, gq.y, mq.y, vq.y, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
		adamw_el(pq.z, gq.z, mq.z, vq.z, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
		adamw_el(pq.w, gq.w, mq.w, vq.w, dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
		p4[j] = pq, m4[j] = mq, v4[j] = vq;
	}
	for (i64 i = head + 4 * groups + threadIdx.x; i < ch.n; i += blockDim.x)
		adamw_el(p[i], clipped(g[i], clip, coef), m[i], v[i], dec, decay, beta1, beta2, ob1, ob2, step, bc2, eps);
}
