// thin.cu: GEMMs with one dimension of at most 16 (LoRA's rank-r products: h = x·Aᵀ, out += s·h·Bᵀ, their
// gradients), C = alpha·op(A)·op(B) + beta·C row-major, A and B F16 or BF16, C F32 or A's type, FP32
// accumulation, one batch member, no bias (cuda/thin.go picks them by shape alone).
//
// cuBLASLt's heuristic choice ran these at 2–3 TFLOP/s on the H200 (about 20 µs each timed alone for the
// 4096×768×8-class products of BERT-base 32×128 LoRA r=8, which move 6–25 MB: session 6, call d1). The kernels
// here read the large operand once.
//
// Each output element is summed in a fixed order that depends only on the shape (never on timing or on
// which block runs first), so results are bit-identical run to run:
//
// - thin_rowdot_<NT> (N ≤ NT, K > 16, op(A) = A): a warp takes four rows of A at a time; lane l sums, in
//   increasing k, the products of k = kb + 8l … kb + 8l + 7 for each 256-wide step kb, then the warp adds the 32
//   lane sums by a butterfly (xor 16, 8, 4, 2, 1). op(B) (K×N) is held in shared memory as FP32, column-major.
// - thin_smallk (K ≤ 16): a thread computes four consecutive columns of one row, the K products added in
//   increasing k; op(B)'s column tile (K×128) is in shared memory.
// - thin_tn_partial_<SN> + thin_tn_reduce (op(A) = Aᵀ, op(B) = B, M or N ≤ 16, the reduction over K rows of two
//   K-major operands): each block sums a chunk of K rows in increasing k into an FP32 partial (chunk, S, L),
//   then thin_tn_reduce adds the chunks' partials in increasing chunk order. S is the thin side, L the other.
//
// Each product is added with one fused multiply-add (__fmaf_rn, as a Tensor Core GEMM accumulates; the
// module's --fmad=false only stops the compiler from contracting other expressions). The result is alpha·sum,
// plus beta·C when beta ≠ 0 (C is not read when beta == 0), rounded once to C.
#include "common.cuh"

// opb returns op(B)(k, j) of a row-major B with leading dimension ldb (transposed: B is N×K).
__device__ __forceinline__ float opb(const void *b, int dt, i64 ldb, int trans, i64 k, i64 j) {
	return trans ? ld(b, dt, j * ldb + k) : ld(b, dt, k * ldb + j);
}

// finish returns alpha·sum (+ beta·C[i] when beta ≠ 0).
__device__ __forceinline__ float finish(float sum, float alpha, float beta, const void *c, int dtc, i64 i) {
	float v = alpha * sum;
	if (beta != 0.0f) v = v + beta * ld(c, dtc, i);
	return v;
}

// fill_smem stores f(e) for e < total into dst, the block's threads taking e ≡ threadIdx.x (mod blockDim.x): U
// loads issued before any store, so that a thread waits for one round trip per U elements, not one per element.
template <int U, typename F>
__device__ __forceinline__ void fill_smem(float *dst, int total, F f) {
	for (int e0 = threadIdx.x; e0 < total; e0 += U * blockDim.x) {
		float v[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int e = e0 + u * blockDim.x;
			v[u] = e < total ? f(e) : 0.0f;
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			int e = e0 + u * blockDim.x;
			if (e < total) dst[e] = v[u];
		}
	}
}

#define ROWDOT_ROWS 4    // rows of A a warp sums at once (each op(B) value read from shared memory serves four)
#define ROWDOT_SMEM 12288 // FP32 words of op(B) in shared memory: NT·roundup(K, 8) ≤ this (48 KiB)

#define ROWDOT_STEPS 3 // 256-wide k steps whose loads a warp issues together (K = 768: all of a row)

