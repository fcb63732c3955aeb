// attention_bwd.cu: the tensor-core backward of fused attention (tensor.Backend.AttentionBackward;
// cuda/attention.go), mma.sync m16n8k16 with FP32 accumulation on sm_80+, for F16/BF16 with D = 64 or 128
// (attention.cuh: the algorithm, the numerics and the shared helpers; attention_ref.cu: the general kernels).
//
// Two kernels per family, compiled into its own module (cuda/attention.go's attnModule: this file with ATTN_D
// and ATTN_BF defined), launched in this order:
//
//   attn_bwd_dq_*    (dq1_tc) one block per 64 queries, one sweep over the keys: dQ, and the exact
//                    Δ_i = Σ_j P_ij·dP_ij (docs/ATTENTION.md: not rowsum(dO∘O) over a half O), which it stores
//                    for the dK/dV kernel; with dropout (Tk % 4 == 0) also the keep bits it draws, unless the
//                    forward already stored them in AttentionArgs.KeepBits (p.bitsready).
//   attn_bwd_dkdv_*  (dkdv_tc) one block per 64 keys of a KV head: dK and dV over every query block of every
//                    query head of the group, reading Δ and the stored keep bits.
//
// dQ has its own pass instead of FlashAttention-2's atomicAdd and GQA sums run in a fixed order, so results are
// bit-identical from run to run.
#include "attention.cuh"

#ifndef ATTN_D
#error "kernels/attention_bwd.cu is compiled only as the modules of cuda/attention.go's attnModules (ATTN_D and ATTN_BF defined)"
#endif

// dq1_tc is the dQ kernel, in one sweep over the keys (it replaced a two-sweep design, a first sweep for Δ alone:
// docs/CUDA.md). It starts from Δ̃_i = dO_i·O_i over the stored (half) O, which FlashAttention-2 uses as Δ but which
// carries O's rounding (docs/ATTENTION.md), and forms dS̃ = P∘(dP − Δ̃) for dQ̃ = dS̃·K. In the same sweep it sums
// the exact Δ_i = Σ_j P_ij·dP_ij in FP32 (which it stores for the dK/dV kernel) and R_i = Σ_j P_ij·K_j; since
// dS = dS̃ − P∘ε with ε_i = Δ_i − Δ̃_i, dQ = scale·(dQ̃ − ε·R). Four products per tile instead of five, and each K
// fragment read by ldmatrix feeds two MMAs (dS̃ and P as A operands). One block per 64 queries, K/V tiles through
// a cp.async double buffer (two barriers per step); Q's and dO's fragments are read from shared memory each
// step. ORD takes the block from order_block (heaviest query block first), else from the (query block, head,
// batch) grid; NH splits each 64-key step into NH parts (NH = 2 halves the S and dP registers); every sum still
// runs over the keys in the same order.
template <int D, bool BF, bool ORD, int NH> __device__ __forceinline__ void dq1_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BR = 64, BC = 64, RS = 2, NT = BC / 8, ND = D / 8, KD = D / 16, KC = BC / 16;
	extern __shared__ __align__(128) u16 smem[];
	u16 *sQ = smem, *sO = sQ + BR * D, *sK = sO + BR * D, *sV = sK + RS * BC * D, *sB = sV + RS * BC * D;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	int qb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	if constexpr (ORD) { // heaviest (last) query block first
		const int nqb = ((int)p.Tq + BR - 1) / BR;
		int rb, pair;
		order_block(p, nqb, (int)(p.B * p.Hq), rb, pair);
		qb = nqb - 1 - rb, h = pair % (int)p.Hq, b = pair / (int)p.Hq;
	}
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	const int nb = key_blocks<BR, BC>(p, Tq, Tk, q0, shift);
	const bool fast = unmasked_form(p, b, 0, Tk);
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0; // keep bits through shared memory (draw_bits), two buffers
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;

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
	float dq[ND][4], rk[ND][4];
#pragma unroll
	for (int dn = 0; dn < ND; dn++)
