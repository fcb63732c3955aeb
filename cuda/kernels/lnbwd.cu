// lnbwd.cu: the LayerNorm backward with its weight gradients' column sums in one pass, for the widths of
// BERT-like models (C = 128·NG, NG = 1..8: 768, 1024). A template over NG keeps each lane's row slice and its
// partial sums in registers; the file is compiled without -lineinfo (NVRTC 11.8 crashes on templates with
// line information; see optionsFor in nvrtc.go). norm.cu has the general kernels it matches.
#include "common.cuh"
#include "philox.cuh"

// ln_bwd_row is one row of layernorm_bwd_fused_<NG> from its x and dout slices (already in registers): the
// row's two means, dx (and dy) stored, the lane's dgamma and dbeta sums ga, gb advanced by the row.
template <int NG>
__device__ __forceinline__ void ln_bwd_row(float (&ga)[NG][4], float (&gb)[NG][4], const F4 (&xv)[NG], const F4 (&dv)[NG],
                                           const F4 (&gw)[NG], float m, float r, i64 base, int lane, void *dx, int dtdx,
                                           void *dy, int dtdy, int C, float p, float scale, uint2 key, u64 offset) {
	float sg = 0.0f, sgn = 0.0f;
#pragma unroll
	for (int j = 0; j < NG; j++) {
		const F4 &w = gw[j];
#pragma unroll
		for (int q = 0; q < 4; q++) {
			float g = dv[j].v[q] * w.v[q];
			sg += g;
			sgn += g * (xv[j].v[q] - m) * r;
		}
	}
	float mg = warp_sum(sg) / (float)C, mgn = warp_sum(sgn) / (float)C;
#pragma unroll
	for (int j = 0; j < NG; j++) {
		int c = lane * 4 + j * 128;
		const F4 &w = gw[j];
		F4 o;
#pragma unroll
		for (int q = 0; q < 4; q++) {
			float n = (xv[j].v[q] - m) * r;
			o.v[q] = r * (dv[j].v[q] * w.v[q] - mg - n * mgn);
			ga[j][q] += dv[j].v[q] * ((xv[j].v[q] - m) * r);
			gb[j][q] += dv[j].v[q];
		}
		st4(dx, dtdx, base + c, o);
		if (dy) {
			u32 wd[4] = {0u, 0u, 0u, 0u};
			if (p != 0.0f) philox_words(wd, (u64)((base + c) / 4), key, offset);
#pragma unroll
			for (int q = 0; q < 4; q++) o.v[q] = branch_grad(round_to(o.v[q], dtdx), q, wd, p, scale);
			st4(dy, dtdy, base + c, o);
		}
	}
}

