// attention_bwd_wg.cu: the backward of fused attention on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a;
// kernels/wgmma.cuh), for F16/BF16 with D = 64: the same two kernels, launch order, numerics and results
// contract as kernels/attention_bwd.cu (docs/ATTENTION.md), with every product issued as m64n64k16 warpgroup
// MMAs instead of mma.sync m16n8k16.
//
// One warpgroup (128 threads) per block and 64 rows (queries for dQ, keys for dK/dV). The operand tiles are
// attention.cuh's XOR-swizzled 64-column tiles, which for D = 64 are exactly wgmma's 128-byte-swizzle layout
// (wgmma.cuh: chunk c of row r at c ^ (r % 8), 128 bytes per row) once each tile starts 1024-byte aligned, so
// the cp.async loads of kernels/attention_bwd.cu feed the descriptors unchanged. The first two products of a
// step (S = Q·Kᵀ and dP = dO·Vᵀ, or their transposes for dK/dV) read both operands from shared memory (both
// K-major); their FP32 accumulators have mma.sync's m16n8 C layout per warp (register 4·nt + c is element c of
// column group nt), so the elementwise part is kernels/attention_bwd.cu's, and P and dS are rounded to the half
// dtype straight into the register A fragments of the last two products (wg::acc_to_a), whose B operands (K,
// or Q and dO) are read MN-major from the same tiles. Registers hold only the four accumulators.
//
// Compiled into its own module per family (cuda/attention.go's attnModules: ATTN_D and ATTN_BF defined) only
// for D = 64; cuda/attention.go launches these kernels on sm_90 devices whose NVRTC compiles sm_90a, unless
// TUNE_ATTN_BWD=mma, and kernels/attention_bwd.cu's otherwise.
#include "attention.cuh"
#include "wgmma.cuh"

#ifndef ATTN_D
#error "kernels/attention_bwd_wg.cu is compiled only as the modules of cuda/attention.go's attnModules (ATTN_D and ATTN_BF defined)"
#endif

// wg_smem is the 1024-byte aligned start of the dynamic shared memory (the launch adds 1024 bytes for it).
__device__ __forceinline__ u16 *wg_smem() {
	extern __shared__ __align__(1024) u16 wg_dyn[];
	const unsigned a = wg::smem_u32(wg_dyn);
	return wg_dyn + (((a + 1023u) & ~1023u) - a) / 2;
}

// ew_short_dq is the dQ kernel's elementwise step on a tile where no visibility test can fail (not a key
// tail, not a causal diagonal, no segments; need == false): P = 2^(S·scale·log2e − LSE·log2e) without a mask
// (MASK false, p.mask == 0 and scale > 0: the general code's fast form) or e^(S·scale + mask − LSE) through
// 2^((…)·log2e) with one (MASK, mrow: the mask at the thread's first key of the tile), dP = dP'·keep/(1 − p),
// Σ P·dP, dS̃ = P·(dP − Δ̃), P into s. The same floating-point operations on the same values as the general
// code (so the same bits), without its per-element tests, which on the H200 (ncu, 2026-12-04) made the
// elementwise step 1143 of the kernel's instructions (286 ISETP, both exponentials and their FSEL) for 32
// scores a thread. p.ewgen (TUNE_ATTN_BWD_EW=general) sends every tile through the general code, for the
// test that requires the same bits and for A/B runs.
template <int NT, bool MASK, bool DROP>
__device__ __forceinline__ void ew_short_dq(float (&s)[32], float (&dp)[32], const float (&lv)[2], const float (&dt)[2],
					    float (&dsum)[2], u32 bits, float sl2, float scale, float dscale, const float *mrow) {
#pragma unroll
	for (int nt = 0; nt < NT; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const float mk = MASK ? mrow[nt * 8 + e] : 0.0f;
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				const int c = 4 * nt + hh * 2 + e;
				float pv = MASK ? ex2((fmaf(s[c], scale, mk) - lv[hh]) * LOG2E) : ex2(fmaf(s[c], sl2, -lv[hh]));
				float dpv = dp[c];
				if (DROP) dpv = ((bits >> ((nt * 2 + hh) * 2 + e)) & 1) ? dpv * dscale : 0.0f;
				dsum[hh] += pv * dpv;
				dp[c] = pv * (dpv - dt[hh]);
				s[c] = pv;
			}
		}
}