#pragma unroll
		for (int c = 0; c < 4; c++) dq[dn][c] = rk[dn][c] = 0.0f;

	float dsum[2] = {0.0f, 0.0f};
	for (int n = 0; n < nb; n++) {
		const int buf = n & 1, k0 = n * BC;
		if (n + 1 < nb) {
			const int k1 = k0 + BC;
			load_tile<D, BC>(sK + (buf ^ 1) * BC * D, K + (i64)k1 * p.ks[2], p.ks[2], Tk - k1, tid);
			load_tile<D, BC>(sV + (buf ^ 1) * BC * D, V + (i64)k1 * p.vs[2], p.vs[2], Tk - k1, tid);
			if (sbits && p.bitsready) load_bits<BR>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, tid);
			cp_commit();
			if (sbits && !p.bitsready) draw_bits<BR, BC>(sB + (buf ^ 1) * BR * (BC / 16), p, hbase, q0, k1, thr, tid, p.bits);
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncthreads();
		const u16 *cK = sK + buf * BC * D, *cV = sV + buf * BC * D;
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + shift);
		u32 bits = 0; // keep bit of element (nt, hh, e) at (2·nt + hh)·2 + e
#pragma unroll
		for (int hf = 0; hf < NH; hf++) {
		constexpr int NTH = NT / NH;
		const int n0 = hf * NTH;
		float s[NTH][4], dp[NTH][4];
#pragma unroll
		for (int nt = 0; nt < NTH; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[4], ao[4];
			ldsm4(a, smem_addr(sQ + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			ldsm4(ao, smem_addr(sO + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
#pragma unroll
			for (int nt = 0; nt < NTH; nt += 2) {
				u32 bk[4], bv[4];
				int r = (n0 + nt) * 8 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
				ldsm4(bk, smem_addr(cK + swz<D>(r, ch)));
				ldsm4(bv, smem_addr(cV + swz<D>(r, ch)));
				mma<BF>(s[nt], a, bk[0], bk[1]);
				mma<BF>(s[nt + 1], a, bk[2], bk[3]);
				mma<BF>(dp[nt], ao, bv[0], bv[1]);
				mma<BF>(dp[nt + 1], ao, bv[2], bv[3]);
			}
		}
		if (hf == 0) { // after the first part's products, as with NH = 1 (fewer registers live across them)
			if (sbits) {
				const u16 *cb = sB + buf * BR * (BC / 16);
#pragma unroll
				for (int x = 0; x < NT * 4; x++) bits |= (u32)bit_at<BC>(cb, wr + g + ((x >> 1) & 1) * 8, (x >> 2) * 8 + tig * 2 + (x & 1)) << x;
			} else if (drop) {
#pragma unroll 1
				for (int x = 0; x < NT * 2; x++) {
					bool k0b, k1b;
					keep2(rowb[x & 1] + (u64)(k0 + (x >> 1) * 8 + tig * 2), p, thr, k0b, k1b);
					bits |= ((u32)k0b | ((u32)k1b << 1)) << (2 * x);
				}
			}
		}
#pragma unroll
		for (int nl = 0; nl < NTH; nl++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int nt = n0 + nl, j = k0 + nt * 8 + tig * 2 + e;
				float mk = (!fast && p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
				int sjv = (need && p.seg && j < Tk) ? p.seg[(i64)b * Tk + j] : 0;
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int i = q0 + wr + g + hh * 8, c = hh * 2 + e;
					float x = s[nl][c];
					float pv = fast ? ex2(fmaf(x, sl2, -lv[hh])) : ex2((fmaf(x, p.scale, mk) - lv[hh]) * LOG2E);
					if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && si[hh] != sjv))) pv = 0.0f;
					float dpv = dp[nl][c];
					if (drop) dpv = ((bits >> ((nt * 2 + hh) * 2 + e)) & 1) ? dpv * p.dscale : 0.0f;
					dsum[hh] += pv * dpv;
					dp[nl][c] = pv * (dpv - dt[hh]);
					s[nl][c] = pv;
				}
			}
		// dQ̃ += dS̃·K and R += P·K (one K fragment, two MMAs).
#pragma unroll
		for (int kl = 0; kl < KC / NH; kl++) {
			const int kc = hf * (KC / NH) + kl;
			u32 a[4], ap[4];
			a[0] = pack2<BF>(dp[2 * kl][0], dp[2 * kl][1]);
			a[1] = pack2<BF>(dp[2 * kl][2], dp[2 * kl][3]);
			a[2] = pack2<BF>(dp[2 * kl + 1][0], dp[2 * kl + 1][1]);
			a[3] = pack2<BF>(dp[2 * kl + 1][2], dp[2 * kl + 1][3]);
			ap[0] = pack2<BF>(s[2 * kl][0], s[2 * kl][1]);
			ap[1] = pack2<BF>(s[2 * kl][2], s[2 * kl][3]);
			ap[2] = pack2<BF>(s[2 * kl + 1][0], s[2 * kl + 1][1]);
			ap[3] = pack2<BF>(s[2 * kl + 1][2], s[2 * kl + 1][3]);
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bb[4];
				ldsm4t(bb, smem_addr(cK + swz<D>(kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dn + (lane >> 4))));
				mma<BF>(dq[dn], a, bb[0], bb[1]);
				mma<BF>(dq[dn + 1], a, bb[2], bb[3]);
				mma<BF>(rk[dn], ap, bb[0], bb[1]);
				mma<BF>(rk[dn + 1], ap, bb[2], bb[3]);
			}
		}
		}
		__syncthreads();
	}
	// Δ for the dK/dV kernel, ε = Δ − Δ̃, dQ = scale·(dQ̃ − ε·R).
	float eps[2];
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		float t = dsum[hh];
		t += __shfl_xor_sync(0xffffffffu, t, 1);
		t += __shfl_xor_sync(0xffffffffu, t, 2);
		eps[hh] = t - dt[hh];
		int i = q0 + wr + g + hh * 8;
		if (tig == 0 && i < Tq) p.delta[((i64)b * p.Hq + h) * Tq + i] = t;
	}
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < ND; dn++) {
			float x0 = dq[dn][hh * 2] - eps[hh] * rk[dn][hh * 2], x1 = dq[dn][hh * 2 + 1] - eps[hh] * rk[dn][hh * 2 + 1];
			*(u32 *)(sQ + swz<D>(r, dn) + tig * 2) = store2<BF>(x0 * p.scale, x1 * p.scale);
		}
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dq + b * p.dqs[0] + h * p.dqs[1] + (i64)q0 * p.dqs[2], p.dqs[2], sQ, wr, Tq - q0, lane);
#endif
}

