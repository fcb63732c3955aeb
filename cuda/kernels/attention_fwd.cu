// attention_fwd.cu: the tensor-core forward of fused attention (tensor.Backend.Attention; cuda/attention.go),
// mma.sync m16n8k16 with FP32 accumulation on sm_80+, for F16/BF16 with D = 64 or 128 (attention.cuh: the
// algorithm, the numerics and the shared helpers; attention_ref.cu: the general kernel for everything else).
//
// One kernel per family, attn_fwd_{bf16,f16}_d{64,128}, compiled with attn_keep_bits into its own module
// (cuda/attention.go's attnModule: this file with ATTN_D and ATTN_BF defined). One block per BR queries of one
// head; K and V tiles of 64 keys move with cp.async into XOR-swizzled shared memory (16-byte chunk c of row r
// lives at chunk c ^ (r & 7), so ldmatrix's eight row addresses hit eight bank groups). Causal blocks past the diagonal are
// skipped, masks are evaluated only in blocks that need them (tails, diagonal, segments). Query blocks run
// last first (the longest causal blocks start first). With dropout and Tk % 4 == 0 the keep bits go through
// shared memory: with AttentionArgs.KeepBits attn_keep_bits draws them all first and each step's tiles load with
// K and V (the backward reads the same bits); without it the block draws them (draw_bits, a Philox block per
// eight scores).
#include "attention.cuh"

#ifndef ATTN_D
#error "kernels/attention_fwd.cu is compiled only as the modules of cuda/attention.go's attnModules (ATTN_D and ATTN_BF defined)"
#endif