// ew_short_dkdv is the dK/dV kernel's elementwise step on such a tile (rows are keys, columns queries): P from
// the query's LSE (cL; log2e applied as in the general code) and the key's mask mk (MASK), dP from the keep
// bits, dS = P·(dP − Δ) into dp and P' = P·keep/(1 − p) into s.
template <int NQ, bool MASK, bool DROP>
__device__ __forceinline__ void ew_short_dkdv(float (&s)[32], float (&dp)[32], const float *cL, const float *cD, int tig,
					      u32 bits, float sl2, float scale, float dscale, const float (&mk)[2]) {
#pragma unroll
	for (int nt = 0; nt < NQ; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int ic = nt * 8 + tig * 2 + e;
			float lv = cL[ic], dl = cD[ic];
			lv = lv == NEG_INF ? POS_INF : (MASK ? lv : lv * LOG2E);
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				const int c = 4 * nt + hh * 2 + e;
				float pv = MASK ? ex2((fmaf(s[c], scale, mk[hh]) - lv) * LOG2E) : ex2(fmaf(s[c], sl2, -lv));
				float dpv = dp[c], pd = pv;
				if (DROP) {
					bool kp = (bits >> ((nt * 2 + e) * 2 + hh)) & 1;
					pd = pv * (kp ? dscale : 0.0f);
					dpv = kp ? dpv * dscale : 0.0f;
				}
				dp[c] = pv * (dpv - dl);
				s[c] = pd;
			}
		}
}