// dkdv_tc is the dK/dV kernel: one block per 64 keys of one KV head; 4 warps × 16 keys own dK and dV (FP32
// registers) while Q, dO, LSE and Δ tiles of 64 queries stream through a cp.async double buffer (two barriers per
// step), over every query block and every query head of the group in a fixed order (GQA sums are
// deterministic). ORD takes the block from order_block (one-dimensional grid, longest first), else from the
// (key block, KV head, batch) grid. For D = 64 K's and V's fragments stay in registers for the whole block. NH
// splits each 64-query step into NH parts (NH = 4: a quarter of the Sᵀ and dPᵀ registers); every sum still runs
// over the queries in the same order.
template <int D, bool BF, bool ORD, int NH> __device__ __forceinline__ void dkdv_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BC = 64, BR = 64, RS = 2, NQ = BR / 8, ND = D / 8, KD = D / 16, KQ = BR / 16;
	constexpr bool KVREG = D == 64;
	extern __shared__ __align__(128) u16 smem[];
	u16 *sK = smem, *sV = sK + BC * D, *sQ = sV + BC * D, *sO = sQ + RS * BR * D;
	float *sL = (float *)(sO + RS * BR * D), *sDl = sL + RS * BR;
	u16 *sB = (u16 *)(sDl + RS * BR); // RS BR × BC keep-bit masks (draw_bits), rows = queries
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, G = (int)(p.Hq / p.Hkv), shift = Tk - Tq;
	int kb = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
	if constexpr (ORD) {
		int pair;
		order_block(p, (Tk + BC - 1) / BC, (int)(p.B * p.Hkv), kb, pair);
		hk = pair % (int)p.Hkv, b = pair / (int)p.Hkv;
	}
	const int j0 = kb * BC, ng = G;
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16;
	const bool sbits = drop && (Tk & 3) == 0;

	int qb0 = 0;
	if (p.causal) {
		int imin = j0 - shift;
		qb0 = imin > 0 ? imin / BR : 0;
	}
	const int nqb = (Tq + BR - 1) / BR, nit = nqb > qb0 ? nqb - qb0 : 0, total = ng * nit;

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
			// LSE (threads 0..63) and Δ (64..127) of the tile's rows by cp.async, so no thread waits on them
			// here; rows ≥ Tq read as 0, harmless since their dO and Δ are 0. The LSE is converted where used.
			static_assert(2 * BR == 128, "one LSE or Δ element per thread");
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
	cp_wait<0>();
	__syncthreads();
	u32 kf[KVREG ? KD : 1][4], vf[KVREG ? KD : 1][4];
	if constexpr (KVREG) {
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			ldsm4(kf[kk], smem_addr(sK + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			ldsm4(vf[kk], smem_addr(sV + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
		}
	}
	float dk[ND][4], dv[ND][4];
#pragma unroll
	for (int dn = 0; dn < ND; dn++)
#pragma unroll
		for (int c = 0; c < 4; c++) dk[dn][c] = dv[dn][c] = 0.0f;

	for (int it = 0; it < total; it++) {
		const int buf = it & 1;
		if (it + 1 < total) {
			prefetch(it + 1, buf ^ 1);
			cp_commit();
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncthreads();
		const int hq = hk * G + it / nit, i0 = (qb0 + it % nit) * BR;
		const u16 *cQ = sQ + buf * BR * D, *cO = sO + buf * BR * D;
		const float *cL = sL + buf * BR, *cD = sDl + buf * BR;
		const bool need = j0 + BC > Tk || p.seg || (p.causal && i0 < j0 + BC - 1 - shift);
		u64 hbase = (u64)((i64)b * p.Hq + hq) * (u64)Tq;
		u32 bits = 0; // keep bit of element (nt, e, hh) at (2·nt + e)·2 + hh, drawn in a rolled loop
#pragma unroll
		for (int hf = 0; hf < NH; hf++) {
		constexpr int NQH = NQ / NH;
		const int n0 = hf * NQH;
		float s[NQH][4], dp[NQH][4];
#pragma unroll
		for (int nt = 0; nt < NQH; nt++)
#pragma unroll
			for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
		// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (rows: this warp's 16 keys; columns: the block's queries).
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[4], av[4];
			if constexpr (KVREG) {
#pragma unroll
				for (int c = 0; c < 4; c++) a[c] = kf[kk][c], av[c] = vf[kk][c];
			} else {
				ldsm4(a, smem_addr(sK + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
				ldsm4(av, smem_addr(sV + swz<D>(wr + (lane & 15), kk * 2 + (lane >> 4))));
			}
#pragma unroll
			for (int nt = 0; nt < NQH; nt += 2) {
				u32 bb[4], bo[4];
				int r = (n0 + nt) * 8 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
				ldsm4(bb, smem_addr(cQ + swz<D>(r, ch)));
				ldsm4(bo, smem_addr(cO + swz<D>(r, ch)));
				mma<BF>(s[nt], a, bb[0], bb[1]);
				mma<BF>(s[nt + 1], a, bb[2], bb[3]);
				mma<BF>(dp[nt], av, bo[0], bo[1]);
				mma<BF>(dp[nt + 1], av, bo[2], bo[3]);
			}
		}
		if (hf == 0) { // after the first part's products, as with NH = 1 (fewer registers live across them)
			if (sbits) {
				const u16 *cb = sB + buf * BR * (BC / 16);
#pragma unroll
				for (int x = 0; x < NQ * 4; x++) bits |= (u32)bit_at<BC>(cb, (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), wr + g + (x & 1) * 8) << x;
			} else if (drop) {
#pragma unroll 1
				for (int x = 0; x < NQ * 4; x++) {
					int i = i0 + (x >> 2) * 8 + tig * 2 + ((x >> 1) & 1), j = j0 + wr + g + (x & 1) * 8;
					bits |= (u32)keep1((hbase + (u64)i) * (u64)Tk + (u64)j, p, thr) << x;
				}
			}
		}
#pragma unroll
		for (int nl = 0; nl < NQH; nl++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int nt = n0 + nl;
				int ic = nt * 8 + tig * 2 + e, i = i0 + ic;
				float lv = cL[ic], dl = cD[ic];
				lv = lv == NEG_INF ? POS_INF : (fast ? lv * LOG2E : lv);
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int j = j0 + wr + g + hh * 8, c = hh * 2 + e;
					float x = s[nl][c];
					float pv = fast ? ex2(fmaf(x, sl2, -lv)) : ex2((fmaf(x, p.scale, mk[hh]) - lv) * LOG2E);
					if (need && (j >= Tk || (p.causal && j > i + shift) || (p.seg && i < Tq && sj[hh] != p.seg[(i64)b * Tq + i]))) pv = 0.0f;
					float dpv = dp[nl][c], pd = pv;
					if (drop) {
						bool kp = (bits >> ((nt * 2 + e) * 2 + hh)) & 1;
						pd = pv * (kp ? p.dscale : 0.0f); // as tensor/cpu: a NaN row's dropped P' stays NaN
						dpv = kp ? dpv * p.dscale : 0.0f;
					}
					dp[nl][c] = pv * (dpv - dl);
					s[nl][c] = pd;
				}
			}
		// dV += P'ᵀ·dO, dK += dSᵀ·Q (A: this warp's keys × queries; B: the query tile, transposed by ldmatrix).
#pragma unroll
		for (int kl = 0; kl < KQ / NH; kl++) {
			const int kq = hf * (KQ / NH) + kl;
			u32 a[4], ad[4];
			a[0] = pack2<BF>(s[2 * kl][0], s[2 * kl][1]);
			a[1] = pack2<BF>(s[2 * kl][2], s[2 * kl][3]);
			a[2] = pack2<BF>(s[2 * kl + 1][0], s[2 * kl + 1][1]);
			a[3] = pack2<BF>(s[2 * kl + 1][2], s[2 * kl + 1][3]);
			ad[0] = pack2<BF>(dp[2 * kl][0], dp[2 * kl][1]);
			ad[1] = pack2<BF>(dp[2 * kl][2], dp[2 * kl][3]);
			ad[2] = pack2<BF>(dp[2 * kl + 1][0], dp[2 * kl + 1][1]);
			ad[3] = pack2<BF>(dp[2 * kl + 1][2], dp[2 * kl + 1][3]);
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bo[4], bq[4];
				int r = kq * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), ch = dn + (lane >> 4);
				ldsm4t(bo, smem_addr(cO + swz<D>(r, ch)));
				ldsm4t(bq, smem_addr(cQ + swz<D>(r, ch)));
				mma<BF>(dv[dn], a, bo[0], bo[1]);
				mma<BF>(dv[dn + 1], a, bo[2], bo[3]);
				mma<BF>(dk[dn], ad, bq[0], bq[1]);
				mma<BF>(dk[dn + 1], ad, bq[2], bq[3]);
			}
		}
		}
		__syncthreads();
	}
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		int r = wr + g + hh * 8;
#pragma unroll
		for (int dn = 0; dn < ND; dn++) {
			*(u32 *)(sK + swz<D>(r, dn) + tig * 2) = store2<BF>(dk[dn][hh * 2] * p.scale, dk[dn][hh * 2 + 1] * p.scale);
			*(u32 *)(sV + swz<D>(r, dn) + tig * 2) = store2<BF>(dv[dn][hh * 2], dv[dn][hh * 2 + 1]);
		}
	}
	__syncwarp();
	store_rows<D, 16>((u16 *)p.dk + b * p.dks[0] + hk * p.dks[1] + (i64)j0 * p.dks[2], p.dks[2], sK, wr, Tk - j0, lane);
	store_rows<D, 16>((u16 *)p.dv + b * p.dvs[0] + hk * p.dvs[1] + (i64)j0 * p.dvs[2], p.dvs[2], sV, wr, Tk - j0, lane);
#endif
}

