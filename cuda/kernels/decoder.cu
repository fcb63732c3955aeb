// decoder.cu: the ops decoder LLMs add to the BERT set — RMSNorm, RoPE and SwiGLU (GELUTanh lives in
// elementwise.cu beside GELU).
//
// Variants:
// - rmsnorm_fwd / rmsnorm_bwd: one warp per row (8 rows per 256-thread block), as layernorm_* in norm.cu;
//   with vec=1 (C % 4 == 0 and every row pointer aligned) a lane moves four elements per access, so a row is
//   read in 128-element sweeps. Statistics in FP32 (Σx² per lane, then a warp sum); rstd = 1/sqrt(mean + eps)
//   evaluated in double and rounded once, as tensor/cpu. transformers' LlamaRMSNorm rounds x·rstd to x's
//   dtype before the weight multiply (round_to), and the backward rounds dout·w to it. The weight gradient is
//   colsum_partial's mode 2 in norm.cu (deterministic, no atomics).
// - residual_rmsnorm_fwd: rmsnorm_fwd with its input formed on the fly, sum = x + y (written once: the
//   residual stream); rmsnorm_bwd_residual is its backward with the residual gradient's add and its half
//   copy in the same pass (the weight gradient is colsum_partial's, as rmsnorm_bwd's).
// - rope: a thread per four rotated pairs (x[i..i+3], x[i+D/2..i+D/2+3]) of one head in a strided (B, H, T, D)
//   operand (one pair without vec); consecutive threads take consecutive groups of a token's heads, so
//   accesses are contiguous within a head (and across heads in a (N, H·D) buffer). A position outside the
//   tables writes NaN into the pair (the host does not read positions, which would synchronize). (A
//   grid-stride thread per pair with 64-bit index arithmetic ran at ~700 GB/s: five 64-bit divisions per
//   pair; a block per token with a thread per pair at ~770 GB/s.)
// - swiglu_fwd / swiglu_bwd: elementwise over groups of four (vec=1: one vector access per tensor), silu in
//   FP32 with expf, the activation rounded to gate's dtype before the multiply as transformers' LlamaMLP.
// Arithmetic follows tensor/cpu's operation order (--fmad=false), so results differ only where expf or the
// summation order does.
#include "common.cuh"

// rms_scale_row writes the warp's row out = w·round_x(x·r) of the row x at base (dtype dtx, the rounding's):
// the second pass of rmsnorm_fwd and residual_rmsnorm_fwd.
__device__ __forceinline__ void rms_scale_row(void *out, int dto, const void *x, int dtx, const void *w, int dtw, float r,
                                              i64 base, int C, int lane, int vec) {
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), g = ld4(w, dtw, c), o;
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = g.v[k] * round_to(a.v[k] * r, dtx);
			st4(out, dto, base + c, o);
		}
	} else {
		for (int c = lane; c < C; c += 32) st(out, dto, base + c, ld(w, dtw, c) * round_to(ld(x, dtx, base + c) * r, dtx));
	}
}

extern "C" __global__ void rmsnorm_fwd(void *out, int dto, float *rstd, const void *x, int dtx, const void *w,
                                       int dtw, i64 N, int C, float eps, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	float s = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) s += a.v[k] * a.v[k];
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float v = ld(x, dtx, base + c);
			s += v * v;
		}
	}
	float ms = warp_sum(s) / (float)C;
	float r = (float)(1.0 / sqrt((double)(ms + eps)));
	rms_scale_row(out, dto, x, dtx, w, dtw, r, base, C, lane, vec);
	if (lane == 0) rstd[row] = r;
}

