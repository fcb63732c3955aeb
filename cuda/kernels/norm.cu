// norm.cu: LayerNorm forward and backward, and the column reductions behind the weight gradients (dgamma,
// dbeta, the Linear bias gradient).
//
// Variants:
// - layernorm_fwd / layernorm_bwd: one warp per row (8 rows per 256-thread block), the row re-read from
//   L1/L2 for each pass. With vec=1 (C % 4 == 0, every row pointer aligned) a lane moves four elements per
//   access. Statistics are FP32: two-pass mean then biased variance, as torch.nn.LayerNorm and tensor/cpu;
//   rstd = 1/sqrt(var + eps) evaluated in double and rounded once (tensor/cpu does the same).
// - layernorm_bwd_ring_<C/128> (lnbwd.cu): layernorm_bwd and colsum_partial's mode 1 (and BiasGrad of its dy)
//   from one read of each row.
// - residual_layernorm_fwd: layernorm_fwd with its input formed on the fly, sum = dropout(y) + x (written
//   once, for the backward), and the output optionally also stored in a second dtype (the next GEMM's copy).
// - colsum_partial / colsum_finish: deterministic column sums of an (N, C) matrix. A (32 × 8)-thread block owns
//   64 columns (two per thread, two-element accesses when aligned) of one chunk of rows; thread row ty sums the
//   chunk's rows r ≡ ty (mod 8) in increasing r, the eight sums are combined in order ty = 0..7 and written to
//   partial[chunk][c]; colsum_finish then adds the chunks in order into the FP32-widened output and rounds
//   once. No atomics, so the result is the same on every run. mode 0 sums dy (BiasGrad); mode 1 sums dout·n̂
//   into the first output and dout into the second (LayerNorm's dgamma and dbeta); mode 2 sums
//   dout·round_x(x·rstd) into the first (RMSNorm's dweight, decoder.cu).
// - gelu_bwd_colsum: GELUBackwardRecompute with its bias gradient, laid out as colsum_partial's mode 0 over the
//   dx it stores (the same partials as BiasGrad of that dx).
#include "common.cuh"
#include "philox.cuh"

extern "C" __global__ void layernorm_fwd(void *out, int dto, float *mean, float *rstd, const void *x, int dtx,
                                         const void *gamma, int dtg, const void *beta, int dtb, i64 N, int C,
                                         float eps, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	float s = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c);
			s += a.v[0], s += a.v[1], s += a.v[2], s += a.v[3];
		}
	} else {
		for (int c = lane; c < C; c += 32) s += ld(x, dtx, base + c);
	}
	float m = warp_sum(s) / (float)C;
	float ss = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float d = a.v[k] - m;
				ss += d * d;
			}
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float d = ld(x, dtx, base + c) - m;
			ss += d * d;
		}
	}
	float var = warp_sum(ss) / (float)C;
	float r = (float)(1.0 / sqrt((double)(var + eps)));
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), g = ld4(gamma, dtg, c), b = ld4(beta, dtb, c), o;
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = (a.v[k] - m) * r * g.v[k] + b.v[k];
			st4(out, dto, base + c, o);
		}
	} else {
		for (int c = lane; c < C; c += 32)
			st(out, dto, base + c, (ld(x, dtx, base + c) - m) * r * ld(gamma, dtg, c) + ld(beta, dtb, c));
	}
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = r;
	}
}

// dropped returns element i of a dropout input after the mask: v·keep·scale with keep drawn as the dropout
// kernel of elementwise.cu draws element i (slice i % 8 of Philox block offset + i/8); p == 0 keeps v.
__device__ __forceinline__ float dropped(float v, i64 i, float p, float scale, uint2 key, u64 offset) {
	if (p == 0.0f) return v;
	uint4 blk = philox_block(offset + (u64)(i / 8), key);
	return v * keep_of(philox_slice(blk, (int)(i % 8)), p) * scale;
}