// rowdot: a warp's lane l takes k = kb + 8l … kb + 8l + 7 of each 256-wide step kb, in increasing k (one 16-byte
// load a row when vec: A's address and lda allow it and K % 8 == 0; the same values from 2-byte loads otherwise).
template <int NT>
__device__ __forceinline__ void rowdot(const void *a, i64 lda, const void *b, i64 ldb, int transb, int dtab,
                                       void *c, i64 ldc, int dtc, i64 M, int N, int K, float alpha, float beta,
                                       int vec) {
	__shared__ __align__(16) float bs[ROWDOT_SMEM]; // bs[j*kp + k] = op(B)(k, j), 0 past N and past K
	int kp = (K + 7) / 8 * 8;
	fill_smem<16>(bs, NT * kp, [&](int e) {
		int j = e / kp, k = e % kp;
		return j < N && k < K ? opb(b, dtab, ldb, transb, k, j) : 0.0f;
	});
	__syncthreads();
	int lane = threadIdx.x % 32, warps = blockDim.x / 32;
	i64 groups = (M + ROWDOT_ROWS - 1) / ROWDOT_ROWS;
	for (i64 g = (i64)blockIdx.x * warps + threadIdx.x / 32; g < groups; g += (i64)gridDim.x * warps) {
		i64 r0 = g * ROWDOT_ROWS;
		float acc[ROWDOT_ROWS][NT];
#pragma unroll
		for (int r = 0; r < ROWDOT_ROWS; r++)
#pragma unroll
			for (int j = 0; j < NT; j++) acc[r][j] = 0.0f;
		for (int kb0 = 0; kb0 < K; kb0 += 256 * ROWDOT_STEPS) {
			uint4 q[ROWDOT_STEPS][ROWDOT_ROWS]; // the 8 elements at k of each step and row, as stored
#pragma unroll
			for (int st = 0; st < ROWDOT_STEPS; st++) {
				int k = kb0 + st * 256 + lane * 8;
#pragma unroll
				for (int r = 0; r < ROWDOT_ROWS; r++) {
					q[st][r] = make_uint4(0u, 0u, 0u, 0u);
					if (k >= K || r0 + r >= M) continue;
					const u16 *row = (const u16 *)a + (r0 + r) * lda + k;
					if (vec) {
						q[st][r] = *(const uint4 *)row;
					} else {
						u32 h[8];
#pragma unroll
						for (int e = 0; e < 8; e++) h[e] = k + e < K ? (u32)row[e] : 0u;
						q[st][r] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
					}
				}
			}
#pragma unroll
			for (int st = 0; st < ROWDOT_STEPS; st++) {
				int k = kb0 + st * 256 + lane * 8;
				if (k >= K) break;
				float x[ROWDOT_ROWS][8];
#pragma unroll
				for (int r = 0; r < ROWDOT_ROWS; r++) {
					uint4 v = q[st][r];
					x[r][0] = half_to_f32((u16)(v.x & 0xffffu), dtab), x[r][1] = half_to_f32((u16)(v.x >> 16), dtab);
					x[r][2] = half_to_f32((u16)(v.y & 0xffffu), dtab), x[r][3] = half_to_f32((u16)(v.y >> 16), dtab);
					x[r][4] = half_to_f32((u16)(v.z & 0xffffu), dtab), x[r][5] = half_to_f32((u16)(v.z >> 16), dtab);
					x[r][6] = half_to_f32((u16)(v.w & 0xffffu), dtab), x[r][7] = half_to_f32((u16)(v.w >> 16), dtab);
				}
#pragma unroll
				for (int j = 0; j < NT; j++) {
					float4 w0 = *(const float4 *)&bs[j * kp + k], w1 = *(const float4 *)&bs[j * kp + k + 4];
#pragma unroll
					for (int r = 0; r < ROWDOT_ROWS; r++) {
						float t = acc[r][j];
						t = __fmaf_rn(x[r][0], w0.x, t), t = __fmaf_rn(x[r][1], w0.y, t);
						t = __fmaf_rn(x[r][2], w0.z, t), t = __fmaf_rn(x[r][3], w0.w, t);
						t = __fmaf_rn(x[r][4], w1.x, t), t = __fmaf_rn(x[r][5], w1.y, t);
						t = __fmaf_rn(x[r][6], w1.z, t), t = __fmaf_rn(x[r][7], w1.w, t);
						acc[r][j] = t;
					}
				}
			}
		}
#pragma unroll
		for (int r = 0; r < ROWDOT_ROWS; r++) {
			float mine = 0.0f;
#pragma unroll
			for (int j = 0; j < NT; j++) {
				float s = warp_sum(acc[r][j]);
				if (lane == j) mine = s;
			}
			if (lane < N && r0 + r < M) {
				i64 ci = (r0 + r) * ldc + lane;
				st(c, dtc, ci, finish(mine, alpha, beta, c, dtc, ci));
			}
		}
	}
}