// layernorm_bwd_fused_<NG>: layernorm_bwd (with its optional dy) and LayerNorm's colsum_partial (mode 1) in
// one pass, for C = 128·NG with vector access: block k (8 warps) owns the rows of chunk k, warp w its rows
// lo+w, lo+w+8, ... in order, each lane columns lane·4 + 128·j. A warp reads two of its rows (row and row + 8)
// into registers before it computes and stores the first (dx may alias x and dout, so the compiler could not
// start a row's loads before the previous row's stores: one row in flight per warp ran at 2.1 TB/s on the
// H200, r8), then handles them in order; the lane's dgamma and dbeta sums stay in registers and the eight
// warps' sums are added in order w = 0..7 through shared memory into partial[k][c]: the same additions in the
// same order as colsum_partial, so the same partials.
template <int NG>
__device__ __forceinline__ void ln_bwd_fused(float (*sh)[NG * 128], float *pa, float *pb, void *dx, int dtdx, void *dy, int dtdy,
                                             const void *dout, int dtd, const void *x, int dtx, const void *gamma,
                                             int dtg, const float *mean, const float *rstd, i64 N, int C,
                                             i64 rows, float p, float scale, u64 seed, u64 offset) {
	int wp = threadIdx.x / 32, lane = threadIdx.x % 32;
	i64 k = blockIdx.x;
	i64 lo = k * rows, hi = min(N, lo + rows);
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	offset += tune_philox_base; // the step's base (philox.cuh)
	float ga[NG][4], gb[NG][4];
#pragma unroll
	for (int j = 0; j < NG; j++)
#pragma unroll
		for (int q = 0; q < 4; q++) ga[j][q] = 0.0f, gb[j][q] = 0.0f;
	F4 gw[NG]; // the lane's gamma, read once (the stores could alias it for all the compiler knows)
#pragma unroll
	for (int j = 0; j < NG; j++) gw[j] = ld4(gamma, dtg, lane * 4 + j * 128);
	i64 row = lo + wp;
	for (; row + 8 < hi; row += 16) {
		i64 base = row * C, base2 = base + 8 * C;
		float m = mean[row], r = rstd[row], m2 = mean[row + 8], r2 = rstd[row + 8];
		F4 xv[NG], dv[NG], xv2[NG], dv2[NG];
#pragma unroll
		for (int j = 0; j < NG; j++) {
			xv[j] = ld4(x, dtx, base + lane * 4 + j * 128);
			dv[j] = ld4(dout, dtd, base + lane * 4 + j * 128);
		}
#pragma unroll
		for (int j = 0; j < NG; j++) {
			xv2[j] = ld4(x, dtx, base2 + lane * 4 + j * 128);
			dv2[j] = ld4(dout, dtd, base2 + lane * 4 + j * 128);
		}
		ln_bwd_row<NG>(ga, gb, xv, dv, gw, m, r, base, lane, dx, dtdx, dy, dtdy, C, p, scale, key, offset);
		ln_bwd_row<NG>(ga, gb, xv2, dv2, gw, m2, r2, base2, lane, dx, dtdx, dy, dtdy, C, p, scale, key, offset);
	}
	if (row < hi) {
		i64 base = row * C;
		F4 xv[NG], dv[NG];
#pragma unroll
		for (int j = 0; j < NG; j++) {
			xv[j] = ld4(x, dtx, base + lane * 4 + j * 128);
			dv[j] = ld4(dout, dtd, base + lane * 4 + j * 128);
		}
		ln_bwd_row<NG>(ga, gb, xv, dv, gw, mean[row], rstd[row], base, lane, dx, dtdx, dy, dtdy, C, p, scale, key, offset);
	}
	for (int pass = 0; pass < 2; pass++) {
#pragma unroll
		for (int j = 0; j < NG; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) sh[wp][lane * 4 + j * 128 + q] = pass ? gb[j][q] : ga[j][q];
		__syncthreads();
		float *out = pass ? pb : pa;
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float t = 0.0f;
			for (int w = 0; w < 8; w++) t += sh[w][c];
			out[k * C + c] = t;
		}
		__syncthreads();
	}
}

#define LN_BWD_FUSED(NG)                                                                                          \
	extern "C" __global__ void layernorm_bwd_fused_##NG(                                  \
	    float *pa, float *pb, void *dx, int dtdx, void *dy, int dtdy, const void *dout, int dtd, const void *x,    \
	    int dtx, const void *gamma, int dtg, const float *mean, const float *rstd, i64 N, int C, i64 rows,       \
	    float p, float scale, u64 seed, u64 offset) {                                                             \
		__shared__ float sh[8][NG * 128];                                                                         \
		ln_bwd_fused<NG>(sh, pa, pb, dx, dtdx, dy, dtdy, dout, dtd, x, dtx, gamma, dtg, mean, rstd, N, C, rows, p,    \
		                 scale, seed, offset);                                                                    \
	}
LN_BWD_FUSED(1)
LN_BWD_FUSED(2)
LN_BWD_FUSED(3)
LN_BWD_FUSED(4)
LN_BWD_FUSED(5)
LN_BWD_FUSED(6)
LN_BWD_FUSED(7)
LN_BWD_FUSED(8)