// fwd_tc is the forward of one block of BR = 64·MT queries (4 warps of 16·MT rows) against 64-key steps. DB
// double-buffers K and V (step n+1's tiles load during step n; two barriers per step); without it V loads during
// Q·Kᵀ and the next K during the softmax and P·V. QREG keeps Q's fragments in registers for the whole block.
template <int D, bool BF, int MT, bool QREG, bool DB> __device__ __forceinline__ void fwd_tc(const AttnParams &p) {
#ifdef TC_OK
	constexpr int BC = 64, ST = DB ? 2 : 1, BR = 4 * 16 * MT, NT = BC / 8, ND = D / 8, KD = D / 16, KC = BC / 16;
	extern __shared__ __align__(128) u16 smem[];
	u16 *sQ = smem, *sK = sQ + BR * D, *sV = sK + ST * BC * D, *sB = sV + ST * BC * D;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
	const int qb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	const int Tq = (int)p.Tq, Tk = (int)p.Tk, hk = h / (int)(p.Hq / p.Hkv), shift = Tk - Tq, q0 = qb * BR;
	const u16 *Q = (const u16 *)p.q + b * p.qs[0] + h * p.qs[1] + (i64)q0 * p.qs[2];
	const u16 *K = (const u16 *)p.k + b * p.ks[0] + hk * p.ks[1];
	const u16 *V = (const u16 *)p.v + b * p.vs[0] + hk * p.vs[1];
	const int nb = key_blocks<BR, BC>(p, Tq, Tk, q0, shift);
	const bool fast = unmasked_form(p, b, 0, Tk);
	const float sl2 = p.scale * LOG2E;
	const bool drop = p.p > 0.0f;
	const u32 thr = keep_thr(p.p);
	const int wr = warp * 16 * MT;
	// Dropout keep bits through shared memory (two buffers of BR × BC bits: step n+1's are drawn during step n)
	// when Tk % 4 == 0; otherwise each thread draws its own pairs (keep2).
	const bool sbits = drop && (Tk & 3) == 0;
	const u64 hbase = (u64)((i64)b * p.Hq + h) * (u64)Tq;
	// pre: attn_keep_bits already drew every bit into p.bits (KeepBits): the tiles load with K and V instead.
	const bool pre = sbits && p.bitsready;
	if (sbits && nb > 0) {
		if (pre) load_bits<BR>(sB, p, hbase, q0, 0, tid);
		else draw_bits<BR, BC>(sB, p, hbase, q0, 0, thr, tid);
	}

	load_tile<D, BR>(sQ, Q, p.qs[2], Tq - q0, tid);
	if (nb > 0) load_tile<D, BC>(sK, K, p.ks[2], Tk, tid);
	if (DB && nb > 0) load_tile<D, BC>(sV, V, p.vs[2], Tk, tid);
	cp_commit();

	float o[MT][ND][4], m[MT][2], l[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
#pragma unroll
		for (int dn = 0; dn < ND; dn++) o[mt][dn][0] = o[mt][dn][1] = o[mt][dn][2] = o[mt][dn][3] = 0.0f;
		m[mt][0] = m[mt][1] = NEG_INF;
		l[mt][0] = l[mt][1] = 0.0f;
	}
	u32 qf[QREG ? MT : 1][QREG ? KD : 1][4];

	for (int n = 0; n < nb; n++) {
		const int k0 = n * BC;
		const u16 *cK = sK, *cV = sV;
		if constexpr (DB) {
			// Two stages: K and V of step n+1 load while step n computes.
			cK = sK + (n & 1) * BC * D, cV = sV + (n & 1) * BC * D;
			if (n + 1 < nb) {
				load_tile<D, BC>(sK + ((n + 1) & 1) * BC * D, K + (i64)(k0 + BC) * p.ks[2], p.ks[2], Tk - k0 - BC, tid);
				load_tile<D, BC>(sV + ((n + 1) & 1) * BC * D, V + (i64)(k0 + BC) * p.vs[2], p.vs[2], Tk - k0 - BC, tid);
				if (pre) load_bits<BR>(sB + ((n + 1) & 1) * BR * (BC / 16), p, hbase, q0, k0 + BC, tid);
				cp_commit();
				cp_wait<1>();
			} else {
				cp_wait<0>();
			}
			__syncthreads();
		} else {
			cp_wait<0>();
			__syncthreads();
			load_tile<D, BC>(sV, V + (i64)k0 * p.vs[2], p.vs[2], Tk - k0, tid);
			if (pre && n + 1 < nb) load_bits<BR>(sB + ((n + 1) & 1) * BR * (BC / 16), p, hbase, q0, k0 + BC, tid);
			cp_commit();
		}
		if (sbits && !pre && n + 1 < nb) draw_bits<BR, BC>(sB + ((n + 1) & 1) * BR * (BC / 16), p, hbase, q0, k0 + BC, thr, tid);
		if (QREG && n == 0) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int kk = 0; kk < KD; kk++) ldsm4(qf[mt][kk], smem_addr(sQ + swz<D>(wr + mt * 16 + (lane & 15), kk * 2 + (lane >> 4))));
		}
		float s[MT][NT][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int nt = 0; nt < NT; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < KD; kk++) {
			u32 a[MT][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				if constexpr (QREG) {
					a[mt][0] = qf[mt][kk][0], a[mt][1] = qf[mt][kk][1], a[mt][2] = qf[mt][kk][2], a[mt][3] = qf[mt][kk][3];
				} else {
					ldsm4(a[mt], smem_addr(sQ + swz<D>(wr + mt * 16 + (lane & 15), kk * 2 + (lane >> 4))));
				}
			}
#pragma unroll
			for (int nt = 0; nt < NT; nt += 2) {
				u32 bb[4];
				ldsm4(bb, smem_addr(cK + swz<D>(nt * 8 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1))));
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					mma<BF>(s[mt][nt], a[mt], bb[0], bb[1]);
					mma<BF>(s[mt][nt + 1], a[mt], bb[2], bb[3]);
				}
			}
		}
		if constexpr (!DB) {
			cp_wait<0>();
			__syncthreads();
			if (n + 1 < nb) {
				load_tile<D, BC>(sK, K + (i64)(k0 + BC) * p.ks[2], p.ks[2], Tk - k0 - BC, tid);
				cp_commit();
			}
		}
		// Scores → probabilities (online softmax), in place in s.
		if (!fast) {
#pragma unroll
			for (int nt = 0; nt < NT; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int j = k0 + nt * 8 + tig * 2 + e;
					float mk = (p.mask && j < Tk) ? p.mask[(i64)b * Tk + j] : 0.0f;
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						s[mt][nt][e] = fmaf(s[mt][nt][e], p.scale, mk);
						s[mt][nt][2 + e] = fmaf(s[mt][nt][2 + e], p.scale, mk);
					}
				}
		}
		const bool need = k0 + BC > Tk || p.seg || (p.causal && k0 + BC - 1 > q0 + shift);
		if (need) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					int i = q0 + wr + mt * 16 + g + hh * 8;
#pragma unroll
					for (int nt = 0; nt < NT; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++)
							if (forbidden(p, b, i, k0 + nt * 8 + tig * 2 + e, shift)) s[mt][nt][hh * 2 + e] = NEG_INF;
				}
		}
		float al[MT][2];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				float mx = NEG_INF;