#define ROWDOT(NT)                                                                                                 \
	extern "C" __global__ void __launch_bounds__(256, 1) thin_rowdot_##NT(                                          \
	    const void *a, i64 lda, const void *b, i64 ldb, int transb, int dtab, void *c, i64 ldc, int dtc, i64 M,   \
	    int N, int K, float alpha, float beta, int vec) {                                                          \
		rowdot<NT>(a, lda, b, ldb, transb, dtab, c, ldc, dtc, M, N, K, alpha, beta, vec);                     \
	}
ROWDOT(4)
ROWDOT(8)
ROWDOT(16)

#define SMALLK_COLS 128 // columns of a block's tile: 32 lanes × 4
#define SMALLK_ROWS 32  // rows of a block (four per warp of 256 threads)

// thin_smallk: grid (column tiles, row groups), 256 threads. vec: C's address and ldc allow 4-element accesses.
// A warp's four rows i = y·32 + warp + 8t: their A values (and C, when read) are loaded before any product.
extern "C" __global__ void __launch_bounds__(256) thin_smallk(const void *a, i64 lda, int transa, const void *b,
                                                              i64 ldb, int transb, int dtab, void *c, i64 ldc,
                                                              int dtc, i64 M, int N, int K, float alpha,
                                                              float beta, int vec) {
	__shared__ __align__(16) float bs[16 * SMALLK_COLS]; // bs[k*128 + jj] = op(B)(k, j0 + jj), 0 past N
	i64 j0 = (i64)blockIdx.x * SMALLK_COLS;
	fill_smem<8>(bs, K * SMALLK_COLS, [&](int e) {
		int k = e / SMALLK_COLS, jj = e % SMALLK_COLS;
		return j0 + jj < N ? opb(b, dtab, ldb, transb, k, j0 + jj) : 0.0f;
	});
	__syncthreads();
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	i64 j = j0 + lane * 4;
	if (j >= N) return;
	bool v4 = vec && j + 3 < N;
	i64 rEnd = min((i64)(blockIdx.y + 1) * SMALLK_ROWS, M);
	i64 i0 = (i64)blockIdx.y * SMALLK_ROWS + warp;
	float x[4][16];
	F4 old[4];
#pragma unroll
	for (int t = 0; t < 4; t++) {
		i64 i = i0 + 8 * t;
#pragma unroll
		for (int k = 0; k < 16; k++)
			x[t][k] = k < K && i < rEnd ? (transa ? ld(a, dtab, (i64)k * lda + i) : ld(a, dtab, i * lda + k)) : 0.0f;
		if (v4 && beta != 0.0f && i < rEnd) old[t] = ld4(c, dtc, i * ldc + j);
	}
#pragma unroll
	for (int t = 0; t < 4; t++) {
		i64 i = i0 + 8 * t;
		if (i >= rEnd) break;
		float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
		for (int k = 0; k < 16; k++) {
			if (k >= K) break;
			float4 w = *(const float4 *)&bs[k * SMALLK_COLS + lane * 4];
			acc[0] = __fmaf_rn(x[t][k], w.x, acc[0]), acc[1] = __fmaf_rn(x[t][k], w.y, acc[1]);
			acc[2] = __fmaf_rn(x[t][k], w.z, acc[2]), acc[3] = __fmaf_rn(x[t][k], w.w, acc[3]);
		}
		i64 ci = i * ldc + j;
		if (v4) {
			F4 r;
#pragma unroll
			for (int q = 0; q < 4; q++) r.v[q] = beta != 0.0f ? alpha * acc[q] + beta * old[t].v[q] : alpha * acc[q];
			st4(c, dtc, ci, r);
		} else {
			for (int q = 0; q < 4 && j + q < N; q++) st(c, dtc, ci + q, finish(acc[q], alpha, beta, c, dtc, ci + q));
		}
	}
}

#define TN_THREADS 128 // threads of a thin_tn_partial block, two L columns each
#define TN_KC 64        // K rows of a chunk
#define TN_U 32         // rows a thread loads at once

