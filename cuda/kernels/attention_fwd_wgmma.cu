// attention_fwd_wgmma.cu: the Hopper forward of fused attention (tensor.Backend.Attention; cuda/attention.go),
// warpgroup MMA (kernels/wgmma.cuh, sm_90a only) with FP32 accumulation, for F16/BF16 with D = 64 or 128. It
// computes what kernels/attention_fwd.cu computes, with the same numerics (attention.cuh; docs/ATTENTION.md):
// S = Q·Kᵀ in FP32 registers, the online softmax in FP32 in the same order of operations, P rounded to the
// half dtype only as the register operand of P·V, O rounded once on store, the FP32 LSE.
//
// One block of NWG warpgroups per BR = 64·NWG queries of one head; warpgroup w owns queries 64w … 64w+63.
// K and V tiles of BC keys (64 for D = 64, 128 for D = 128) move with cp.async into 128-byte-swizzled shared
// memory (wgmma.cuh's tile layout), two stages each; S = Q·Kᵀ reads Q and K by descriptor (K-major), O += P·V takes P from registers and
// V by an MN-major descriptor (V row-major, the transpose flag). Per step j the warpgroup issues S_{j+1} =
// Q·K_{j+1}ᵀ and O += P_j·V_j back to back, does the softmax of S_{j+1} while P_j·V_j runs, then rescales O
// (FlashAttention-3's intra-warpgroup overlap: Shah et al., "FlashAttention-3: Fast and Accurate Attention with
// Asynchrony and Low-precision", 2024, section 3.2). Dropout reads the keep bits that attn_keep_bits drew
// (p.bitsready; the host draws them first when the caller passed no KeepBits), so it needs Tk % 4 == 0; other
// calls take attention_fwd.cu's kernel.
#include "attention.cuh"
#include "wgmma.cuh"

#ifndef ATTN_D
#error "kernels/attention_fwd_wgmma.cu is compiled only as the modules of cuda/attention.go's attnModules (ATTN_D and ATTN_BF defined)"
#endif

// wload queues ROWS rows of D halves (row stride st elements) into the swizzled tile at shared address s (NT
// threads); rows ≥ nvalid are zero-filled.
template <int D, int ROWS, int NT> __device__ __forceinline__ void wload(unsigned s, const u16 *g, i64 st, int nvalid, int tid) {
	constexpr int CPR = D / 8, N = (ROWS * CPR + NT - 1) / NT;
#pragma unroll
	for (int it = 0; it < N; it++) {
		int c = tid + it * NT, r = c / CPR, ch = c % CPR;
		if (ROWS * CPR % NT != 0 && c >= ROWS * CPR) break;
		bool ok = r < nvalid;
		cp16(s + wg::sw128_off(ROWS, r, ch), ok ? g + (i64)r * st + ch * 8 : g, ok);
	}
}

// wbits queues the keep bits of the BC-key tile at key c0 (BC = 64 or 128) for ROWS query rows r0.. into bits
// (BC/16 words per row, bit c % 16 of word r·BC/16 + c/16 for key c0 + c): 4-word chunks, each zero when past
// the row's bitsw words or the last query.
template <int ROWS, int BC, int NT> __device__ __forceinline__ void wbits(u16 *bits, const AttnParams &p, u64 hbase, int r0, int c0, int tid) {
	constexpr int CH = BC / 64; // chunks per row
#pragma unroll 1
	for (int x = tid; x < CH * ROWS; x += NT) {
		int r = x / CH, w = c0 / 16 + (x % CH) * 4;
		bool ok = r0 + r < p.Tq && w < p.bitsw;
		const u16 *src = p.bits + (ok ? (hbase + (u64)(r0 + r)) * (u64)p.bitsw + (u64)w : 0);
		cp8(smem_addr(bits + r * (BC / 16) + (x % CH) * 4), src, ok);
	}
}

// fwd_wg is the forward of one block (see the file comment).
template <int D, bool BF, int NWG, int BC> __device__ __forceinline__ void fwd_wg(const AttnParams &p) {
	constexpr int BR = 64 * NWG, NT = 128 * NWG, KD = D / 16, KC = BC / 16, NS = BC / 8, ND = D / 8;
	constexpr int QB = BR * D * 2, KB = BC * D * 2, WB = BC / 16; // bytes of the Q tile and a K or V stage; bit words per row
	extern __shared__ __align__(1024) unsigned char smraw[];
	unsigned char *sm = smraw + ((1024 - (wg::smem_u32(smraw) & 1023)) & 1023); // the launch adds 1 KiB for this
	const unsigned sQ = wg::smem_u32(sm), sK = sQ + QB, sV = sK + 2 * KB;
	u16 *sB = (u16 *)(sm + QB + 4 * KB);
	const int tid = threadIdx.x, wgi = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
	const int qb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *Q = (const u16 *)p.q + b * p.qs[0] + h * p.qs[1] + (i64)q0 * p.qs[2];
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	const int nb = key_blocks<BR, BC>(p, Tq, Tk, q0, shift);
	const bool fast = unmasked_form(p, b, 0, Tk);
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f; // the host guarantees p.bitsready
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;
	const int wr = 64 * wgi + 16 * warp + g; // the thread's first tile row (the second is wr + 8)

	float o[D / 2], m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f}, s[BC / 2];
	u32 pf[KC][4];
