// layernorm2.cu: the v2 LayerNorm kernels for C = 128·NG (TUNE_CUDA_OPS=v2, the default; cuda/ops.go), in
// their own module so that norm.cu's and lnbwd.cu's v1 kernels and these each compile only when used.
// Compiled without -lineinfo, as lnbwd.cu (see optionsFor in nvrtc.go). Each kernel gives the bits of the
// v1 kernel it replaces: the same operations in the same order; only when loads are issued differs.
//
// - layernorm_bwd_fused2_<NG>: layernorm_bwd_fused_<NG> (lnbwd.cu) has one block per chunk (128 blocks for
//   32768 rows: one per multiprocessor) and a warp works on one row at a time, so the SM idles through each
//   row's reductions: 2.2 TB/s on the H200. Here a warp loads RW rows (rows r and r+8 for RW = 2) before it
//   reduces any, so their loads and the two rows' reductions overlap. NG ≤ 6 (C ≤ 768; NVRTC 11.8: 225
//   registers at NG = 6, no spills): wider rows would pass 255 registers and keep the v1 kernel.
// - residual_layernorm_fwd2_<NG>: residual_layernorm_fwd (norm.cu) with the lane's slice of the row held in
//   registers: y and x are loaded before sum is stored (the v1 kernel's stores kept each lane to one group's
//   loads at a time) and the statistics are taken from the registers, which hold exactly the stored values.
#include "common.cuh"