// residual_layernorm_fwd: sum = round_y(dropout(y)) + x (rounded to sum's dtype), then layernorm_fwd over
// sum, its output also converted into outh when outh is not NULL (tensor.ResidualNormArgs). One warp per
// row with layernorm_fwd's lane layout and summation order; the first pass writes sum and the later passes
// read back the lane's own elements, so the statistics see exactly the stored values.
extern "C" __global__ void residual_layernorm_fwd(void *sum, int dts, void *out, int dto, void *outh, int dth,
                                                  float *mean, float *rstd, const void *y, int dty, const void *x,
                                                  int dtx, const void *gamma, int dtg, const void *beta, int dtb,
                                                  i64 N, int C, float eps, float p, float scale, u64 seed,
                                                  u64 offset, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	offset += tune_philox_base; // the step's base (philox.cuh)
	float s = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(y, dty, base + c), b = ld4(x, dtx, base + c), r;
			if (p != 0.0f) { // one Philox call serves the four elements (base + c is a multiple of 4)
				u32 w[4];
				philox_words(w, (u64)((base + c) / 4), key, offset);
#pragma unroll
				for (int k = 0; k < 4; k++) a.v[k] = round_to(a.v[k] * keep_of(w[k], p) * scale, dty);
			}
#pragma unroll
			for (int k = 0; k < 4; k++) r.v[k] = round_to(a.v[k] + b.v[k], dts);
			st4(sum, dts, base + c, r);
			s += r.v[0], s += r.v[1], s += r.v[2], s += r.v[3];
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float a = round_to(dropped(ld(y, dty, base + c), base + c, p, scale, key, offset), dty);
			float r = round_to(a + ld(x, dtx, base + c), dts);
			st(sum, dts, base + c, r);
			s += r;
		}
	}
	float m = warp_sum(s) / (float)C;
	float ss = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(sum, dts, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float d = a.v[k] - m;
				ss += d * d;
			}
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float d = ld(sum, dts, base + c) - m;
			ss += d * d;
		}
	}
	float var = warp_sum(ss) / (float)C;
	float r = (float)(1.0 / sqrt((double)(var + eps)));
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(sum, dts, base + c), g = ld4(gamma, dtg, c), b = ld4(beta, dtb, c), o;
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = (a.v[k] - m) * r * g.v[k] + b.v[k];
			st4(out, dto, base + c, o);
			if (outh) {
#pragma unroll
				for (int k = 0; k < 4; k++) o.v[k] = round_to(o.v[k], dto);
				st4(outh, dth, base + c, o);
			}
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float o = (ld(sum, dts, base + c) - m) * r * ld(gamma, dtg, c) + ld(beta, dtb, c);
			st(out, dto, base + c, o);
			if (outh) st(outh, dth, base + c, round_to(o, dto));
		}
	}
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = r;
	}
}

// layernorm_bwd: dx = rstd·(g − mean(g) − n̂·mean(g·n̂)), g = dout·gamma, n̂ = (x − μ)·rstd (llm.c's form, as
// tensor/cpu). dx may alias dout or x: each lane reads its elements before it writes them. When dy is not
// NULL it also gets the branch gradient of ResidualLayerNormBackward: the stored dx through the forward's
// dropout (branch_grad; p == 0: a cast).
extern "C" __global__ void layernorm_bwd(void *dx, int dtdx, void *dy, int dtdy, const void *dout, int dtd,
                                         const void *x, int dtx, const void *gamma, int dtg, const float *mean,
                                         const float *rstd, i64 N, int C, float p, float scale, u64 seed,
                                         u64 offset, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	offset += tune_philox_base; // the step's base (philox.cuh)
	float m = mean[row], r = rstd[row];
	float sg = 0.0f, sgn = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), w = ld4(gamma, dtg, c);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float g = d.v[k] * w.v[k];
				sg += g;
				sgn += g * (a.v[k] - m) * r;
			}
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float g = ld(dout, dtd, base + c) * ld(gamma, dtg, c);
			sg += g;
			sgn += g * (ld(x, dtx, base + c) - m) * r;
		}
	}
	float mg = warp_sum(sg) / (float)C, mgn = warp_sum(sgn) / (float)C;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), w = ld4(gamma, dtg, c), o;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float n = (a.v[k] - m) * r;
				o.v[k] = r * (d.v[k] * w.v[k] - mg - n * mgn);
			}
			st4(dx, dtdx, base + c, o);
			if (dy) {
				u32 wd[4] = {0u, 0u, 0u, 0u};
				if (p != 0.0f) philox_words(wd, (u64)((base + c) / 4), key, offset);
#pragma unroll
				for (int k = 0; k < 4; k++) o.v[k] = branch_grad(round_to(o.v[k], dtdx), k, wd, p, scale);
				st4(dy, dtdy, base + c, o);
			}
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float n = (ld(x, dtx, base + c) - m) * r;
			float o = r * (ld(dout, dtd, base + c) * ld(gamma, dtg, c) - mg - n * mgn);
			st(dx, dtdx, base + c, o);
			if (dy) {
				i64 i = base + c;
				u32 wd[4] = {0u, 0u, 0u, 0u};
				if (p != 0.0f) philox_words(wd, (u64)(i / 4), key, offset);
				st(dy, dtdy, i, branch_grad(round_to(o, dtdx), (int)(i % 4), wd, p, scale));
			}
		}
	}
}

