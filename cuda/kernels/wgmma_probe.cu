// wgmma_probe.cu: one-CTA products through kernels/wgmma.cuh for TestWgmmaProbe (cuda/wgmma_test.go), which
// checks them against the CPU: the descriptors, the 128-byte swizzle, the transpose flag and the register
// layouts that the sm_90a attention kernels build on.
#include "wgmma.cuh"

// probe computes C (64×N, F32, row-major) = A·B for A (64×K, row-major BF16) and B given K-major (MN == 0: an
// N×K row-major array, C = A·Bᵀ of it) or MN-major (MN == 1: a K×N row-major array), with A from shared
// memory (RS == 0) or registers (RS == 1). One block of 128 threads (one warpgroup). lbo and sbo override the
// MN-major descriptor's byte offsets when nonzero (to tell a wrong field from a wrong layout).
template <int N, int K, bool MN, bool RS> __device__ __forceinline__ void probe(const u16 *A, const u16 *B, float *C, unsigned lbo, unsigned sbo) {
	extern __shared__ __align__(1024) unsigned char smraw[];
	unsigned char *sm = smraw + ((1024 - (wg::smem_u32(smraw) & 1023)) & 1023); // 1024-byte aligned (the launch adds 1 KiB)
	unsigned char *sA = sm, *sB = sm + 64 * K * 2;
	const int tid = threadIdx.x;
	// A: 64 rows × K columns; B: N × K (K-major) or K × N (MN-major), 16-byte chunks.
	for (int i = tid; i < 64 * K / 8; i += 128) {
		int r = i / (K / 8), c = i % (K / 8);
		*(uint4 *)(sA + wg::sw128_off(64, r, c)) = *(const uint4 *)(A + r * K + c * 8);
	}
	constexpr int BR = MN ? K : N, BC = MN ? N : K;
	for (int i = tid; i < BR * BC / 8; i += 128) {
		int r = i / (BC / 8), c = i % (BC / 8);
		*(uint4 *)(sB + wg::sw128_off(BR, r, c)) = *(const uint4 *)(B + r * BC + c * 8);
	}
	wg::fence_proxy_async();
	__syncthreads();
	const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
	float d[N / 2];
#pragma unroll
	for (int i = 0; i < N / 2; i++) d[i] = 0.0f;
	const unsigned a0 = wg::smem_u32(sA), b0 = wg::smem_u32(sB);
	u32 af[K / 16][4];
	if constexpr (RS) {
#pragma unroll
		for (int kk = 0; kk < K / 16; kk++)
#pragma unroll
			for (int x = 0; x < 4; x++) {
				int r = 16 * warp + g + 8 * (x & 1), c = 16 * kk + 2 * t + 8 * (x >> 1);
				af[kk][x] = (u32)A[r * K + c] | (u32)A[r * K + c + 1] << 16;
			}
	}
	wg::fence_operand(d);
	wg::fence();
#pragma unroll
	for (int kk = 0; kk < K / 16; kk++) {
		u64 bd = MN ? wg::desc_mnmajor(b0, K, kk) : wg::desc_kmajor(b0, N, kk);
		if (MN && (lbo | sbo)) bd = wg::desc(b0 + kk * 2048, lbo, sbo);
		if constexpr (RS) {
			if constexpr (N == 64) wg::mma_rs_n64<true, MN>(d, af[kk], bd, 1);
			else wg::mma_rs_n128<true, MN>(d, af[kk], bd, 1);
		} else {
			u64 ad = wg::desc_kmajor(a0, 64, kk);
			if constexpr (N == 64) wg::mma_ss_n64<true, 0, MN>(d, ad, bd, 1);
			else wg::mma_ss_n128<true, 0, MN>(d, ad, bd, 1);
		}
	}
	wg::commit();
	wg::wait<0>();
	wg::fence_operand(d);
#pragma unroll
	for (int i = 0; i < N / 8; i++)
#pragma unroll
		for (int h = 0; h < 2; h++)
#pragma unroll
			for (int e = 0; e < 2; e++) C[(16 * warp + g + 8 * h) * N + 8 * i + 2 * t + e] = d[4 * i + 2 * h + e];
}

#define PROBE(NAME, N, K, MN, RS)                                                                                            \
	extern "C" __global__ void __launch_bounds__(128) NAME(const u16 *A, const u16 *B, float *C, unsigned lbo, unsigned sbo) { \
		probe<N, K, MN, RS>(A, B, C, lbo, sbo);                                                                           \
	}
PROBE(wgmma_probe_ss_k_n64_k64, 64, 64, false, false)
PROBE(wgmma_probe_ss_k_n128_k128, 128, 128, false, false)
PROBE(wgmma_probe_ss_mn_n128_k64, 128, 64, true, false)
PROBE(wgmma_probe_rs_k_n128_k128, 128, 128, false, true)
PROBE(wgmma_probe_rs_mn_n64_k64, 64, 64, true, true)
PROBE(wgmma_probe_rs_mn_n128_k128, 128, 128, true, true)
