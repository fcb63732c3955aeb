// lnbwd.cu: the LayerNorm backward with its weight gradients' column sums in one pass, for the widths of
// BERT-like models (C = 128·NG, NG = 1..8: 768, 1024). A template over NG keeps each lane's row slice and its
// partial sums in registers; the file is compiled without -lineinfo (NVRTC 11.8 crashes on templates with
// line information; see optionsFor in nvrtc.go). norm.cu has the general kernels it matches.
#include "common.cuh"
#include "philox.cuh"

// st4r rounds r to dt and stores it as elements i..i+3 with one access (st4's bits: BF16 and F16 pairs by one
// packed conversion, bf16x2_rn / f16x2_rn), and returns the stored values widened back: r held in dt, what
// round_to gives, without rounding twice.
__device__ __forceinline__ F4 st4r(void *p, int dt, i64 i, F4 r) {
	if (dt == DT_F32) {
		st4(p, dt, i, r);
		return r;
	}
	u32 a, b;
	if (dt == DT_BF16) a = bf16x2_rn(r.v[0], r.v[1]), b = bf16x2_rn(r.v[2], r.v[3]);
	else a = f16x2_rn(r.v[0], r.v[1]), b = f16x2_rn(r.v[2], r.v[3]);
	*(uint2 *)((u16 *)p + i) = make_uint2(a, b);
	F4 o;
	o.v[0] = half_to_f32((u16)(a & 0xffffu), dt), o.v[1] = half_to_f32((u16)(a >> 16), dt);
	o.v[2] = half_to_f32((u16)(b & 0xffffu), dt), o.v[3] = half_to_f32((u16)(b >> 16), dt);
	return o;
}

// ln_bwd_row is one row of layernorm_bwd_ring_<NG> from its x and dout slices (already in registers): the
// row's two means, dx (and dy) stored, the lane's dgamma and dbeta sums ga, gb (and, with BIAS, the dy sums
// gc) advanced by the row.
template <int NG, bool BIAS = false>
__device__ __forceinline__ void ln_bwd_row(float (&ga)[NG][4], float (&gb)[NG][4], float (*gc)[4], const F4 (&xv)[NG], const F4 (&dv)[NG],
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
	u32 na = 0u, nb = 0u; // the dropout words of group j + 1, drawn with group j's (below)
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
		F4 ox = st4r(dx, dtdx, base + c, o); // dx as stored
		if (dy) {
			u32 wd[4] = {0u, 0u, 0u, 0u};
			if (p != 0.0f) {
				// philox_words of group g = (base + c)/4: a block serves groups 2h and 2h + 1, which are lanes
				// 2m and 2m + 1 (base/4 is a multiple of 32). For j and j + 1 the even lane draws group j's block
				// and the odd lane group j + 1's, and they swap the halves the other needs: one block per lane
				// and pair of groups instead of one per group.
				u32 a, b;
				if (j % 2 == 1) {
					a = na, b = nb;
				} else if (j + 1 < NG) {
					int odd = lane & 1;
					uint4 blk = philox_block(offset + ((u64)((base + c + odd * 128) / 4) >> 1), key);
					u32 sa = odd ? blk.x : blk.z, sb = odd ? blk.y : blk.w; // what the partner needs
					u32 ra = __shfl_xor_sync(0xffffffffu, sa, 1), rb = __shfl_xor_sync(0xffffffffu, sb, 1);
					a = odd ? ra : blk.x, b = odd ? rb : blk.y;
					na = odd ? blk.z : ra, nb = odd ? blk.w : rb;
				} else {
					uint4 blk = philox_block(offset + ((u64)((base + c) / 4) >> 1), key);
					a = (lane & 1) ? blk.z : blk.x, b = (lane & 1) ? blk.w : blk.y;
				}
				wd[0] = a & 0xffffu, wd[1] = a >> 16, wd[2] = b & 0xffffu, wd[3] = b >> 16;
			}
#pragma unroll
			for (int q = 0; q < 4; q++) o.v[q] = branch_grad(ox.v[q], q, wd, p, scale);
			F4 oy = st4r(dy, dtdy, base + c, o);
			if (BIAS)
#pragma unroll
				for (int q = 0; q < 4; q++) gc[j][q] += oy.v[q]; // the value stored: BiasGrad's addend
		}
	}
}