#pragma unroll
				for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][hh * 2], s[mt][nt][hh * 2 + 1]));
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
				float mo = m[mt][hh], mn = fmaxf(mo, fast ? mx * sl2 : mx);
				float mu = mn == NEG_INF ? 0.0f : mn;
				float alpha = fast ? ex2(mo - mu) : ex2((mo - mu) * LOG2E);
				m[mt][hh] = mn;
				float sum = 0.0f;
#pragma unroll
				for (int nt = 0; nt < NT; nt++)
#pragma unroll
					for (int e = 0; e < 2; e++) {
						float x = s[mt][nt][hh * 2 + e];
						float pv = fast ? ex2(fmaf(x, sl2, -mu)) : ex2((x - mu) * LOG2E);
						sum += pv;
						s[mt][nt][hh * 2 + e] = pv;
					}
				l[mt][hh] = l[mt][hh] * alpha + sum;
				al[mt][hh] = alpha;
			}
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int hh = 0; hh < 2; hh++)
#pragma unroll
				for (int dn = 0; dn < ND; dn++) o[mt][dn][hh * 2] *= al[mt][hh], o[mt][dn][hh * 2 + 1] *= al[mt][hh];
		if (sbits) {
			const u16 *cb = sB + (n & 1) * BR * (BC / 16);
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++)
#pragma unroll
					for (int nt = 0; nt < NT; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++)
							if (!bit_at<BC>(cb, wr + mt * 16 + g + hh * 8, nt * 8 + tig * 2 + e)) s[mt][nt][hh * 2 + e] = 0.0f;
		} else if (drop) {
			// Keep bits of this thread's scores (bit 2·x + e of word x / 32, x = (mt·2 + hh)·NT + nt), drawn in
			// a rolled loop so that the Philox code appears once per word.
			constexpr int NX = MT * 2 * NT, NWD = (NX + 31) / 32;
			u64 bits[NWD];
#pragma unroll
			for (int w = 0; w < NWD; w++) {
				u64 acc = 0;
#pragma unroll 1
				for (int y = 0; y < 32 && w * 32 + y < NX; y++) {
					int x = w * 32 + y, nt = x % NT, rh = x / NT, i = q0 + wr + (rh >> 1) * 16 + g + (rh & 1) * 8, j = k0 + nt * 8 + tig * 2;
					bool k0b, k1b;
					keep2(((u64)((i64)b * p.Hq + h) * (u64)Tq + (u64)i) * (u64)Tk + (u64)j, p, thr, k0b, k1b);
					acc |= ((u64)k0b | ((u64)k1b << 1)) << (2 * y);
				}
				bits[w] = acc;
			}
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++)
#pragma unroll
					for (int nt = 0; nt < NT; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							int x = (mt * 2 + hh) * NT + nt;
							if (!((bits[x / 32] >> (2 * (x % 32) + e)) & 1)) s[mt][nt][hh * 2 + e] = 0.0f;
						}
		}
		// O += P·V.
#pragma unroll
		for (int kc = 0; kc < KC; kc++) {
			u32 a[MT][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				a[mt][0] = pack2<BF>(s[mt][2 * kc][0], s[mt][2 * kc][1]);
				a[mt][1] = pack2<BF>(s[mt][2 * kc][2], s[mt][2 * kc][3]);
				a[mt][2] = pack2<BF>(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1]);
				a[mt][3] = pack2<BF>(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3]);
			}
#pragma unroll
			for (int dn = 0; dn < ND; dn += 2) {
				u32 bb[4];
				ldsm4t(bb, smem_addr(cV + swz<D>(kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dn + (lane >> 4))));
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					mma<BF>(o[mt][dn], a[mt], bb[0], bb[1]);
					mma<BF>(o[mt][dn + 1], a[mt], bb[2], bb[3]);
				}
			}
		}
		if constexpr (DB) __syncthreads();
	}
	// Epilogue: normalise, stage the warp's rows in its own part of sQ, store O and LSE.
	cp_wait<0>();
	__syncthreads();
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			float lt = l[mt][hh];
			lt += __shfl_xor_sync(0xffffffffu, lt, 1);
			lt += __shfl_xor_sync(0xffffffffu, lt, 2);
			float inv = lt == 0.0f ? 0.0f : p.dscale / lt; // a NaN score makes lt NaN: the row is NaN
			int r = wr + mt * 16 + g + hh * 8, i = q0 + r;
			if (tig == 0 && i < Tq) {
				float lse = NEG_INF;
				if (lt != 0.0f) lse = fast ? (m[mt][hh] + log2f(lt)) * LN2 : m[mt][hh] + log2f(lt) * LN2;
				p.lse[((i64)b * p.Hq + h) * Tq + i] = lse;
			}