// gelu_grad is gelu_bwd_recompute's dx (elementwise.cu) from dout d, x v and e = erff(v/√2).
__device__ __forceinline__ float gelu_grad(float d, float v, float e) {
	float cdf = 0.5f * (1.0f + e);
	float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
	return d * (cdf + v * pdf);
}

// colsum_finish: block (32, 8), grid ceil(C/32): out[c] += Σ_k partial[k][c] in FP32, rounded to out's
// dtype once. Thread row ty sums the chunks k ≡ ty (mod 8) in increasing k; the eight sums are then added in
// order ty = 0..7 onto the widened out[c] (a fixed order: the same result on every run, with an eighth of
// the sequential loads of a one-thread-per-column loop).
__device__ __forceinline__ void cs_finish_cols(float (*s)[33], void *out, int dto, const float *partial, i64 chunks, int C) {
	int tx = threadIdx.x, ty = threadIdx.y;
	int c = blockIdx.x * 32 + tx;
	float acc = 0.0f;
	if (c < C) {
		i64 k = ty;
		for (; k + 24 < chunks; k += 32) { // four loads in flight, added in the same order
			float q0 = partial[k * C + c], q1 = partial[(k + 8) * C + c], q2 = partial[(k + 16) * C + c],
			      q3 = partial[(k + 24) * C + c];
			acc += q0, acc += q1, acc += q2, acc += q3;
		}
		for (; k < chunks; k += 8) acc += partial[k * C + c];
	}
	s[ty][tx] = acc;
	__syncthreads();
	if (ty == 0 && c < C) {
		float v = ld(out, dto, c);
		for (int j = 0; j < 8; j++) v += s[j][tx];
		st(out, dto, c, v);
	}
}

extern "C" __global__ void colsum_finish(void *out, int dto, const float *partial, i64 chunks, int C) {
	__shared__ float s[8][33];
	cs_finish_cols(s, out, dto, partial, chunks, C);
}

// colsum_finish3: colsum_finish of up to three sums of C columns in one launch, grid (ceil(C/32), 3): blockIdx.y
// picks (out0, partial0), (out1, partial1) or (out2, partial2); a NULL output is skipped. The same operations per
// column as colsum_finish.
extern "C" __global__ void colsum_finish3(void *out0, int dt0, const float *p0, void *out1, int dt1, const float *p1,
                                          void *out2, int dt2, const float *p2, i64 chunks, int C) {
	__shared__ float s[8][33];
	int y = blockIdx.y;
	void *out = y == 0 ? out0 : y == 1 ? out1 : out2;
	if (!out) return;
	cs_finish_cols(s, out, y == 0 ? dt0 : y == 1 ? dt1 : dt2, y == 0 ? p0 : y == 1 ? p1 : p2, chunks, C);
}

// ---- column sums ----
//
// A thread loads CS_U of its rows (CS_U/2 when x is read too) before it computes any of them, so that many
// loads per tensor are in flight: gelu_bwd_colsum's dx may alias dout, so the compiler may not start a row's
// loads before the previous row's stores, and the earlier one-row-at-a-time kernels (four columns per thread,
// 168 registers under NVRTC 11.8) ran at 657 GB/s on the H200. A warp reads 128 or 256 contiguous bytes of a
// row.

#define CS_U 8

// Two consecutive elements as raw bits: F32 in .x and .y, F16/BF16 packed into .x.
__device__ __forceinline__ uint2 ldq2(const void *p, int dt, i64 i) {
	if (dt == DT_F32) return *(const uint2 *)((const float *)p + i);
	return make_uint2(*(const u32 *)((const u16 *)p + i), 0u);
}