// D = 64: both kernels on one-dimensional grids in order_block's longest-first order (ORD), compiled for three
// blocks per SM (__launch_bounds__(128, 3): at most 168 registers, where kernels holding whole tiles take 244-253
// and so run two blocks, eight warps, per SM); the dQ kernel handles each 64-key step in two halves (NH = 2), the
// dK/dV kernel each 64-query step in quarters (NH = 4). D = 128: the (block, head, batch) grids, whole steps, two
// blocks per SM. The names' suffixes (_h3v3: halves, 3 blocks per SM, v3's order; _q3v3: quarters) are those
// under which the D = 64 kernels were measured (docs/PERFORMANCE.md, variant v10); the other backward variants
// measured then lost and were removed.
#if ATTN_D == 64 && ATTN_BF
extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_bf16_d64_h3v3(const AttnParams p) { dq1_tc<64, true, true, 2>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_bf16_d64_q3v3(const AttnParams p) { dkdv_tc<64, true, true, 4>(p); }
#elif ATTN_D == 64
extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dq_f16_d64_h3v3(const AttnParams p) { dq1_tc<64, false, true, 2>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) attn_bwd_dkdv_f16_d64_q3v3(const AttnParams p) { dkdv_tc<64, false, true, 4>(p); }
#elif ATTN_BF
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_bf16_d128(const AttnParams p) { dq1_tc<128, true, false, 1>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_bf16_d128(const AttnParams p) { dkdv_tc<128, true, false, 1>(p); }
#else
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_f16_d128(const AttnParams p) { dq1_tc<128, false, false, 1>(p); }
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_f16_d128(const AttnParams p) { dkdv_tc<128, false, false, 1>(p); }
#endif