#pragma unroll
	for (int i = 0; i < D / 2; i++) o[i] = 0.0f;

	// softmax turns the scores of key tile k0 (stage st) into probabilities in place, updates m and l and returns
	// the rescale factors of the rows' previous sums in al; dropped probabilities become 0 (after the sum).
	auto softmax = [&](int k0, int st, float (&al)[2]) {
		if (!fast) {
#pragma unroll
			for (int nt = 0; nt < NS; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int j = k0 + nt * 8 + t * 2 + e;
					float mk = (p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
					s[4 * nt + e] = fmaf(s[4 * nt + e], p.scale, mk);
					s[4 * nt + 2 + e] = fmaf(s[4 * nt + 2 + e], p.scale, mk);
				}
		}
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + 64 * wgi + shift);
		if (need) {
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				int i = q0 + wr + hh * 8;
#pragma unroll
				for (int nt = 0; nt < NS; nt++)
#pragma unroll
					for (int e = 0; e < 2; e++)
						if (forbidden(p, b, i, k0 + nt * 8 + t * 2 + e, shift)) s[4 * nt + 2 * hh + e] = NEG_INF;
			}
		}
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			float mx = NEG_INF;
#pragma unroll
			for (int nt = 0; nt < NS; nt++) mx = fmaxf(mx, fmaxf(s[4 * nt + 2 * hh], s[4 * nt + 2 * hh + 1]));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
			float mo = m[hh], mn = fmaxf(mo, fast ? mx * sl2 : mx);
			float mu = mn == NEG_INF ? 0.0f : mn;
			float alpha = fast ? ex2(mo - mu) : ex2((mo - mu) * LOG2E);
			m[hh] = mn;
			float sum = 0.0f;
#pragma unroll
			for (int nt = 0; nt < NS; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float x = s[4 * nt + 2 * hh + e];
					float pv = fast ? ex2(fmaf(x, sl2, -mu)) : ex2((x - mu) * LOG2E);
					sum += pv;
					s[4 * nt + 2 * hh + e] = pv;
				}
			l[hh] = l[hh] * alpha + sum;
			al[hh] = alpha;
		}
		if (drop) {
			const u16 *cb = sB + st * BR * WB;
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				const u16 *rb = cb + (wr + hh * 8) * WB;
#pragma unroll
				for (int w = 0; w < WB; w++) {
					u32 bits = rb[w];
#pragma unroll
					for (int q = 0; q < 2; q++)
#pragma unroll
						for (int e = 0; e < 2; e++)
							if (!((bits >> (8 * q + 2 * t + e)) & 1)) s[4 * (2 * w + q) + 2 * hh + e] = 0.0f;
				}
			}
		}
	};
	// S of the warpgroup's 64 rows against the K tile at stage st (acc 0 on the first k-step: S is overwritten).
	auto qk = [&](int st) {
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u64 a = wg::desc(sQ + (kk >> 2) * BR * 128 + wgi * 64 * 128 + (kk & 3) * 32, 16, 1024);
			u64 bd = wg::desc_kmajor(sK + st * KB, BC, kk);
			if constexpr (BC == 128) wg::mma_ss_n128<BF, 0, 0>(s, a, bd, kk > 0);
			else wg::mma_ss_n64<BF, 0, 0>(s, a, bd, kk > 0);
		}
	};
	auto pv = [&](int st) {
#pragma unroll
		for (int kc = 0; kc < KC; kc++) {
			u64 bd = wg::desc_mnmajor(sV + st * KB, BC, kc);
			if constexpr (D == 64) wg::mma_rs_n64<BF, 1>(o, pf[kc], bd, 1);
			else wg::mma_rs_n128<BF, 1>(o, pf[kc], bd, 1);
		}
	};
	auto pack = [&]() {
#pragma unroll
		for (int kc = 0; kc < KC; kc++) wg::acc_to_a<BF>(s, kc, pf[kc]);
	};

	if (nb > 0) {
		// Prologue: Q, K_0 (and its bits), then V_0 and K_1; S_0 and its softmax.
		wload<D, BR, NT>(sQ, Q, p.qs[2], Tq - q0, tid);
		wload<D, BC, NT>(sK, K, p.ks[2], Tk, tid);
		if (drop) wbits<BR, BC, NT>(sB, p, hbase, q0, 0, tid);
		cp_commit();
		wload<D, BC, NT>(sV, V, p.vs[2], Tk, tid);
		if (nb > 1) {
			wload<D, BC, NT>(sK + KB, K + (i64)BC * p.ks[2], p.ks[2], Tk - BC, tid);
			if (drop) wbits<BR, BC, NT>(sB + BR * WB, p, hbase, q0, BC, tid);
		}
		cp_commit();
		cp_wait<1>();
		wg::fence_proxy_async();
		__syncthreads();
		wg::fence();
		qk(0);
		wg::commit();
		wg::wait<0>();
		wg::fence_operand(s);
		float al[2];
		softmax(0, 0, al);
		pack();
	}
	// step loads the tiles of step j + 2 (K, bits) and j + 1 (V) into the stages steps j and j − 1 freed, then
	// issues S_{j+1} = Q·K_{j+1}ᵀ and O += P_j·V_j; with NXT (j + 1 < nb) it does the softmax of S_{j+1} while
	// P_j·V_j runs, then rescales O and packs P_{j+1}.
	auto step = [&](int j, const bool NXT) {
		cp_wait<0>(); // V_j and K_{j+1}
		wg::fence_proxy_async();
		__syncthreads();
		if (j + 2 < nb) {
			wload<D, BC, NT>(sK + (j & 1) * KB, K + (i64)(j + 2) * BC * p.ks[2], p.ks[2], Tk - (j + 2) * BC, tid);
			if (drop) wbits<BR, BC, NT>(sB + (j & 1) * BR * WB, p, hbase, q0, (j + 2) * BC, tid);
		}
		if (j + 1 < nb) wload<D, BC, NT>(sV + ((j + 1) & 1) * KB, V + (i64)(j + 1) * BC * p.vs[2], p.vs[2], Tk - (j + 1) * BC, tid);
		cp_commit();
		wg::fence_operand(o);
#pragma unroll
		for (int kc = 0; kc < KC; kc++) wg::fence_operand_u(pf[kc]);
		wg::fence();
		if (NXT) {
			qk((j + 1) & 1);
			wg::commit();
		}
		pv(j & 1);
		wg::commit();
		if (NXT) {
			float al[2];
			wg::wait<1>();
			wg::fence_operand(s);
			softmax((j + 1) * BC, (j + 1) & 1, al);
			wg::wait<0>();
			wg::fence_operand(o);
#pragma unroll
			for (int dn = 0; dn < ND; dn++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++) o[4 * dn + 2 * hh] *= al[hh], o[4 * dn + 2 * hh + 1] *= al[hh];
			pack();
		} else {
			wg::wait<0>();
			wg::fence_operand(o);
		}
	};
	for (int j = 0; j + 1 < nb; j++) step(j, true);
	if (nb > 0) step(nb - 1, false);
	// Epilogue: normalise, stage the rows in sQ (free: every product has completed), store O and LSE.
	cp_wait<0>();
	__syncthreads();
	u16 *sO = (u16 *)sm;
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		float lt = l[hh];
		lt += __shfl_xor_sync(0xffffffffu, lt, 1);
		lt += __shfl_xor_sync(0xffffffffu, lt, 2);
		float inv = lt == 0.0f ? 0.0f : p.dscale / lt; // a NaN score makes lt NaN: the row is NaN
		int r = wr + hh * 8, i = q0 + r;
		if (t == 0 && i < Tq) {
			float lse = NEG_INF;
			if (lt != 0.0f) lse = fast ? (m[hh] + log2f(lt)) * LN2 : m[hh] + log2f(lt) * LN2;
			p.lse[((i64)b * p.Hq + h) * Tq + i] = lse;
		}