// residual_rmsnorm_fwd: ResidualRMSNorm, sum = round_s(x + y) stored, then rmsnorm_fwd of sum, in one pass:
// the add's and rmsnorm_fwd's operations in their order, so the bits of the add and rmsnorm_fwd kernels. With
// vec and C ≤ 1024 a lane keeps its (at most eight) groups of four sums in registers; otherwise the second
// sweep reads the row back from sum (the lane's own stores).
extern "C" __global__ void residual_rmsnorm_fwd(void *sum, int dts, void *out, int dto, float *rstd, const void *x,
                                                int dtx, const void *y, int dty, const void *w, int dtw, i64 N, int C,
                                                float eps, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	float s = 0.0f;
	if (vec && C <= 1024) {
		F4 sv[8];
#pragma unroll
		for (int j = 0; j < 8; j++) {
			int c = lane * 4 + j * 128;
			if (c < C) {
				F4 a = ld4(x, dtx, base + c), b = ld4(y, dty, base + c);
#pragma unroll
				for (int k = 0; k < 4; k++) {
					sv[j].v[k] = round_to(a.v[k] + b.v[k], dts);
					s += sv[j].v[k] * sv[j].v[k];
				}
				st4(sum, dts, base + c, sv[j]);
			}
		}
		float r = (float)(1.0 / sqrt((double)(warp_sum(s) / (float)C + eps)));
#pragma unroll
		for (int j = 0; j < 8; j++) {
			int c = lane * 4 + j * 128;
			if (c < C) {
				F4 g = ld4(w, dtw, c), o;
#pragma unroll
				for (int k = 0; k < 4; k++) o.v[k] = g.v[k] * round_to(sv[j].v[k] * r, dts);
				st4(out, dto, base + c, o);
			}
		}
		if (lane == 0) rstd[row] = r;
		return;
	}
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), b = ld4(y, dty, base + c), v;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				v.v[k] = round_to(a.v[k] + b.v[k], dts);
				s += v.v[k] * v.v[k];
			}
			st4(sum, dts, base + c, v);
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float v = round_to(ld(x, dtx, base + c) + ld(y, dty, base + c), dts);
			st(sum, dts, base + c, v);
			s += v * v;
		}
	}
	float r = (float)(1.0 / sqrt((double)(warp_sum(s) / (float)C + eps)));
	rms_scale_row(out, dto, sum, dts, w, dtw, r, base, C, lane, vec);
	if (lane == 0) rstd[row] = r;
}

// rms_bwd_mean returns the warp's mean(g·n̂) over its row at base (g = round_x(dout·w), n̂ = x·rstd), the first
// pass of rmsnorm_bwd and rmsnorm_bwd_residual.
__device__ __forceinline__ float rms_bwd_mean(const void *dout, int dtd, const void *x, int dtx, const void *w, int dtw,
                                              float r, i64 base, int C, int lane, int vec) {
	float s = 0.0f;
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), g = ld4(w, dtw, c);
#pragma unroll
			for (int k = 0; k < 4; k++) s += round_to(d.v[k] * g.v[k], dtx) * (a.v[k] * r);
		}
	} else {
		for (int c = lane; c < C; c += 32)
			s += round_to(ld(dout, dtd, base + c) * ld(w, dtw, c), dtx) * (ld(x, dtx, base + c) * r);
	}
	return warp_sum(s) / (float)C;
}

// rmsnorm_bwd: dx = rstd·(g − n̂·mean(g·n̂)), g = round_x(dout·w), n̂ = x·rstd. dx may alias dout or x: each lane
// reads its elements before it writes them.
extern "C" __global__ void rmsnorm_bwd(void *dx, int dtdx, const void *dout, int dtd, const void *x, int dtx,
                                       const void *w, int dtw, const float *rstd, i64 N, int C, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	float r = rstd[row];
	float m = rms_bwd_mean(dout, dtd, x, dtx, w, dtw, r, base, C, lane, vec);
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), g = ld4(w, dtw, c), o;
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = r * (round_to(d.v[k] * g.v[k], dtx) - (a.v[k] * r) * m);
			st4(dx, dtdx, base + c, o);
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float n = ld(x, dtx, base + c) * r;
			st(dx, dtdx, base + c, r * (round_to(ld(dout, dtd, base + c) * ld(w, dtw, c), dtx) - n * m));
		}
	}
}