// dq_wg is kernels/attention_bwd.cu's dq1_tc (one block per 64 queries, one sweep over the keys, Δ̃ from the
// stored O, the exact Δ and R = P·K summed alongside dQ̃, dQ = scale·(dQ̃ − ε·R)) with D = 64 and the block
// order of order_block; the four products of a 64-key step are S = Q·Kᵀ, dP = dO·Vᵀ (shared-memory operands),
// dQ̃ += dS̃·K and R += P·K (register A).
template <bool BF, bool PIPE> __device__ __forceinline__ void dq_wg(const AttnParams &p) {
	constexpr int D = 64, BR = 64, BC = 64, RS = 2, NT = BC / 8, KD = D / 16, KC = BC / 16;
	u16 *smem = wg_smem();
	u16 *sQ = smem, *sO = sQ + BR * D, *sK = sO + BR * D, *sV = sK + RS * BC * D, *sB = sV + RS * BC * D;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int nqb = ((int)p.Tq + BR - 1) / BR;
	int rb, pair;
	order_block(p, nqb, (int)(p.B * p.Hq), rb, pair);
	const int qb = nqb - 1 - rb, h = pair % (int)p.Hq, b = pair / (int)p.Hq;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	const int nb = key_blocks<BR, BC>(p, Tq, Tk, q0, shift);
	const bool fast = unmasked_form(p, b, 0, Tk);
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0;
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;
	const unsigned aQ = wg::smem_u32(sQ), aO = wg::smem_u32(sO), aK = wg::smem_u32(sK), aV = wg::smem_u32(sV);

	float lv[2];
	int si[2];
	u64 rowb[2];
	bwd_rows(p, b, Tq, Tk, q0 + wr + g, fast, hbase, lv, si, rowb);

	load_tile<D, BR>(sQ, (const u16 *)p.q + b * p.qs[0] + h * p.qs[1] + (i64)q0 * p.qs[2], p.qs[2], Tq - q0, tid);
	load_tile<D, BR>(sO, (const u16 *)p.dout + b * p.dos[0] + h * p.dos[1] + (i64)q0 * p.dos[2], p.dos[2], Tq - q0, tid);
	cp_commit();
	if (nb > 0) {
		load_tile<D, BC>(sK, K, p.ks[2], Tk, tid);
		load_tile<D, BC>(sV, V, p.vs[2], Tk, tid);
		if (sbits && p.bitsready) load_bits<BR>(sB, p, hbase, q0, 0, tid);
		else if (sbits) draw_bits<BR, BC>(sB, p, hbase, q0, 0, thr, tid, p.bits);
	}
	cp_commit();
	cp_wait<1>();
	__syncthreads();
	// Δ̃ of the thread's rows g and g + 8 (attention.cuh's delta_rows).
	float dt[2];
	delta_rows<D, BF>(p, sO, b, h, Tq, q0, wr + g, tig, dt);
	float dq[32], rk[32], s[32], dp[32];
#pragma unroll
	for (int c = 0; c < 32; c++) dq[c] = rk[c] = 0.0f;

	float dsum[2] = {0.0f, 0.0f};
	for (int n = 0; n < nb; n++) {
		const int buf = n & 1, k0 = n * BC;
		auto next = [&]() { // queue key tile n + 1 into the other buffer
			const int k1 = k0 + BC;
			load_tile<D, BC>(sK + (buf ^ 1) * BC * D, K + (i64)k1 * p.ks[2], p.ks[2], Tk - k1, tid);
			load_tile<D, BC>(sV + (buf ^ 1) * BC * D, V + (i64)k1 * p.vs[2], p.vs[2], Tk - k1, tid);
			if (sbits && p.bitsready) load_bits<BR>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, tid);
			cp_commit();
			if (sbits && !p.bitsready) draw_bits<BR, BC>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, thr, tid, p.bits);
		};
		if (!PIPE && n + 1 < nb) {
			next();
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		wg::fence_proxy_async();
		__syncthreads();
		const unsigned cK = aK + buf * BC * D * 2, cV = aV + buf * BC * D * 2;
		// S = Q·Kᵀ, dP = dO·Vᵀ: A (queries × d) and B (keys × d) both K-major.
		{
			u64 dA[KD], dB[KD], dA2[KD], dB2[KD]; // every operand defined before the batch (no serialization)
#pragma unroll
			for (int kk = 0; kk < KD; kk++)
				dA[kk] = wg::desc_kmajor(aQ, BR, kk), dB[kk] = wg::desc_kmajor(cK, BC, kk), dA2[kk] = wg::desc_kmajor(aO, BR, kk), dB2[kk] = wg::desc_kmajor(cV, BC, kk);
			wg::fence();
#pragma unroll
			for (int kk = 0; kk < KD; kk++) {
				wg::mma_ss_n64<BF, 0, 0>(s, dA[kk], dB[kk], kk);
				wg::mma_ss_n64<BF, 0, 0>(dp, dA2[kk], dB2[kk], kk);
			}
			wg::commit();
		}
		u32 bits = 0; // keep bit of element (nt, hh, e) at (2·nt + hh)·2 + e
		if (sbits) { // each of the thread's two rows as one 8-byte load: keys 8·nt + 2·tig + e at bit 8·nt + e
			const u16 *cb = sB + buf * BR * (BC / 16);
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				const u64 w = *(const u64 *)(cb + (wr + g + hh * 8) * (BC / 16)) >> (tig * 2);
#pragma unroll
				for (int nt = 0; nt < NT; nt++) bits |= ((u32)(w >> (8 * nt)) & 3u) << (4 * nt + 2 * hh);
			}
		} else if (drop) {
#pragma unroll 1
			for (int x = 0; x < NT * 2; x++) {
				bool k0b, k1b;
				keep2(rowb[x & 1] + (u64)(k0 + (x >> 1) * 8 + tig * 2), p, thr, k0b, k1b);
				bits |= ((u32)k0b | ((u32)k1b << 1)) << (2 * x);
			}
		}
		wg::wait<0>();
		wg::fence_operand(s);
		wg::fence_operand(dp);
		if (PIPE && n + 1 < nb) { // the previous step's dQ̃/R products (which read buffer buf ^ 1) are done
			__syncthreads();
			next();
		}
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + shift);
		// P, dP' → dS̃ (and Σ P·dP): the short form (ew_short_dq: the same operations on the same values) on a
		// tile where no visibility test can fail, else the general code.
		if (!need && (fast || p.mask) && !p.ewgen) {
			const float *mrow = p.mask ? p.mask + (i64)b * Tk + k0 + tig * 2 : nullptr;
			if (fast && drop) ew_short_dq<NT, false, true>(s, dp, lv, dt, dsum, bits, sl2, p.scale, p.dscale, mrow);
			else if (fast) ew_short_dq<NT, false, false>(s, dp, lv, dt, dsum, bits, sl2, p.scale, p.dscale, mrow);
			else if (drop) ew_short_dq<NT, true, true>(s, dp, lv, dt, dsum, bits, sl2, p.scale, p.dscale, mrow);
			else ew_short_dq<NT, true, false>(s, dp, lv, dt, dsum, bits, sl2, p.scale, p.dscale, mrow);
		} else {
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					const int j = k0 + nt * 8 + tig * 2 + e;
					float mk = (!fast && p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
					int sjv = (need && p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
#pragma unroll
					for (int hh = 0; hh < 2; hh++) {
						int i = q0 + wr + g + hh * 8, c = 4 * nt + hh * 2 + e;
						float x = s[c];
						float pv = fast ? ex2(fmaf(x, sl2, -lv[hh])) : ex2((fmaf(x, p.scale, mk) - lv[hh]) * LOG2E);
						if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && si[hh] != sjv))) pv = 0.0f;
						float dpv = dp[c];
						if (drop) dpv = ((bits >> ((nt * 2 + hh) * 2 + e)) & 1) ? dpv * p.dscale : 0.0f;
						dsum[hh] += pv * dpv;
						dp[c] = pv * (dpv - dt[hh]);
						s[c] = pv;
					}
				}
		}
		// dQ̃ += dS̃·K, R += P·K: A from registers (queries × keys), B = K tile (keys × d) MN-major.
		{
			u32 a[KC][4], ap[KC][4];
			u64 bk[KC];
#pragma unroll
			for (int kc = 0; kc < KC; kc++) {
				wg::acc_to_a<BF>(dp, kc, a[kc]);
				wg::acc_to_a<BF>(s, kc, ap[kc]);
				bk[kc] = wg::desc_mnmajor(cK, BC, kc);
			}
			wg::fence();
#pragma unroll
			for (int kc = 0; kc < KC; kc++) {
				wg::mma_rs_n64<BF, 1>(dq, a[kc], bk[kc], 1);
				wg::mma_rs_n64<BF, 1>(rk, ap[kc], bk[kc], 1);
			}
			wg::commit();
		}
		if (!PIPE) {
			wg::wait<0>();
			wg::fence_operand(dq);
			wg::fence_operand(rk);
			__syncthreads();
		}
	}
	if (PIPE) {
		wg::wait<0>();
		wg::fence_operand(dq);
		wg::fence_operand(rk);
	}
	float eps[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		float t = dsum[hh];
		t += __shfl_xor_sync(0xffffffffu, t, 1);
		t += __shfl_xor_sync(0xffffffffu, t, 2);
		eps[hh] = t - dt[hh];
		int i = q0 + wr + g + hh * 8;
		if (tig == 0 && i < Tq) p.delta[(i64)hbase + i] = t;
	}
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < D / 8; dn++) {
			const int c = 4 * dn + hh * 2;
			float x0 = dq[c] - eps[hh] * rk[c], x1 = dq[c + 1] - eps[hh] * rk[c + 1];
			*(u32 *)(sQ + swz<D>(r, dn) + tig * 2) = store2<BF>(x0 * p.scale, x1 * p.scale);
		}
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dq + b * p.dqs[0] + h * p.dqs[1] + (i64)q0 * p.dqs[2], p.dqs[2], sQ, wr, Tq - q0, lane);
}