#pragma unroll
		for (int dn = 0; dn < ND; dn++)
			*(u32 *)((unsigned char *)sO + wg::sw128_off(BR, r, dn) + t * 4) = store2<BF>(o[4 * dn + 2 * hh] * inv, o[4 * dn + 2 * hh + 1] * inv);
	}
	__syncthreads();
	u16 *O = (u16 *)p.o + b * p.os[0] + h * p.os[1] + (i64)q0 * p.os[2];
#pragma unroll
	for (int it = 0; it < BR * ND / NT; it++) {
		int c = tid + it * NT, r = c / ND, ch = c % ND;
		if (q0 + r < Tq) *(uint4 *)(O + (i64)r * p.os[2] + ch * 8) = *(const uint4 *)((unsigned char *)sO + wg::sw128_off(BR, r, ch));
	}
}

// D = 64: 64-key tiles, 128 registers (28 bytes spilled, ptxas of NVRTC 13) for two blocks per SM; D = 128:
// 128-key tiles, one block per SM (224 registers). The variants measured against these on the H200 (three
// warpgroups per block, 128-key tiles at D = 64, 64-key tiles at D = 128: docs/PERFORMANCE.md) lost and were
// removed.
#if ATTN_D == 64 && ATTN_BF
extern "C" __global__ void __launch_bounds__(256, 2) attn_fwd_wg_bf16_d64(const AttnParams p) { fwd_wg<64, true, 2, 64>(p); }
#elif ATTN_D == 64
extern "C" __global__ void __launch_bounds__(256, 2) attn_fwd_wg_f16_d64(const AttnParams p) { fwd_wg<64, false, 2, 64>(p); }
#elif ATTN_BF
extern "C" __global__ void __launch_bounds__(256, 1) attn_fwd_wg_bf16_d128(const AttnParams p) { fwd_wg<128, true, 2, 128>(p); }
#else
extern "C" __global__ void __launch_bounds__(256, 1) attn_fwd_wg_f16_d128(const AttnParams p) { fwd_wg<128, false, 2, 128>(p); }
#endif