// rmsnorm_bwd_residual: rmsnorm_bwd whose dx is added to the residual gradient DX (or stored into it), DX's
// new value also stored in DXHalf's dtype when set: rmsnorm_bwd, axpy and cast of each element in one pass,
// with their operations, so their bits. One warp per row (2048 blocks for 16384 rows). The weight gradient is
// colsum_partial's mode 2, queued before (it reads dout and x, which DX must not alias). (A one-pass version
// that also formed the weight gradient's partials, a block per 256-row chunk with the row in registers, ran
// at 665 GB/s in the SmolLM2 step: 64 blocks of 168-register threads.)
extern "C" __global__ void rmsnorm_bwd_residual(void *dx, int dtdx, void *dxh, int dth, const void *dout, int dtd,
                                                const void *x, int dtx, const void *w, int dtw, const float *rstd, i64 N,
                                                int C, int accumulate, int vec) {
	i64 row = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N) return;
	i64 base = row * C;
	float r = rstd[row];
	float m = rms_bwd_mean(dout, dtd, x, dtx, w, dtw, r, base, C, lane, vec);
	if (vec) {
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), g = ld4(w, dtw, c), o;
			F4 old;
			if (accumulate) old = ld4(dx, dtdx, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float e = round_to(r * (round_to(d.v[k] * g.v[k], dtx) - (a.v[k] * r) * m), dtdx);
				o.v[k] = accumulate ? round_to(old.v[k] + e, dtdx) : e;
			}
			st4(dx, dtdx, base + c, o);
			if (dxh) st4(dxh, dth, base + c, o);
		}
	} else {
		for (int c = lane; c < C; c += 32) {
			float n = ld(x, dtx, base + c) * r;
			float e = round_to(r * (round_to(ld(dout, dtd, base + c) * ld(w, dtw, c), dtx) - n * m), dtdx);
			float o = accumulate ? round_to(ld(dx, dtdx, base + c) + e, dtdx) : e;
			st(dx, dtdx, base + c, o);
			if (dxh) st(dxh, dth, base + c, o);
		}
	}
}

// rmsnorm_bwd_residual_wg: rmsnorm_bwd_residual that also forms the weight gradient's partials from the
// same reads (the default for C ≤ 1024 and vec; TUNE_RMSNORM_BWD=twopass for rmsnorm_bwd_residual): warp w of block k takes row 8k + w, each lane puts
// dout·round_x(x·rstd) of its columns into shared memory, and the block adds its eight rows in order into
// partial[k][c]; colsum_finish then adds the N/8 chunks in its fixed order. Deterministic, but the partials are
// summed in another order than colsum_partial's, so the weight gradient differs from RMSNormBackward's in
// FP32 rounding (dx and its half copy are the same bits).
extern "C" __global__ void rmsnorm_bwd_residual_wg(float *pa, void *dx, int dtdx, void *dxh, int dth, const void *dout,
                                                   int dtd, const void *x, int dtx, const void *w, int dtw,
                                                   const float *rstd, i64 N, int C, int accumulate) {
	__shared__ float sh[8][1024];
	int wp = threadIdx.x / 32, lane = threadIdx.x % 32;
	i64 row = (i64)blockIdx.x * 8 + wp;
	if (row < N) {
		i64 base = row * C;
		float r = rstd[row];
		float s = 0.0f;
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), g = ld4(w, dtw, c);
#pragma unroll
			for (int k = 0; k < 4; k++) s += round_to(d.v[k] * g.v[k], dtx) * (a.v[k] * r);
		}
		float m = warp_sum(s) / (float)C;
		for (int c = lane * 4; c < C; c += 128) {
			F4 a = ld4(x, dtx, base + c), d = ld4(dout, dtd, base + c), g = ld4(w, dtw, c), o;
			F4 old;
			if (accumulate) old = ld4(dx, dtdx, base + c);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float e = round_to(r * (round_to(d.v[k] * g.v[k], dtx) - (a.v[k] * r) * m), dtdx);
				o.v[k] = accumulate ? round_to(old.v[k] + e, dtdx) : e;
				sh[wp][c + k] = d.v[k] * round_to(a.v[k] * r, dtx);
			}
			st4(dx, dtdx, base + c, o);
			if (dxh) st4(dxh, dth, base + c, o);
		}
	} else {
		for (int c = lane; c < C; c += 32) sh[wp][c] = 0.0f;
	}
	if (!pa) return; // uniform across the block
	__syncthreads();
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float t = 0.0f;
		for (int v = 0; v < 8; v++) t += sh[v][c];
		pa[blockIdx.x * (i64)C + c] = t;
	}
}