__device__ __forceinline__ void unq2(uint2 q, int dt, float *v) {
	if (dt == DT_F32) {
		v[0] = __uint_as_float(q.x), v[1] = __uint_as_float(q.y);
	} else {
		v[0] = half_to_f32((u16)(q.x & 0xffffu), dt), v[1] = half_to_f32((u16)(q.x >> 16), dt);
	}
}

// st2 rounds and writes elements i, i+1 with one access.
__device__ __forceinline__ void st2(void *p, int dt, i64 i, const float *v) {
	if (dt == DT_F32) *(float2 *)((float *)p + i) = make_float2(v[0], v[1]);
	else *(u32 *)((u16 *)p + i) = (u32)f32_to_half(v[0], dt) | ((u32)f32_to_half(v[1], dt) << 16);
}

// cs_finish2 writes the block's partials: sa[ty][col] summed over ty = 0..7 in order from 0.
__device__ __forceinline__ void cs_finish2(float (*sa)[65], const float *a, float *pa, i64 k, int C) {
	int tx = threadIdx.x, ty = threadIdx.y;
	sa[ty][tx * 2] = a[0], sa[ty][tx * 2 + 1] = a[1];
	__syncthreads();
	int t = ty * 32 + tx, c = blockIdx.x * 64 + t;
	if (t < 64 && c < C) {
		float s = 0.0f;
		for (int j = 0; j < 8; j++) s += sa[j][t];
		pa[k * C + c] = s;
	}
}

// cs_last: when count is not NULL, the last block of column tile blockIdx.x to write its partials (of
// gridDim.y chunks) also does colsum_finish's work for the tile's 64 columns of outA (from pa) and outB (from
// pb), with its operations in its order, so the host need not launch colsum_finish; it then resets
// count[blockIdx.x] to 0 for the next launch. Every block fences its partials before it counts itself, and the
// last one reads them from L2 (__ldcg).
__device__ __forceinline__ void cs_last(float (*s)[65], int *count, const float *pa, void *outA, int dtA,
                                        const float *pb, void *outB, int dtB, int C) {
	__shared__ int last;
	if (!count) return;
	__threadfence();
	__syncthreads();
	int tx = threadIdx.x, ty = threadIdx.y;
	if (tx == 0 && ty == 0) last = atomicAdd(&count[blockIdx.x], 1) == (int)gridDim.y - 1;
	__syncthreads();
	if (!last) return;
	i64 chunks = gridDim.y;
	for (int o = 0; o < 2; o++) {
		const float *part = o ? pb : pa;
		void *out = o ? outB : outA;
		int dto = o ? dtB : dtA;
		if (!out) continue;
		for (int h = 0; h < 64; h += 32) {
			int c = blockIdx.x * 64 + h + tx;
			float acc = 0.0f;
			if (c < C) { // colsum_finish's sum
				i64 k = ty;
				for (; k + 24 < chunks; k += 32) {
					float q0 = __ldcg(part + k * C + c), q1 = __ldcg(part + (k + 8) * C + c),
					      q2 = __ldcg(part + (k + 16) * C + c), q3 = __ldcg(part + (k + 24) * C + c);
					acc += q0, acc += q1, acc += q2, acc += q3;
				}
				for (; k < chunks; k += 8) acc += __ldcg(part + k * C + c);
			}
			s[ty][tx] = acc;
			__syncthreads();
			if (ty == 0 && c < C) {
				float v = ld(out, dto, c);
				for (int j = 0; j < 8; j++) v += s[j][tx];
				st(out, dto, c, v);
			}
			__syncthreads();
		}
	}
	if (tx == 0 && ty == 0) count[blockIdx.x] = 0;
}

