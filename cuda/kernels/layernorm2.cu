// layernorm2.cu: the v2 LayerNorm kernels for C = 128·NG (TUNE_CUDA_OPS=v2 and v3, the default; cuda/ops.go), in
// their own module so that norm.cu's v1 kernels and these each compile only when used. Compiled without
// -lineinfo, as lnbwd.cu (see optionsFor in nvrtc.go). Each kernel gives the bits of the v1 kernel it replaces:
// the same operations in the same order; only when loads are issued differs.
//
// - residual_layernorm_fwd2_<NG>: residual_layernorm_fwd (norm.cu) with the lane's slice of the row held in
//   registers: y and x are loaded before sum is stored (the v1 kernel's stores kept each lane to one group's
//   loads at a time) and the statistics are taken from the registers, which hold exactly the stored values.
//   H200 (r6): 3.1 TB/s in the BERT-base step (v1 2.9).
// - layernorm_bwd2_<NG>: layernorm_bwd (norm.cu) with the lane's slice of x, dout and gamma held in registers
//   between its passes (the two-pass LayerNorm backward's row kernel, cuda/rows.go).
//
// A two-rows-per-warp layernorm_bwd_fused (the same bits, 225 registers) was slower on the H200 (r6: 4.23 vs
// 3.92 ms/step over 24 calls): with one block of eight warps per multiprocessor the kernel is bound by
// instruction latency, not by loads in flight, so it was dropped.
#include "common.cuh"
#include "philox.cuh"

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
	offset += tune_philox_base; // the step's base (philox.cuh)
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
		if (p != 0.0f) { // one Philox call serves the four elements (c is a multiple of 4)
			u32 w[4];
			philox_words(w, (u64)(c / 4), key, offset);
#pragma unroll
			for (int k = 0; k < 4; k++) a[j].v[k] = round_to(a[j].v[k] * keep_of(w[k], p) * scale, dty);
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

// layernorm_bwd2_<NG>: layernorm_bwd (norm.cu) with the lane's slice of x, dout and gamma held in registers
// between its two passes: every load of the row is issued before the sums (layernorm_bwd reads the row again for
// dx, from L1/L2, after the warp's reductions), and the operations and their order are layernorm_bwd's (vec=1
// path: elements c = 4·lane + 128·j + k in increasing j, then k), so the bits are the same. dx may alias x or
// dout: each lane stores only elements it has already read.
template <int NG>
__device__ __forceinline__ void ln_bwd2(void *dx, int dtdx, void *dy, int dtdy, const void *dout, int dtd,
                                        const void *x, int dtx, const void *gamma, int dtg, const float *mean,
                                        const float *rstd, i64 N, int C, float p, float scale, u64 seed,
                                        u64 offset) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	offset += tune_philox_base; // the step's base (philox.cuh)
	F4 a[NG], d[NG], w[NG];
#pragma unroll
	for (int j = 0; j < NG; j++) {
		int c = lane * 4 + j * 128;
		a[j] = ld4(x, dtx, base + c);
		d[j] = ld4(dout, dtd, base + c);
		w[j] = ld4(gamma, dtg, c);
	}
	float m = mean[row], r = rstd[row];
	float sg = 0.0f, sgn = 0.0f;
#pragma unroll
	for (int j = 0; j < NG; j++)
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float g = d[j].v[k] * w[j].v[k];
			sg += g;
			sgn += g * (a[j].v[k] - m) * r;
		}
	float mg = warp_sum(sg) / (float)C, mgn = warp_sum(sgn) / (float)C;
#pragma unroll
	for (int j = 0; j < NG; j++) {
		i64 c = base + lane * 4 + j * 128;
		F4 o;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float n = (a[j].v[k] - m) * r;
			o.v[k] = r * (d[j].v[k] * w[j].v[k] - mg - n * mgn);
		}
		st4(dx, dtdx, c, o);
		if (dy) {
			u32 wd[4] = {0u, 0u, 0u, 0u};
			if (p != 0.0f) philox_words(wd, (u64)(c / 4), key, offset);
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = branch_grad(round_to(o.v[k], dtdx), k, wd, p, scale);
			st4(dy, dtdy, c, o);
		}
	}
}

#define LN_BWD2(NG)                                                                                               \
	extern "C" __global__ void __launch_bounds__(256) layernorm_bwd2_##NG(                                       \
	    void *dx, int dtdx, void *dy, int dtdy, const void *dout, int dtd, const void *x, int dtx,                 \
	    const void *gamma, int dtg, const float *mean, const float *rstd, i64 N, int C, float p, float scale,     \
	    u64 seed, u64 offset) {                                                                                    \
		ln_bwd2<NG>(dx, dtdx, dy, dtdy, dout, dtd, x, dtx, gamma, dtg, mean, rstd, N, C, p, scale, seed, offset); \
	}
LN_BWD2(1)
LN_BWD2(2)
LN_BWD2(3)
LN_BWD2(4)
LN_BWD2(5)
LN_BWD2(6)
LN_BWD2(7)
LN_BWD2(8)