// rope: pair i of row (b, h, t) at x + b·sb + h·sh + t·stt: x1' = x1·c − x2·s, x2' = x2·c + x1·s with
// c, s = cos, sin[positions[b, t]][i]; inverse negates s (Rᵀ). transformers' apply_rotary_pos_emb with
// rotate_half. A thread per group of w consecutive pairs of one head (w = 4 with vec=1: D/2 and every stride a
// multiple of 4 and the pointers aligned, so x1, x2, cos and sin each move in one vector access; w = 1
// otherwise), the groups of a token's heads consecutive in x (heads are contiguous in an (N, H·D) projection
// buffer, q and k of a packed (N, (Hq+2·Hkv)·D) one), so a warp's accesses are contiguous. The index
// arithmetic is 32-bit (the host checks the group count). (One block per token with a thread per pair ran
// at ~770 GB/s in the SmolLM2 step: 2-byte accesses, 9–12 warps per block.)
extern "C" __global__ void rope(void *x, int dtx, const int *pos, const float *cosv, const float *sinv, int T,
                                int H, int half, i64 sb, i64 sh, i64 stt, int P, int inverse, int ntok, int vec) {
	int w = vec ? 4 : 1;
	int hg = half / w, per = H * hg;
	int gid = blockIdx.x * blockDim.x + threadIdx.x;
	if (gid >= ntok * per) return;
	int tok = gid / per, k = gid - tok * per;
	int h = k / hg, i = (k - h * hg) * w;
	int b = tok / T, t = tok - b * T;
	int p = pos[tok];
	i64 at = (i64)b * sb + (i64)t * stt + (i64)h * sh + i;
	bool bad = p < 0 || p >= P;
	i64 ti = bad ? 0 : (i64)p * half + i;
	if (vec) {
		F4 a = ld4(x, dtx, at), e = ld4(x, dtx, at + half), c = ld4(cosv, DT_F32, ti), s = ld4(sinv, DT_F32, ti), o1, o2;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float sj = inverse ? -s.v[j] : s.v[j];
			o1.v[j] = bad ? __int_as_float(0x7fc00000) : a.v[j] * c.v[j] - e.v[j] * sj;
			o2.v[j] = bad ? __int_as_float(0x7fc00000) : e.v[j] * c.v[j] + a.v[j] * sj;
		}
		st4(x, dtx, at, o1);
		st4(x, dtx, at + half, o2);
		return;
	}
	float o1, o2;
	if (bad) {
		o1 = o2 = __int_as_float(0x7fc00000);
	} else {
		float c = cosv[ti], s = sinv[ti];
		if (inverse) s = -s;
		float a = ld(x, dtx, at), e = ld(x, dtx, at + half);
		o1 = a * c - e * s;
		o2 = e * c + a * s;
	}
	st(x, dtx, at, o1);
	st(x, dtx, at + half, o2);
}

__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