// ---- the ring kernel: rows streamed into shared memory by cp.async ----
//
// layernorm_bwd_ring_<NG>: layernorm_bwd (with its optional dy) and LayerNorm's colsum_partial (mode 1) in one
// pass, with colsum_partial's chunks, rows and order (block k = chunk k; warp w adds its rows lo+w, lo+w+8, ...
// in increasing order; the eight warps' sums are then added in order w = 0..7 into pa/pb[k][c]), so the same
// bits, plus, when pc is set, BiasGrad's partials of the dy it stores in pc (the same rows, order and
// additions as colsum_partial's mode 0 over dy). Each warp streams its rows' x, dout, mean and rstd through a
// ring of S stages of its own in dynamic shared memory with cp.async, so that rows i+1 .. i+S-1 are in flight
// while it computes row i. Row i's dx may alias its own x or dout (already copied) but no other row. Stage
// layout: x row (C·sx bytes), dout row (C·sd), mean, rstd and 8 bytes of padding; C·sx and C·sd are multiples
// of 256 (C = 128·NG), every row 16-byte aligned (vec). With one block of eight warps per chunk (a chunk's
// rows and their order are the weight gradients' summation order) the kernel is bound by its instructions at
// 12.5% occupancy (H200, session 5 d1/d2 ncu: memory 33-46% of peak); what made it faster were fewer
// instructions per element (dx and dy stored through packed conversions, one Philox block per lane pair, the
// dbias addend taken from the stored dy): 158.6 → 128.1 µs with dbias at 64×512. Taking rows two at a time
// (147 µs), blocks of fewer warps with the classes' sums finished apart (233.9 µs with 4 warps; 111.5 µs
// against the two passes' 38.6 at 32×128) and one row at a time in registers (the kernel this replaced) were
// slower.

#define LNR_SMAX 8