// thin_tn_partial_<SN> (S ≤ SN): grid (L tiles of 256, chunks of kc rows, kc a multiple of TN_KC), 128 threads;
// part[(chunk*S + s)*L + l] = Σ over the chunk's k in increasing order of big[k*ldl + l]·small[k*lds + s].
// vec: big's address and ldl are even, so a thread's two columns are one 4-byte load.
template <int SN>
__device__ __forceinline__ void tn_partial(const void *big, i64 ldl, const void *small, i64 lds, int dt, float *part,
                                           i64 K, i64 L, int S, int kc, int vec) {
	__shared__ __align__(16) float ss[TN_KC * SN]; // ss[kk*SN + s] = small[(k0+kk)*lds + s], 0 past S
	i64 l = ((i64)blockIdx.x * TN_THREADS + threadIdx.x) * 2;
	bool live = l < L, two = l + 1 < L;
	float acc0[SN], acc1[SN];
#pragma unroll
	for (int s = 0; s < SN; s++) acc0[s] = 0.0f, acc1[s] = 0.0f;
	i64 kEnd = min((i64)(blockIdx.y + 1) * kc, K);
	for (i64 k0 = (i64)blockIdx.y * kc; k0 < kEnd; k0 += TN_KC) {
		int n = (int)min((i64)TN_KC, kEnd - k0);
		__syncthreads(); // the previous piece's reads of ss are done
		fill_smem<8>(ss, n * SN, [&](int e) {
			int kk = e / SN, s = e % SN;
			return s < S ? ld(small, dt, (k0 + kk) * lds + s) : 0.0f;
		});
		__syncthreads();
		if (!live) continue;
		const u16 *bp = (const u16 *)big + k0 * ldl + l;
		for (int kb = 0; kb < n; kb += TN_U) { // TN_U rows' loads issued before any of their products
			float x0[TN_U], x1[TN_U];
#pragma unroll
			for (int u = 0; u < TN_U; u++) {
				int kk = kb + u;
				x0[u] = 0.0f, x1[u] = 0.0f;
				if (kk < n) {
					if (vec && two) {
						u32 q = *(const u32 *)(bp + kk * ldl);
						x0[u] = half_to_f32((u16)(q & 0xffffu), dt), x1[u] = half_to_f32((u16)(q >> 16), dt);
					} else {
						x0[u] = half_to_f32(bp[kk * ldl], dt);
						if (two) x1[u] = half_to_f32(bp[kk * ldl + 1], dt);
					}
				}
			}
#pragma unroll
			for (int u = 0; u < TN_U; u++) {
				if (kb + u >= n) break;
				const float *w = &ss[(kb + u) * SN];
#pragma unroll
				for (int s = 0; s < SN; s++) acc0[s] = __fmaf_rn(x0[u], w[s], acc0[s]), acc1[s] = __fmaf_rn(x1[u], w[s], acc1[s]);
			}
		}
	}
	if (!live) return;
	float *out = part + (i64)blockIdx.y * S * L + l;
#pragma unroll
	for (int s = 0; s < SN; s++)
		if (s < S) {
			out[(i64)s * L] = acc0[s];
			if (two) out[(i64)s * L + 1] = acc1[s];
		}
}

#define TN_PARTIAL(SN)                                                                                             \
	extern "C" __global__ void __launch_bounds__(TN_THREADS) thin_tn_partial_##SN(                               \
	    const void *big, i64 ldl, const void *small, i64 lds, int dt, float *part, i64 K, i64 L, int S, int kc,    \
	    int vec) {                                                                                                 \
		tn_partial<SN>(big, ldl, small, lds, dt, part, K, L, S, kc, vec);                                     \
	}
TN_PARTIAL(4)
TN_PARTIAL(8)
TN_PARTIAL(16)

// thin_tn_reduce: one thread per (s, l): C(s, l) (smallM: C is S×L) or C(l, s) (C is L×S) = alpha·Σ_chunks
// part + beta·C, the chunks added in increasing order.
extern "C" __global__ void thin_tn_reduce(const float *part, int chunks, i64 L, int S, void *c, i64 ldc, int dtc,
                                          int smallM, float alpha, float beta) {
	i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= (i64)S * L) return;
	i64 s = e / L, l = e % L;
	float sum = 0.0f;
	for (int q0 = 0; q0 < chunks; q0 += 32) { // 32 loads issued, then added in increasing q
		float v[32];
#pragma unroll
		for (int u = 0; u < 32; u++) v[u] = q0 + u < chunks ? part[(i64)(q0 + u) * S * L + e] : 0.0f;
#pragma unroll
		for (int u = 0; u < 32; u++)
			if (q0 + u < chunks) sum = sum + v[u];
	}
	i64 ci = smallM ? s * ldc + l : l * ldc + s;
	st(c, dtc, ci, finish(sum, alpha, beta, c, dtc, ci));
}