// colsum_partial: grid (ceil(C/64), chunks), chunk k covering rows [k·rows, (k+1)·rows); vec=1 when C is even
// and dy, x are aligned for two-element accesses. mode 0: pa[k][c] = Σ dy. mode 1: pa[k][c] = Σ dy·(x −
// mean)·rstd, pb[k][c] = Σ dy. mode 2: pa[k][c] = Σ dy·round_to(x·rstd, dtx) (mean unused). With count, the
// finish into outA (and outB) follows in the same launch (cs_last).
__device__ __forceinline__ void colsum2(float (*sa)[65], float (*sb)[65], float *pa, float *pb, const void *dy,
                                        int dtdy, const void *x, int dtx, const float *mean, const float *rstd, i64 N,
                                        int C, i64 rows, int mode, int vec, void *outA, int dtA, void *outB, int dtB,
                                        int *count) {
	int tx = threadIdx.x, ty = threadIdx.y;
	int c0 = blockIdx.x * 64 + tx * 2;
	i64 k = blockIdx.y;
	i64 lo = k * rows, hi = min(N, lo + rows);
	float a[2] = {0.0f, 0.0f}, b[2] = {0.0f, 0.0f};
	if (c0 < C) {
		i64 r = lo + ty;
		if (vec && mode == 0) {
			for (; r + 8 * (CS_U - 1) < hi; r += 8 * CS_U) {
				uint2 q[CS_U];
#pragma unroll
				for (int u = 0; u < CS_U; u++) q[u] = ldq2(dy, dtdy, (r + 8 * u) * C + c0);
#pragma unroll
				for (int u = 0; u < CS_U; u++) {
					float d[2];
					unq2(q[u], dtdy, d);
					a[0] += d[0], a[1] += d[1];
				}
			}
		} else if (vec) {
			for (; r + 8 * (CS_U / 2 - 1) < hi; r += 8 * (CS_U / 2)) {
				uint2 q[CS_U / 2], qx[CS_U / 2];
				float m[CS_U / 2], rs[CS_U / 2];
#pragma unroll
				for (int u = 0; u < CS_U / 2; u++) {
					q[u] = ldq2(dy, dtdy, (r + 8 * u) * C + c0);
					qx[u] = ldq2(x, dtx, (r + 8 * u) * C + c0);
					rs[u] = rstd[r + 8 * u];
					m[u] = mode == 1 ? mean[r + 8 * u] : 0.0f;
				}
#pragma unroll
				for (int u = 0; u < CS_U / 2; u++) {
					float d[2], xv[2];
					unq2(q[u], dtdy, d);
					unq2(qx[u], dtx, xv);
#pragma unroll
					for (int j = 0; j < 2; j++) {
						if (mode == 2) {
							a[j] += d[j] * round_to(xv[j] * rs[u], dtx);
						} else {
							a[j] += d[j] * ((xv[j] - m[u]) * rs[u]);
							b[j] += d[j];
						}
					}
				}
			}
		}
		for (; r < hi; r += 8) { // the rest of the rows one at a time, and every row with vec=0
			i64 base = r * C + c0;
#pragma unroll
			for (int j = 0; j < 2; j++) {
				if (c0 + j >= C) break;
				float d = ld(dy, dtdy, base + j);
				if (mode == 0) {
					a[j] += d;
				} else if (mode == 2) {
					a[j] += d * round_to(ld(x, dtx, base + j) * rstd[r], dtx);
				} else {
					a[j] += d * ((ld(x, dtx, base + j) - mean[r]) * rstd[r]);
					b[j] += d;
				}
			}
		}
	}
	cs_finish2(sa, a, pa, k, C);
	if (mode == 1) {
		__syncthreads();
		cs_finish2(sb, b, pb, k, C);
	}
	cs_last(sa, count, pa, outA, dtA, pb, mode == 1 ? outB : nullptr, dtB, C);
}

// (256, 5): at most 51 registers, five blocks per multiprocessor (the finish's pointers took it from 40 to 64).
extern "C" __global__ void __launch_bounds__(256, 5) colsum_partial(float *pa, float *pb, const void *dy, int dtdy,
                                                                   const void *x, int dtx, const float *mean,
                                                                   const float *rstd, i64 N, int C, i64 rows,
                                                                   int mode, int vec, void *outA, int dtA,
                                                                   void *outB, int dtB, int *count) {
	__shared__ float sa[8][65], sb[8][65];
	if (mode == 0 && dtdy == DT_BF16) // BiasGrad of a BF16 gradient: constant dtype (see gelu_bwd_colsum)
		colsum2(sa, sb, pa, pb, dy, DT_BF16, x, dtx, mean, rstd, N, C, rows, 0, vec, outA, dtA, outB, dtB, count);
	else if (mode == 0 && dtdy == DT_F16)
		colsum2(sa, sb, pa, pb, dy, DT_F16, x, dtx, mean, rstd, N, C, rows, 0, vec, outA, dtA, outB, dtB, count);
	else
		colsum2(sa, sb, pa, pb, dy, dtdy, x, dtx, mean, rstd, N, C, rows, mode, vec, outA, dtA, outB, dtB, count);
}