// ln_row_store computes dx of one row from its loaded x and dout slices (layernorm_bwd's formula and order),
// stores dx and dy, and adds the row into the lane's dgamma and dbeta sums.
template <int NG>
__device__ __forceinline__ void ln_row_store(F4 (&xv)[NG], F4 (&dv)[NG], float m, float r, float mg, float mgn,
                                             float (&ga)[NG][4], float (&gb)[NG][4], void *dx, int dtdx, void *dy,
                                             int dtdy, const void *gamma, int dtg, i64 base, int lane, float p,
                                             float scale, uint2 key, u64 offset) {
#pragma unroll
	for (int j = 0; j < NG; j++) {
		int c = lane * 4 + j * 128;
		F4 w = ld4(gamma, dtg, c), o;
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

// ln_row_sums returns the row's Σ dout·gamma and Σ dout·gamma·n̂ over the warp (layernorm_bwd's order).
template <int NG>
__device__ __forceinline__ float2 ln_row_sums(F4 (&xv)[NG], F4 (&dv)[NG], float m, float r, const void *gamma, int dtg,
                                              int lane) {
	float sg = 0.0f, sgn = 0.0f;
#pragma unroll
	for (int j = 0; j < NG; j++) {
		F4 w = ld4(gamma, dtg, lane * 4 + j * 128);
#pragma unroll
		for (int q = 0; q < 4; q++) {
			float g = dv[j].v[q] * w.v[q];
			sg += g;
			sgn += g * (xv[j].v[q] - m) * r;
		}
	}
	return make_float2(sg, sgn);
}

template <int NG, int RW>
__device__ __forceinline__ void ln_bwd_fused2(float (*sh)[NG * 128], float *pa, float *pb, void *dx, int dtdx, void *dy,
                                              int dtdy, const void *dout, int dtd, const void *x, int dtx,
                                              const void *gamma, int dtg, const float *mean, const float *rstd, i64 N,
                                              int C, i64 rows, float p, float scale, u64 seed, u64 offset) {
	int wp = threadIdx.x / 32, lane = threadIdx.x % 32;
	i64 k = blockIdx.x;
	i64 lo = k * rows, hi = min(N, lo + rows);
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	float ga[NG][4], gb[NG][4];
#pragma unroll
	for (int j = 0; j < NG; j++)
#pragma unroll
		for (int q = 0; q < 4; q++) ga[j][q] = 0.0f, gb[j][q] = 0.0f;
	i64 row = lo + wp;
	for (; row + 8 * (RW - 1) < hi; row += 8 * RW) {
		F4 xv[RW][NG], dv[RW][NG];
		float m[RW], r[RW], mg[RW], mgn[RW];
#pragma unroll
		for (int t = 0; t < RW; t++) {
			i64 base = (row + 8 * t) * C;
			m[t] = mean[row + 8 * t], r[t] = rstd[row + 8 * t];
#pragma unroll
			for (int j = 0; j < NG; j++) {
				xv[t][j] = ld4(x, dtx, base + lane * 4 + j * 128);
				dv[t][j] = ld4(dout, dtd, base + lane * 4 + j * 128);
			}
		}
		float2 s[RW];
#pragma unroll
		for (int t = 0; t < RW; t++) s[t] = ln_row_sums<NG>(xv[t], dv[t], m[t], r[t], gamma, dtg, lane);
#pragma unroll
		for (int t = 0; t < RW; t++) {
			mg[t] = warp_sum(s[t].x) / (float)C;
			mgn[t] = warp_sum(s[t].y) / (float)C;
		}
#pragma unroll
		for (int t = 0; t < RW; t++)
			ln_row_store<NG>(xv[t], dv[t], m[t], r[t], mg[t], mgn[t], ga, gb, dx, dtdx, dy, dtdy, gamma, dtg,
			                 (row + 8 * t) * C, lane, p, scale, key, offset);
	}
	for (; row < hi; row += 8) {
		i64 base = row * C;
		float m = mean[row], r = rstd[row];
		F4 xv[NG], dv[NG];
#pragma unroll
		for (int j = 0; j < NG; j++) {
			xv[j] = ld4(x, dtx, base + lane * 4 + j * 128);
			dv[j] = ld4(dout, dtd, base + lane * 4 + j * 128);
		}
		float2 s = ln_row_sums<NG>(xv, dv, m, r, gamma, dtg, lane);
		float mg = warp_sum(s.x) / (float)C, mgn = warp_sum(s.y) / (float)C;
		ln_row_store<NG>(xv, dv, m, r, mg, mgn, ga, gb, dx, dtdx, dy, dtdy, gamma, dtg, base, lane, p, scale, key,
		                 offset);
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

#define LN_BWD_FUSED2(NG, RW)                                                                                     \
	extern "C" __global__ void __launch_bounds__(256) layernorm_bwd_fused2_##NG(                               \
	    float *pa, float *pb, void *dx, int dtdx, void *dy, int dtdy, const void *dout, int dtd, const void *x,    \
	    int dtx, const void *gamma, int dtg, const float *mean, const float *rstd, i64 N, int C, i64 rows,       \
	    float p, float scale, u64 seed, u64 offset) {                                                             \
		__shared__ float sh[8][NG * 128];                                                                         \
		ln_bwd_fused2<NG, RW>(sh, pa, pb, dx, dtdx, dy, dtdy, dout, dtd, x, dtx, gamma, dtg, mean, rstd, N, C, rows, \
		                      p, scale, seed, offset);                                                            \
	}
LN_BWD_FUSED2(1, 2)
LN_BWD_FUSED2(2, 2)
LN_BWD_FUSED2(3, 2)
LN_BWD_FUSED2(4, 2)
LN_BWD_FUSED2(5, 2)
LN_BWD_FUSED2(6, 2)

template <int NG>
__device__ __forceinline__ void res_ln_fwd2(void *sum, int dts, void *out, int dto, void *outh, int dth, float *mean,
                                            float *rstd, const void *y, int dty, const void *x, int dtx,
                                            const void *gamma, int dtg, const void *beta, int dtb, i64 N, int C,
                                            float eps, float p, float scale, u64 seed, u64 offset) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	F4 a[NG], b[NG];
#pragma unroll
	for (int j = 0; j < NG; j++) {
		a[j] = ld4(y, dty, base + lane * 4 + j * 128);
		b[j] = ld4(x, dtx, base + lane * 4 + j * 128);
	}
	float s = 0.0f;
#pragma unroll
	for (int j = 0; j < NG; j++) {
		i64 c = base + lane * 4 + j * 128;
		if (p != 0.0f) { // one Philox block serves the four elements (c is a multiple of 4)
			u64 ctr = offset + (u64)(c / 4);
			uint4 blk = philox4x32_10(make_uint4((u32)ctr, (u32)(ctr >> 32), 0u, 0u), key);
			u32 w[4] = {blk.x, blk.y, blk.z, blk.w};
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float keep = (float)(w[k] >> 8) * (1.0f / 16777216.0f) >= p ? 1.0f : 0.0f;
				a[j].v[k] = round_to(a[j].v[k] * keep * scale, dty);
			}
		}
#pragma unroll
		for (int k = 0; k < 4; k++) a[j].v[k] = round_to(a[j].v[k] + b[j].v[k], dts);
		st4(sum, dts, c, a[j]);
		s += a[j].v[0], s += a[j].v[1], s += a[j].v[2], s += a[j].v[3];
	}
	float m = warp_sum(s) / (float)C;
	float ss = 0.0f;
#pragma unroll
	for (int j = 0; j < NG; j++)
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float d = a[j].v[k] - m;
			ss += d * d;
		}
	float var = warp_sum(ss) / (float)C;
	float r = (float)(1.0 / sqrt((double)(var + eps)));
#pragma unroll
	for (int j = 0; j < NG; j++) {
		int c = lane * 4 + j * 128;
		F4 g = ld4(gamma, dtg, c), bt = ld4(beta, dtb, c), o;
#pragma unroll
		for (int k = 0; k < 4; k++) o.v[k] = (a[j].v[k] - m) * r * g.v[k] + bt.v[k];
		st4(out, dto, base + c, o);
		if (outh) {
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = round_to(o.v[k], dto);
			st4(outh, dth, base + c, o);
		}
	}
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = r;
	}
}

#define RES_LN_FWD2(NG)                                                                                           \
	extern "C" __global__ void __launch_bounds__(256) residual_layernorm_fwd2_##NG(                              \
	    void *sum, int dts, void *out, int dto, void *outh, int dth, float *mean, float *rstd, const void *y,      \
	    int dty, const void *x, int dtx, const void *gamma, int dtg, const void *beta, int dtb, i64 N, int C,      \
	    float eps, float p, float scale, u64 seed, u64 offset) {                                                  \
		res_ln_fwd2<NG>(sum, dts, out, dto, outh, dth, mean, rstd, y, dty, x, dtx, gamma, dtg, beta, dtb, N, C,    \
		                eps, p, scale, seed, offset);                                                            \
	}
RES_LN_FWD2(1)
RES_LN_FWD2(2)
RES_LN_FWD2(3)
RES_LN_FWD2(4)
RES_LN_FWD2(5)
RES_LN_FWD2(6)
RES_LN_FWD2(7)
RES_LN_FWD2(8)