// dkdv_wg is kernels/attention_bwd.cu's dkdv_tc (one block per 64 keys of a KV head; Q, dO, LSE and Δ tiles of
// 64 queries through a cp.async double buffer over every query block of every query head of the group, in a
// fixed order) with D = 64 and the block order of order_block; the four products of a step are Sᵀ = K·Qᵀ,
// dPᵀ = V·dOᵀ (shared-memory operands), dV += P'ᵀ·dO and dK += dSᵀ·Q (register A).
template <bool BF, bool PIPE> __device__ __forceinline__ void dkdv_wg(const AttnParams &p) {
	constexpr int D = 64, BC = 64, BR = 64, RS = 2, NQ = BR / 8, KD = D / 16, KQ = BR / 16;
	u16 *smem = wg_smem();
	u16 *sK = smem, *sV = sK + BC * D, *sQ = sV + BC * D, *sO = sQ + RS * BR * D;
	float *sL = (float *)(sO + RS * BR * D), *sDl = sL + RS * BR;
	u16 *sB = (u16 *)(sDl + RS * BR);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, G = (int)(p.Hq / p.Hkv), shift = Tk - Tq;
	int kb, pair;
	order_block(p, (Tk + BC - 1) / BC, (int)(p.B * p.Hkv), kb, pair);
	const int hk = pair % (int)p.Hkv, b = pair / (int)p.Hkv;
	const int j0 = kb * BC;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0;
	const unsigned aK = wg::smem_u32(sK), aV = wg::smem_u32(sV), aQ = wg::smem_u32(sQ), aO = wg::smem_u32(sO);

	int qb0 = 0;
	if (p.causal) {
		int imin = j0 - shift;
		qb0 = imin > 0 ? imin / BR : 0;
	}
	const int nqb = (Tq + BR - 1) / BR, nit = nqb > qb0 ? nqb - qb0 : 0, total = G * nit;

	float mk[2];
	int sj[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int j = j0 + wr + g + hh * 8;
		mk[hh] = (p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
		sj[hh] = (p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
	}
	const bool fast = unmasked_keys(p, mk); // the block's keys: wr + g + 8·hh over the four warps

	auto prefetch = [&](int it, int buf) {
		int hq = hk * G + it / nit, i0 = (qb0 + it % nit) * BR;
		load_tile<D, BR>(sQ + buf * BR * D, (const u16 *)p.q + b * p.qs[0] + hq * p.qs[1] + (i64)i0 * p.qs[2], p.qs[2], Tq - i0, tid);
		load_tile<D, BR>(sO + buf * BR * D, (const u16 *)p.dout + b * p.dos[0] + hq * p.dos[1] + (i64)i0 * p.dos[2], p.dos[2], Tq - i0, tid);
		{
			const int r = tid & (BR - 1), i = i0 + r;
			const bool ok = i < Tq;
			const i64 row = ok ? ((i64)b * p.Hq + hq) * Tq + i : 0;
			cp4(smem_addr((tid < BR ? sL : sDl) + buf * BR + r), (tid < BR ? p.lse : p.delta) + row, ok);
		}
		if (sbits && p.bits) load_bits<BR>(sB + buf * BR * (BC / 16), p, (u64)((i64)b * p.Hq + hq) * (u64)Tq, i0, j0, tid);
		else if (sbits) draw_bits<BR, BC>(sB + buf * BR * (BC / 16), p, (u64)((i64)b * p.Hq + hq) * (u64)Tq, i0, j0, thr, tid);
	};

	load_tile<D, BC>(sK, (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1] + (i64)j0 * p.ks[2], p.ks[2], Tk - j0, tid);
	load_tile<D, BC>(sV, (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1] + (i64)j0 * p.vs[2], p.vs[2], Tk - j0, tid);
	if (total > 0) prefetch(0, 0);
	cp_commit();
	float dk[32], dv[32], s[32], dp[32];
#pragma unroll
	for (int c = 0; c < 32; c++) dk[c] = dv[c] = 0.0f;

	for (int it = 0; it < total; it++) {
		const int buf = it & 1;
		if (!PIPE && it + 1 < total) {
			prefetch(it + 1, buf ^ 1);
			cp_commit();
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		wg::fence_proxy_async();
		__syncthreads();
		const int hq = hk * G + it / nit, i0 = (qb0 + it % nit) * BR;
		const unsigned cQ = aQ + buf * BR * D * 2, cO = aO + buf * BR * D * 2;
		const float *cL = sL + buf * BR, *cD = sDl + buf * BR;
		// Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ: A (keys × d) and B (queries × d) both K-major.
		{
			u64 dA[KD], dB[KD], dA2[KD], dB2[KD]; // every operand defined before the batch (no serialization)
#pragma unroll
			for (int kk = 0; kk < KD; kk++)
				dA[kk] = wg::desc_kmajor(aK, BC, kk), dB[kk] = wg::desc_kmajor(cQ, BR, kk), dA2[kk] = wg::desc_kmajor(aV, BC, kk), dB2[kk] = wg::desc_kmajor(cO, BR, kk);
			wg::fence();
#pragma unroll
			for (int kk = 0; kk < KD; kk++) {
				wg::mma_ss_n64<BF, 0, 0>(s, dA[kk], dB[kk], kk);
				wg::mma_ss_n64<BF, 0, 0>(dp, dA2[kk], dB2[kk], kk);
			}
			wg::commit();
		}
		const bool need = j0 + BC > Tk || p.seg || (p.causal && i0 < j0 + BC - 1 - shift);
		const u64 hbase = (u64)((i64)b * p.Hq + hq) * (u64)Tq;
		u32 bits = 0; // keep bit of element (nt, e, hh) at (2·nt + e)·2 + hh
		if (sbits) { // the thread's keys wr + g and wr + g + 8 sit in word `warp` of each query row: one load per row
			const u16 *cb = sB + buf * BR * (BC / 16) + warp;
#pragma unroll
			for (int q = 0; q < NQ * 2; q++) { // query row 8·(q / 2) + 2·tig + q % 2
				const u32 v = (u32)cb[((q >> 1) * 8 + tig * 2 + (q & 1)) * (BC / 16)] >> g;
				bits |= ((v & 1u) | ((v >> 7) & 2u)) << (2 * q);
			}
		} else if (drop) {
#pragma unroll 1
			for (int x = 0; x < NQ * 4; x++) {
				int i = i0 + (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), j = j0 + wr + g + (x & 1) * 8;
				bits |= (u32)keep1((hbase + (u64)i) * (u64)Tk + (u64)j, p, thr) << x;
			}
		}
		wg::wait<0>();
		wg::fence_operand(s);
		wg::fence_operand(dp);
		if (PIPE && it + 1 < total) { // the previous step's dV/dK products (which read buffer buf ^ 1) are done
			__syncthreads();
			prefetch(it + 1, buf ^ 1);
			cp_commit();
		}
		if (!need && (fast || p.mask) && !p.ewgen) { // the short form of the same operations (ew_short_dkdv)
			if (fast && drop) ew_short_dkdv<NQ, false, true>(s, dp, cL, cD, tig, bits, sl2, p.scale, p.dscale, mk);
			else if (fast) ew_short_dkdv<NQ, false, false>(s, dp, cL, cD, tig, bits, sl2, p.scale, p.dscale, mk);
			else if (drop) ew_short_dkdv<NQ, true, true>(s, dp, cL, cD, tig, bits, sl2, p.scale, p.dscale, mk);
			else ew_short_dkdv<NQ, true, false>(s, dp, cL, cD, tig, bits, sl2, p.scale, p.dscale, mk);
		} else {
#pragma unroll
			for (int nt = 0; nt < NQ; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int ic = nt * 8 + tig * 2 + e, i = i0 + ic;
					float lv = cL[ic], dl = cD[ic];
					lv = lv == NEG_INF ? POS_INF : (fast ? lv * LOG2E : lv);
#pragma unroll
					for (int hh = 0; hh < 2; hh++) {
						int j = j0 + wr + g + hh * 8, c = 4 * nt + hh * 2 + e;
						float x = s[c];
						float pv = fast ? ex2(fmaf(x, sl2, -lv)) : ex2((fmaf(x, p.scale, mk[hh]) - lv) * LOG2E);
						if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && i < Tq && sj[hh] != p.seg[(i64)b * Tq + i]))) pv = 0.0f;
						float dpv = dp[c], pd = pv;
						if (drop) {
							bool kp = (bits >> ((nt * 2 + e) * 2 + hh)) & 1;
							pd = pv * (kp ? p.dscale : 0.0f); // as tensor/cpu: a NaN row's dropped P' stays NaN
							dpv = kp ? dpv * p.dscale : 0.0f;
						}
						dp[c] = pv * (dpv - dl);
						s[c] = pd;
					}
				}
		}
		// dV += P'ᵀ·dO, dK += dSᵀ·Q: A from registers (keys × queries), B = dO / Q tile (queries × d) MN-major.
		{
			u32 a[KQ][4], ad[KQ][4];
			u64 bo[KQ], bq[KQ];
#pragma unroll
			for (int kq = 0; kq < KQ; kq++) {
				wg::acc_to_a<BF>(s, kq, a[kq]);
				wg::acc_to_a<BF>(dp, kq, ad[kq]);
				bo[kq] = wg::desc_mnmajor(cO, BR, kq), bq[kq] = wg::desc_mnmajor(cQ, BR, kq);
			}
			wg::fence();
#pragma unroll
			for (int kq = 0; kq < KQ; kq++) {
				wg::mma_rs_n64<BF, 1>(dv, a[kq], bo[kq], 1);
				wg::mma_rs_n64<BF, 1>(dk, ad[kq], bq[kq], 1);
			}
			wg::commit();
		}
		if (!PIPE) {
			wg::wait<0>();
			wg::fence_operand(dk);
			wg::fence_operand(dv);
			__syncthreads();
		}
	}
	if (PIPE) {
		wg::wait<0>();
		wg::fence_operand(dk);
		wg::fence_operand(dv);
	}
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < D / 8; dn++) {
			const int c = 4 * dn + hh * 2;
			*(u32 *)(sK + swz<D>(r, dn) + tig * 2) = store2<BF>(dk[c] * p.scale, dk[c + 1] * p.scale);
			*(u32 *)(sV + swz<D>(r, dn) + tig * 2) = store2<BF>(dv[c], dv[c + 1]);
		}
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dk + b * p.dks[0] + hk * p.dks[1] + (i64)j0 * p.dks[2], p.dks[2], sK, wr, Tk - j0, lane);
	store_rows<D, 16>((u16 *)p.dv + b * p.dvs[0] + hk * p.dvs[1] + (i64)j0 * p.dvs[2], p.dvs[2], sV, wr, Tk - j0, lane);
}