// colsum_partial4: colsum_partial's mode 0 (BiasGrad's partials, pa[k][c] = Σ dy over chunk k) for a BF16 or F16
// dy with C % 4 == 0 and 8-byte aligned rows, when the host finishes with colsum_finish: grid (ceil(C/128),
// chunks), block (32, 8); a thread owns four consecutive columns (one 8-byte load per row, CS_U rows in flight:
// twice colsum_partial's bytes per load) and adds its rows r ≡ ty (mod 8) in increasing r, the eight thread rows
// then in order ty = 0..7: colsum_partial's operations for every column, so the same partials.
template <int DT>
__device__ __forceinline__ void colsum4(float (*sa)[129], float *pa, const void *dy, i64 N, int C, i64 rows) {
	int tx = threadIdx.x, ty = threadIdx.y;
	int c0 = blockIdx.x * 128 + tx * 4;
	i64 k = blockIdx.y;
	i64 lo = k * rows, hi = min(N, lo + rows);
	float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	const u16 *p = (const u16 *)dy;
	if (c0 < C) {
		i64 r = lo + ty;
		for (; r + 8 * (CS_U - 1) < hi; r += 8 * CS_U) {
			uint2 q[CS_U];
#pragma unroll
			for (int u = 0; u < CS_U; u++) q[u] = *(const uint2 *)(p + (r + 8 * u) * C + c0);
#pragma unroll
			for (int u = 0; u < CS_U; u++) {
				a[0] += half_to_f32((u16)(q[u].x & 0xffffu), DT), a[1] += half_to_f32((u16)(q[u].x >> 16), DT);
				a[2] += half_to_f32((u16)(q[u].y & 0xffffu), DT), a[3] += half_to_f32((u16)(q[u].y >> 16), DT);
			}
		}
		for (; r < hi; r += 8) {
			uint2 q = *(const uint2 *)(p + r * C + c0);
			a[0] += half_to_f32((u16)(q.x & 0xffffu), DT), a[1] += half_to_f32((u16)(q.x >> 16), DT);
			a[2] += half_to_f32((u16)(q.y & 0xffffu), DT), a[3] += half_to_f32((u16)(q.y >> 16), DT);
		}
	}
#pragma unroll
	for (int j = 0; j < 4; j++) sa[ty][tx * 4 + j] = a[j];
	__syncthreads();
	for (int t = ty * 32 + tx; t < 128; t += 256) {
		int c = blockIdx.x * 128 + t;
		if (c < C) {
			float v = 0.0f;
			for (int j = 0; j < 8; j++) v += sa[j][t];
			pa[k * C + c] = v;
		}
	}
}

extern "C" __global__ void __launch_bounds__(256) colsum_partial4(float *pa, const void *dy, int dtdy, i64 N, int C, i64 rows) {
	__shared__ float sa[8][129];
	if (dtdy == DT_BF16) colsum4<DT_BF16>(sa, pa, dy, N, C, rows);
	else colsum4<DT_F16>(sa, pa, dy, N, C, rows);
}

// gelu_el computes one element of gelu_bwd_colsum: the rounded dx (returned) and out's value in *y.
__device__ __forceinline__ float gelu_el(float d, float v, int dtdx, float *y) {
	float e = erff(v * 0.70710678118654752f);
	*y = 0.5f * v * (1.0f + e);
	return round_to(gelu_grad(d, v, e), dtdx);
}