#pragma unroll
			for (int dn = 0; dn < ND; dn++)
				*(u32 *)(sQ + swz<D>(r, dn) + tig * 2) = store2<BF>(o[mt][dn][hh * 2] * inv, o[mt][dn][hh * 2 + 1] * inv);
		}
	__syncwarp();
	store_rows<D, 16 * MT>((u16 *)p.o + b * p.os[0] + h * p.os[1] + (i64)q0 * p.os[2], p.os[2], sQ, wr, Tq - q0, lane);
#endif
}

// attn_keep_bits draws every dropout keep bit of a call into p.bits (AttentionArgs.KeepBits) before the forward
// runs with p.bitsready: word w of row r (r = (b·Hq + h)·Tq + i, w < bitsw) holds the bits of keys 16w … 16w+15
// as draw_bits stores them. A thread per 64-key tile of a row (four words, one 8-byte store; bitsw is a multiple
// of 4), 128 a block: the Philox arithmetic at full occupancy instead of inside the forward's warps, where it
// waited on its own dependency chain, with eight independent Philox blocks in flight per thread and the row and
// tile found by one 32-bit division per four words (the thread-per-word kernel spent about a sixth of its
// instructions on a 64-bit division and the index: ncu on the H200, 2026-12-04).
extern "C" __global__ void __launch_bounds__(128) attn_keep_bits(const AttnParams p) {
	const i64 cw = p.bitsw >> 2, n = p.B * p.Hq * p.Tq * cw; // tiles per row, tiles in all
	const i64 e = (i64)blockIdx.x * 128 + threadIdx.x;
	if (e >= n) return;
	i64 row, c;
	if (n <= 0xffffffffll) {
		const u32 ue = (u32)e, ucw = (u32)cw, ur = ue / ucw;
		row = ur, c = ue - ur * ucw;
	} else {
		row = e / cw, c = e - row * cw;
	}
	const u64 base = (u64)row * (u64)p.Tk + (u64)c * 64, off = p.offset + tune_philox_base;
	const uint2 key = attn_key(p);
	const u32 thr = keep_thr(p.p);
	u32 w[4];
	if ((base & 7) == 0 && thr <= 0xffffu) { // eight whole Philox blocks (Tk % 8 == 0): keep16 of two at a time
		const u64 ctr = off + (base >> 3);
#pragma unroll
		for (int k = 0; k < 4; k++) w[k] = keep16(philox_block(ctr + 2 * k, key), philox_block(ctr + 2 * k + 1, key), thr);
	} else {
#pragma unroll
		for (int k = 0; k < 4; k++) w[k] = keep_word(base + 16 * k, off, key, thr);
	}
	*(u64 *)(p.bits + e * 4) = (u64)w[0] | (u64)w[1] << 16 | (u64)w[2] << 32 | (u64)w[3] << 48; // 8-byte aligned (keepBitsUsable)
}

// D = 64: 128 queries per block (MT = 2: 4 warps × 32 rows, so every K/V fragment read from shared memory feeds
// two MMAs), Q's fragments held in registers, K and V double-buffered (4% faster at (64, 12, 512, 64)). D = 128:
// 64 queries (two row tiles need more than 255 registers), Q's fragments from shared memory, single-buffered
// (double-buffering was 4% slower causal at (8, 32, 2048, 128)). The forward variants measured against these on
// the H200 (docs/PERFORMANCE.md) lost and were removed.
#if ATTN_D == 64 && ATTN_BF
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d64(const AttnParams p) { fwd_tc<64, true, 2, true, true>(p); }
#elif ATTN_D == 64
extern "C" __global__ void __launch_bounds__(128) attn_fwd_f16_d64(const AttnParams p) { fwd_tc<64, false, 2, true, true>(p); }
#elif ATTN_BF
extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16_d128(const AttnParams p) { fwd_tc<128, true, 1, false, false>(p); }
#else
extern "C" __global__ void __launch_bounds__(128) attn_fwd_f16_d128(const AttnParams p) { fwd_tc<128, false, 1, false, false>(p); }
#endif