// swiglu_fwd: out = round_to(silu(gate), dtg)·up.
extern "C" __global__ void swiglu_fwd(void *out, int dto, const void *gate, int dtg, const void *up, int dtu, i64 n,
                                      int vec) {
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(gi, groups) {
		i64 i = gi * 4;
		if (vec && i + 4 <= n) {
			F4 g = ld4(gate, dtg, i), u = ld4(up, dtu, i), o;
#pragma unroll
			for (int k = 0; k < 4; k++) o.v[k] = round_to(silu(g.v[k]), dtg) * u.v[k];
			st4(out, dto, i, o);
		} else {
			for (i64 j = i; j < n && j < i + 4; j++) st(out, dto, j, round_to(silu(ld(gate, dtg, j)), dtg) * ld(up, dtu, j));
		}
	}
}

// swiglu_grad computes one element of swiglu_bwd: dgate = round(dout·up)·σ(g)·(1 + g·(1 − σ(g))) (aten's
// silu_backward) and dup = dout·round(silu(g)), the roundings to gate's dtype as PyTorch's autograd.
__device__ __forceinline__ void swiglu_grad(float d, float g, float u, int dtg, float *dg, float *du) {
	float sig = 1.0f / (1.0f + expf(-g));
	*dg = round_to(d * u, dtg) * (sig * (1.0f + g * (1.0f - sig)));
	*du = d * round_to(silu(g), dtg);
}

// swiglu_bwd: dgate and dup from dout and the forward's gate and up (each element read before it is written,
// so dgate may alias gate or dout and dup up or dout).
extern "C" __global__ void swiglu_bwd(void *dgate, int dtdg, void *dup, int dtdu, const void *dout, int dtd,
                                      const void *gate, int dtg, const void *up, int dtu, i64 n, int vec) {
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(gi, groups) {
		i64 i = gi * 4;
		if (vec && i + 4 <= n) {
			F4 d = ld4(dout, dtd, i), g = ld4(gate, dtg, i), u = ld4(up, dtu, i), og, ou;
#pragma unroll
			for (int k = 0; k < 4; k++) swiglu_grad(d.v[k], g.v[k], u.v[k], dtg, &og.v[k], &ou.v[k]);
			st4(dgate, dtdg, i, og);
			st4(dup, dtdu, i, ou);
		} else {
			for (i64 j = i; j < n && j < i + 4; j++) {
				float og, ou;
				swiglu_grad(ld(dout, dtd, j), ld(gate, dtg, j), ld(up, dtu, j), dtg, &og, &ou);
				st(dgate, dtdg, j, og);
				st(dup, dtdu, j, ou);
			}
		}
	}
}

// swiglu_bwd_recompute: swiglu_bwd and swiglu_fwd of the same element in one pass (gate and up read once):
// out = round_to(silu(gate), dtg)·up, the forward's value, for the next weight gradient. Each element is read
// before any of its outputs is written, so out may alias gate or up.
extern "C" __global__ void swiglu_bwd_recompute(void *dgate, int dtdg, void *dup, int dtdu, void *out, int dto,
                                                const void *dout, int dtd, const void *gate, int dtg, const void *up,
                                                int dtu, i64 n, int vec) {
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(gi, groups) {
		i64 i = gi * 4;
		if (vec && i + 4 <= n) {
			F4 d = ld4(dout, dtd, i), g = ld4(gate, dtg, i), u = ld4(up, dtu, i), og, ou, os;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				swiglu_grad(d.v[k], g.v[k], u.v[k], dtg, &og.v[k], &ou.v[k]);
				os.v[k] = round_to(silu(g.v[k]), dtg) * u.v[k];
			}
			st4(dgate, dtdg, i, og);
			st4(dup, dtdu, i, ou);
			st4(out, dto, i, os);
		} else {
			for (i64 j = i; j < n && j < i + 4; j++) {
				float og, ou, g = ld(gate, dtg, j), u = ld(up, dtu, j);
				swiglu_grad(ld(dout, dtd, j), g, u, dtg, &og, &ou);
				float os = round_to(silu(g), dtg) * u;
				st(dgate, dtdg, j, og);
				st(dup, dtdu, j, ou);
				st(out, dto, j, os);
			}
		}
	}
}