// gelu_bwd_colsum: gelu_bwd_recompute (dx = dout·GELU'(x), out = GELU(x) when out is not NULL) on
// colsum_partial's layout, adding the stored (rounded) dx into partial[k][c] as mode 0 would: grid
// (ceil(C/64), chunks), vec=1 when C is even and every tensor is aligned for two-element accesses. A
// thread reads CS_U of its rows of x and dout, then computes and stores them (dx may alias dout: each
// element is read before it is written, by the one thread that owns it).
__device__ __forceinline__ void gelu_colsum2(float (*sa)[65], float *pa, void *dx, int dtdx, void *out, int dto,
                                             const void *dout, int dtd, const void *x, int dtx, i64 N, int C,
                                             i64 rows, int vec, void *dbias, int dtb, int *count) {
	int tx = threadIdx.x, ty = threadIdx.y;
	int c0 = blockIdx.x * 64 + tx * 2;
	i64 k = blockIdx.y;
	i64 lo = k * rows, hi = min(N, lo + rows);
	float a[2] = {0.0f, 0.0f};
	if (c0 < C) {
		i64 r = lo + ty;
		if (vec) {
			for (; r + 8 * (CS_U - 1) < hi; r += 8 * CS_U) {
				uint2 qx[CS_U], qd[CS_U];
#pragma unroll
				for (int u = 0; u < CS_U; u++) {
					qx[u] = ldq2(x, dtx, (r + 8 * u) * C + c0);
					qd[u] = ldq2(dout, dtd, (r + 8 * u) * C + c0);
				}
#pragma unroll
				for (int u = 0; u < CS_U; u++) {
					float v[2], d[2], g[2], y[2];
					unq2(qx[u], dtx, v);
					unq2(qd[u], dtd, d);
					i64 base = (r + 8 * u) * C + c0;
					if ((dtdx == DT_BF16 || dtdx == DT_F16) && (out == nullptr || dto == dtdx)) { // one packed rounding per pair
						float e[2];
#pragma unroll
						for (int j = 0; j < 2; j++) {
							e[j] = erff(v[j] * 0.70710678118654752f);
							g[j] = gelu_grad(d[j], v[j], e[j]);
							y[j] = 0.5f * v[j] * (1.0f + e[j]);
						}
						u32 qg = dtdx == DT_BF16 ? bf16x2_rn(g[0], g[1]) : f16x2_rn(g[0], g[1]);
						a[0] += half_to_f32((u16)(qg & 0xffffu), dtdx), a[1] += half_to_f32((u16)(qg >> 16), dtdx);
						*(u32 *)((u16 *)dx + base) = qg;
						if (out) *(u32 *)((u16 *)out + base) = dtdx == DT_BF16 ? bf16x2_rn(y[0], y[1]) : f16x2_rn(y[0], y[1]);
						continue;
					}
#pragma unroll
					for (int j = 0; j < 2; j++) {
						g[j] = gelu_el(d[j], v[j], dtdx, &y[j]);
						a[j] += g[j];
					}
					st2(dx, dtdx, base, g);
					if (out) st2(out, dto, base, y);
				}
			}
		}
		for (; r < hi; r += 8) {
			i64 base = r * C + c0;
#pragma unroll
			for (int j = 0; j < 2; j++) {
				if (c0 + j >= C) break;
				float y, g = gelu_el(ld(dout, dtd, base + j), ld(x, dtx, base + j), dtdx, &y);
				st(dx, dtdx, base + j, g);
				if (out) st(out, dto, base + j, y);
				a[j] += g;
			}
		}
	}
	cs_finish2(sa, a, pa, k, C);
	cs_last(sa, count, pa, dbias, dtb, nullptr, nullptr, 0, C);
}

// With every tensor BF16 (BERT's case) or every one F16 the body is instantiated with constant dtypes: the
// per-element dtype switches fold away (r6: the kernel was bound by instructions, not memory, at 1.9 TB/s).
extern "C" __global__ void __launch_bounds__(256) gelu_bwd_colsum(float *pa, void *dx, int dtdx, void *out,
                                                                    int dto, const void *dout, int dtd,
                                                                    const void *x, int dtx, i64 N, int C,
                                                                    i64 rows, int vec, void *dbias, int dtb,
                                                                    int *count) {
	__shared__ float sa[8][65];
	if (dtdx == DT_BF16 && dtd == DT_BF16 && dtx == DT_BF16 && (out == nullptr || dto == DT_BF16))
		gelu_colsum2(sa, pa, dx, DT_BF16, out, DT_BF16, dout, DT_BF16, x, DT_BF16, N, C, rows, vec, dbias, dtb, count);
	else if (dtdx == DT_F16 && dtd == DT_F16 && dtx == DT_F16 && (out == nullptr || dto == DT_F16))
		gelu_colsum2(sa, pa, dx, DT_F16, out, DT_F16, dout, DT_F16, x, DT_F16, N, C, rows, vec, dbias, dtb, count);
	else
		gelu_colsum2(sa, pa, dx, dtdx, out, dto, dout, dtd, x, dtx, N, C, rows, vec, dbias, dtb, count);
}