__device__ __forceinline__ void lnr_cp16(void *dst, const void *src) {
	u32 d = (u32)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void lnr_cp4(void *dst, const void *src) {
	u32 d = (u32)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void lnr_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// lnr_wait waits until at most n of this thread's newest cp.async groups are pending (0 ≤ n < LNR_SMAX).
__device__ __forceinline__ void lnr_wait(int n) {
	switch (n) {
	case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
	case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
	case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
	case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
	case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
	case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
	case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
	default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
	}
}

// lnr_issue queues warp-row i (the warp's i-th row, row0 + 8i, when i < cnt) into stage st, then commits a
// group (an empty one past the end, so that every iteration waits for the same count).
__device__ __forceinline__ void lnr_issue(unsigned char *st, int i, int cnt, i64 row0, int lane, const unsigned char *x,
                                          int xb, const unsigned char *dout, int db, const float *mean,
                                          const float *rstd) {
	if (i < cnt) {
		i64 row = row0 + 8 * (i64)i;
		for (int o = lane * 16; o < xb; o += 512) lnr_cp16(st + o, x + row * xb + o);
		for (int o = lane * 16; o < db; o += 512) lnr_cp16(st + xb + o, dout + row * db + o);
		if (lane == 0) {
			lnr_cp4(st + xb + db, mean + row);
			lnr_cp4(st + xb + db + 4, rstd + row);
		}
	}
	lnr_commit();
}

template <int NG, bool BIAS>
__device__ __forceinline__ void ln_bwd_ring(unsigned char *smem, int S, float *pa, float *pb, float *pc, void *dx,
                                            int dtdx, void *dy, int dtdy, const void *dout, int dtd, const void *x,
                                            int dtx, const void *gamma, int dtg, const float *mean, const float *rstd,
                                            i64 N, int C, i64 rows, float p, float scale, u64 seed, u64 offset) {
	int wp = threadIdx.x / 32, lane = threadIdx.x % 32;
	i64 k = blockIdx.x;
	i64 lo = k * rows, hi = min(N, lo + rows);
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	offset += tune_philox_base; // the step's base (philox.cuh)
	int xb = C * (dtx == DT_F32 ? 4 : 2), db = C * (dtd == DT_F32 ? 4 : 2), sb = xb + db + 16;
	unsigned char *ring = smem + (i64)wp * S * sb;
	int cnt = hi - lo > wp ? (int)((hi - lo - wp + 7) / 8) : 0;
	i64 row0 = lo + wp;
	const unsigned char *xg = (const unsigned char *)x, *dg = (const unsigned char *)dout;
	for (int i = 0; i < S - 1; i++) lnr_issue(ring + i * sb, i, cnt, row0, lane, xg, xb, dg, db, mean, rstd);
	float ga[NG][4], gb[NG][4], gc[BIAS ? NG : 1][4];
#pragma unroll
	for (int j = 0; j < NG; j++)
#pragma unroll
		for (int q = 0; q < 4; q++) {
			ga[j][q] = 0.0f, gb[j][q] = 0.0f;
			if (BIAS) gc[j][q] = 0.0f;
		}
	F4 gw[NG];
#pragma unroll
	for (int j = 0; j < NG; j++) gw[j] = ld4(gamma, dtg, lane * 4 + j * 128);
	int i = 0;
	for (; i < cnt; i++) { // rows i .. i+S-2 issued
		lnr_issue(ring + ((i + S - 1) % S) * sb, i + S - 1, cnt, row0, lane, xg, xb, dg, db, mean, rstd);
		lnr_wait(S - 1); // this lane's copies of row i have landed
		__syncwarp();    // and every lane's
		const unsigned char *st = ring + (i % S) * sb;
		F4 xv[NG], dv[NG];
#pragma unroll
		for (int j = 0; j < NG; j++) {
			xv[j] = ld4(st, dtx, lane * 4 + j * 128);
			dv[j] = ld4(st + xb, dtd, lane * 4 + j * 128);
		}
		float m = *(const float *)(st + xb + db), r = *(const float *)(st + xb + db + 4);
		__syncwarp(); // the stage is free for row i + S, issued next iteration
		ln_bwd_row<NG, BIAS>(ga, gb, gc, xv, dv, gw, m, r, (row0 + 8 * (i64)i) * C, lane, dx, dtdx, dy, dtdy, C, p,
		                     scale, key, offset);
	}
	lnr_wait(0);
	__syncthreads(); // the ring is now the block's reduction buffer
	float(*sh)[NG * 128] = (float(*)[NG * 128])smem;
	for (int pass = 0; pass < (BIAS ? 3 : 2); pass++) {
#pragma unroll
		for (int j = 0; j < NG; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) {
				float v = ga[j][q];
				if (pass == 1) v = gb[j][q];
				if (BIAS && pass == 2) v = gc[BIAS ? j : 0][q];
				sh[wp][lane * 4 + j * 128 + q] = v;
			}
		__syncthreads();
		float *out = pass == 0 ? pa : pass == 1 ? pb : pc;
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float t = 0.0f;
			for (int v = 0; v < 8; v++) t += sh[v][c];
			out[k * C + c] = t;
		}
		__syncthreads();
	}
}

// grid chunks, block 256 threads, dynamic shared memory 8·S·(C·(sx + sd) + 16) bytes, 2 ≤ S ≤ LNR_SMAX.
#define LN_BWD_RING(NG)                                                                                           \
	extern "C" __global__ void __launch_bounds__(256, 1) layernorm_bwd_ring_##NG(                                \
	    float *pa, float *pb, float *pc, void *dx, int dtdx, void *dy, int dtdy, const void *dout, int dtd,        \
	    const void *x, int dtx, const void *gamma, int dtg, const float *mean, const float *rstd, i64 N, int C,     \
	    i64 rows, float p, float scale, u64 seed, u64 offset, int S) {                                            \
		extern __shared__ __align__(16) unsigned char lnr_smem[];                                                 \
		if (pc)                                                                                                   \
			ln_bwd_ring<NG, true>(lnr_smem, S, pa, pb, pc, dx, dtdx, dy, dtdy, dout, dtd, x, dtx, gamma, dtg, mean, \
			                      rstd, N, C, rows, p, scale, seed, offset);                                      \
		else                                                                                                      \
			ln_bwd_ring<NG, false>(lnr_smem, S, pa, pb, pc, dx, dtdx, dy, dtdy, dout, dtd, x, dtx, gamma, dtg,      \
			                       mean, rstd, N, C, rows, p, scale, seed, offset);                               \
	}
LN_BWD_RING(1)
LN_BWD_RING(2)
LN_BWD_RING(3)
LN_BWD_RING(4)
LN_BWD_RING(5)
LN_BWD_RING(6)
LN_BWD_RING(7)
LN_BWD_RING(8)