// One-dimensional grids in order_block's order (as kernels/attention_bwd.cu's D = 64 kernels), one warpgroup
// per block. The kernels without a suffix run three blocks per SM (__launch_bounds__(128, 3): at most 168
// registers; the four accumulators take 128) and wait for each step's last two products before the next step.
// Variants (cuda/attention.go's TUNE_ATTN_BWD_WG, for A/B runs): _o2, two blocks per SM (up to 255
// registers), the default until H200 session 9 measured it slower everywhere (BERT-base (64, 12, 512, 64)
// 1141 µs against 976; with dropout 0.1 1299 against 1085; SmolLM2's GQA 9/3 (8, 9, 2048, 64) causal 863
// against 757); _p, two blocks per SM and pipelined: the last two products of a step run while the next
// step's loads wait and its first two products issue (the next tile is queued once the first two products are
// done, so two buffers still suffice); 1227 µs at BERT-base's shape.
#define WG_KERNELS(T, BFV)                                                                                                      \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_wg_##T##_d64(const AttnParams p) { dq_wg<BFV, false>(p); }      \
	extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_wg_##T##_d64(const AttnParams p) { dkdv_wg<BFV, false>(p); }  \
	extern "C" __global__ void __launch_bounds__(128, 2) attn_bwd_dq_wg_##T##_d64_o2(const AttnParams p) { dq_wg<BFV, false>(p); }   \
	extern "C" __global__ void __launch_bounds__(128, 2) attn_bwd_dkdv_wg_##T##_d64_o2(const AttnParams p) { dkdv_wg<BFV, false>(p); } \
	extern "C" __global__ void __launch_bounds__(128, 2) attn_bwd_dq_wg_##T##_d64_p(const AttnParams p) { dq_wg<BFV, true>(p); }     \
	extern "C" __global__ void __launch_bounds__(128, 2) attn_bwd_dkdv_wg_##T##_d64_p(const AttnParams p) { dkdv_wg<BFV, true>(p); }
#if ATTN_D == 64 && ATTN_BF
WG_KERNELS(bf16, true)
#elif ATTN_D == 64
WG_KERNELS(f16, false)
#endif
