// elementwise.cu: the elementwise ops of tensor.Backend, one thread per group of four elements.
//
// Variants: every kernel takes its tensors' dtypes as arguments (F32/F16/BF16 in any combination) and a vec
// flag. With vec=1 (dropout, bias_add) or vec=2 (map1/map2, below) the host checked that the tensors start
// 16-byte aligned for F32 or 8-byte aligned for halves, and a group is moved with one vector load/store per
// tensor; the last partial group, and every group with vec=0 (odd offsets of views), goes element by element. Arithmetic is FP32 in the same operation order
// as tensor/cpu, without FMA contraction, so results are bit-identical to the CPU reference except where a
// transcendental function is involved (erff, expf, tanhf differ from Go's float64 math by an ulp or two).
#include "common.cuh"
#include "philox.cuh"

// The kernels built on map1/map2 (and gelu_bwd_recompute) take vec=2 when every tensor is aligned (cuda/ops.go
// ewVec): a thread loads EW_U groups, EW_U grid strides apart, before it computes and stores any of them. Its
// stores may alias its loads (out may be x), so the compiler cannot start the next group's loads before the
// last group's stores; with one group per iteration a thread had 8 bytes in flight and GELU ran at 1.75 TB/s
// on the H200. Each element is computed exactly as element by element (vec=0). The last n % 4 elements go one
// by one in thread 0.
#define EW_U 4

// ldq4 reads four consecutive elements (i a multiple of 4, the pointer aligned) as raw bits: F32 in q,
// F16/BF16 packed into q.x and q.y.
__device__ __forceinline__ uint4 ldq4(const void *p, int dt, i64 i) {
	if (dt == DT_F32) return *(const uint4 *)((const float *)p + i);
	uint2 h = *(const uint2 *)((const u16 *)p + i);
	return make_uint4(h.x, h.y, 0u, 0u);
}

// unq4 widens ldq4's bits to FP32 (ld4's values).
__device__ __forceinline__ F4 unq4(uint4 q, int dt) {
	F4 r;
	if (dt == DT_F32) {
		r.v[0] = __uint_as_float(q.x), r.v[1] = __uint_as_float(q.y);
		r.v[2] = __uint_as_float(q.z), r.v[3] = __uint_as_float(q.w);
	} else {
		r.v[0] = half_to_f32((u16)(q.x & 0xffffu), dt), r.v[1] = half_to_f32((u16)(q.x >> 16), dt);
		r.v[2] = half_to_f32((u16)(q.y & 0xffffu), dt), r.v[3] = half_to_f32((u16)(q.y >> 16), dt);
	}
	return r;
}

// st4h is st4 with BF16 and F16 stores packed by bf16x2_rn and f16x2_rn (dt is a constant in the half
// instantiations).
__device__ __forceinline__ void st4h(void *p, int dt, i64 i, F4 r) {
	if (dt == DT_BF16) *(uint2 *)((u16 *)p + i) = make_uint2(bf16x2_rn(r.v[0], r.v[1]), bf16x2_rn(r.v[2], r.v[3]));
	else if (dt == DT_F16) *(uint2 *)((u16 *)p + i) = make_uint2(f16x2_rn(r.v[0], r.v[1]), f16x2_rn(r.v[2], r.v[3]));
	else st4(p, dt, i, r);
}

// map_ilp runs body(i, F4 a, F4 b) for every full group i (a multiple of 4) with EW_U groups' loads of a
// (and of b when b is not NULL) first, then tail(j) for the last n % 4 elements.
template <class B, class T>
__device__ __forceinline__ void map_ilp(const void *a, int dta, const void *b, int dtb, i64 n, B body, T tail) {
	i64 full = n / 4, stride = (i64)gridDim.x * blockDim.x;
	i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	for (; g + (EW_U - 1) * stride < full; g += EW_U * stride) {
		uint4 qa[EW_U], qb[EW_U];
#pragma unroll
		for (int u = 0; u < EW_U; u++) {
			qa[u] = ldq4(a, dta, (g + u * stride) * 4);
			if (b) qb[u] = ldq4(b, dtb, (g + u * stride) * 4);
		}
#pragma unroll
		for (int u = 0; u < EW_U; u++) body((g + u * stride) * 4, unq4(qa[u], dta), b ? unq4(qb[u], dtb) : F4{});
	}
	for (; g < full; g += stride) body(g * 4, ld4(a, dta, g * 4), b ? ld4(b, dtb, g * 4) : F4{});
	if (blockIdx.x == 0 && threadIdx.x == 0)
		for (i64 j = full * 4; j < n; j++) tail(j);
}

// map1: out = f(x).
template <class F>
__device__ __forceinline__ void map1(void *out, int dto, const void *x, int dtx, i64 n, int vec, F f) {
	if (vec == 2) {
		map_ilp(
		    x, dtx, nullptr, 0, n,
		    [&](i64 i, F4 a, F4) {
			    F4 o;
#pragma unroll
			    for (int k = 0; k < 4; k++) o.v[k] = f(a.v[k]);
			    st4h(out, dto, i, o);
		    },
		    [&](i64 j) { st(out, dto, j, f(ld(x, dtx, j))); });
		return;
	}
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(g, groups) {
		for (i64 j = g * 4; j < n && j < g * 4 + 4; j++) st(out, dto, j, f(ld(x, dtx, j)));
	}
}

// map2: out = f(a, b).
template <class F>
__device__ __forceinline__ void map2(void *out, int dto, const void *a, int dta, const void *b, int dtb, i64 n,
                                     int vec, F f) {
	if (vec == 2) {
		map_ilp(
		    a, dta, b, dtb, n,
		    [&](i64 i, F4 x, F4 y) {
			    F4 o;
#pragma unroll
			    for (int k = 0; k < 4; k++) o.v[k] = f(x.v[k], y.v[k]);
			    st4h(out, dto, i, o);
		    },
		    [&](i64 j) { st(out, dto, j, f(ld(a, dta, j), ld(b, dtb, j))); });
		return;
	}
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(g, groups) {
		for (i64 j = g * 4; j < n && j < g * 4 + 4; j++) st(out, dto, j, f(ld(a, dta, j), ld(b, dtb, j)));
	}
}

// cast: dst = src (rounded to dst's dtype).
extern "C" __global__ void cast(void *dst, int dtd, const void *src, int dts, i64 n, int vec) {
	auto f = [](float v) { return v; };
	if (vec == 2 && dtd == DT_BF16 && dts == DT_F32) map1(dst, DT_BF16, src, DT_F32, n, vec, f); // constant dtypes
	else if (vec == 2 && dtd == DT_F16 && dts == DT_F32) map1(dst, DT_F16, src, DT_F32, n, vec, f);
	else map1(dst, dtd, src, dts, n, vec, f);
}

// scale: x = alpha·x.
extern "C" __global__ void scale(void *x, int dt, i64 n, float alpha, int vec) {
	map1(x, dt, x, dt, n, vec, [=](float v) { return v * alpha; });
}

// add: out = a + b.
extern "C" __global__ void add(void *out, int dto, const void *a, int dta, const void *b, int dtb, i64 n, int vec) {
	map2(out, dto, a, dta, b, dtb, n, vec, [](float x, float y) { return x + y; });
}

// axpy: y += alpha·x.
extern "C" __global__ void axpy(void *y, int dty, const void *x, int dtx, i64 n, float alpha, int vec) {
	map2(y, dty, y, dty, x, dtx, n, vec, [=](float a, float b) { return a + alpha * b; });
}

// gelu_fwd: out = 0.5·x·(1 + erf(x/√2)), exact GELU.
extern "C" __global__ void gelu_fwd(void *out, int dto, const void *x, int dtx, i64 n, int vec) {
	auto f = [](float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); };
	if (vec == 2 && dto == DT_BF16 && dtx == DT_BF16) map1(out, DT_BF16, x, DT_BF16, n, vec, f); // constant dtypes
	else if (vec == 2 && dto == DT_F16 && dtx == DT_F16) map1(out, DT_F16, x, DT_F16, n, vec, f);
	else map1(out, dto, x, dtx, n, vec, f);
}

// gelu_bwd: dx = dout·(Φ(x) + x·φ(x)), φ(x) = exp(−x²/2)/√(2π).
extern "C" __global__ void gelu_bwd(void *dx, int dtdx, const void *dout, int dtd, const void *x, int dtx, i64 n,
                                    int vec) {
	auto f = [](float d, float v) {
		float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
		float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
		return d * (cdf + v * pdf);
	};
	if (vec == 2 && dtdx == DT_BF16 && dtd == DT_BF16 && dtx == DT_BF16) map2(dx, DT_BF16, dout, DT_BF16, x, DT_BF16, n, vec, f);
	else if (vec == 2 && dtdx == DT_F16 && dtd == DT_F16 && dtx == DT_F16) map2(dx, DT_F16, dout, DT_F16, x, DT_F16, n, vec, f);
	else map2(dx, dtdx, dout, dtd, x, dtx, n, vec, f);
}

// gelu_bwd_recompute: dx = dout·(Φ(x) + x·φ(x)) as gelu_bwd and, when out is not NULL, out = gelu_fwd(x)
// with the same operations (one erff per element serves both).
__device__ __forceinline__ void gelu_bwd_recompute_body(void *dx, int dtdx, void *out, int dto, const void *dout,
                                                        int dtd, const void *x, int dtx, i64 n, int vec) {
	if (vec == 2) {
		auto one = [&](float v, float d, float *y) {
			float e = erff(v * 0.70710678118654752f);
			float cdf = 0.5f * (1.0f + e);
			float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
			*y = 0.5f * v * (1.0f + e);
			return d * (cdf + v * pdf);
		};
		map_ilp(
		    x, dtx, dout, dtd, n,
		    [&](i64 i, F4 v, F4 d) {
			    F4 r, y;
#pragma unroll
			    for (int k = 0; k < 4; k++) r.v[k] = one(v.v[k], d.v[k], &y.v[k]);
			    st4h(dx, dtdx, i, r);
			    if (out) st4h(out, dto, i, y);
		    },
		    [&](i64 j) {
			    float y, r = one(ld(x, dtx, j), ld(dout, dtd, j), &y);
			    st(dx, dtdx, j, r);
			    if (out) st(out, dto, j, y);
		    });
		return;
	}
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(g, groups) {
		for (i64 j = g * 4; j < n && j < g * 4 + 4; j++) {
			float v = ld(x, dtx, j), d = ld(dout, dtd, j);
			float e = erff(v * 0.70710678118654752f);
			float cdf = 0.5f * (1.0f + e);
			float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
			st(dx, dtdx, j, d * (cdf + v * pdf));
			if (out) st(out, dto, j, 0.5f * v * (1.0f + e));
		}
	}
}

// With every tensor BF16 (or every one F16), as in mixed-precision training, the body is instantiated with
// constant dtypes (the per-element dtype switches fold away).
extern "C" __global__ void gelu_bwd_recompute(void *dx, int dtdx, void *out, int dto, const void *dout, int dtd,
                                              const void *x, int dtx, i64 n, int vec) {
	bool o = out == nullptr;
	if (vec == 2 && dtdx == DT_BF16 && dtd == DT_BF16 && dtx == DT_BF16 && (o || dto == DT_BF16))
		gelu_bwd_recompute_body(dx, DT_BF16, out, DT_BF16, dout, DT_BF16, x, DT_BF16, n, vec);
	else if (vec == 2 && dtdx == DT_F16 && dtd == DT_F16 && dtx == DT_F16 && (o || dto == DT_F16))
		gelu_bwd_recompute_body(dx, DT_F16, out, DT_F16, dout, DT_F16, x, DT_F16, n, vec);
	else
		gelu_bwd_recompute_body(dx, dtdx, out, dto, dout, dtd, x, dtx, n, vec);
}

// gelu_tanh_fwd: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the tanh approximation (PyTorch gelu with
// approximate='tanh', aten/src/ATen/native/cuda/ActivationGeluKernel.cu; transformers' gelu_new).
extern "C" __global__ void gelu_tanh_fwd(void *out, int dto, const void *x, int dtx, i64 n, int vec) {
	map1(out, dto, x, dtx, n, vec, [](float v) {
		float inner = 0.7978845608028654f * (v + 0.044715f * (v * v * v));
		return 0.5f * v * (1.0f + tanhf(inner));
	});
}

// gelu_tanh_bwd: dx = dout·(0.5·(1 + th) + 0.5·x·(1 − th²)·√(2/π)·(1 + 3·0.044715·x²)), th the forward's tanh.
extern "C" __global__ void gelu_tanh_bwd(void *dx, int dtdx, const void *dout, int dtd, const void *x, int dtx,
                                         i64 n, int vec) {
	map2(dx, dtdx, dout, dtd, x, dtx, n, vec, [](float d, float v) {
		float th = tanhf(0.7978845608028654f * (v + 0.044715f * (v * v * v)));
		float left = 0.5f * (1.0f + th);
		float right = 0.5f * v * (1.0f - th * th) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v);
		return d * (left + right);
	});
}

// tanh_fwd: out = tanh(x).
extern "C" __global__ void tanh_fwd(void *out, int dto, const void *x, int dtx, i64 n, int vec) {
	map1(out, dto, x, dtx, n, vec, [](float v) { return tanhf(v); });
}

// tanh_bwd: dx = dout·(1 − y²).
extern "C" __global__ void tanh_bwd(void *dx, int dtdx, const void *dout, int dtd, const void *y, int dty, i64 n,
                                    int vec) {
	map2(dx, dtdx, dout, dtd, y, dty, n, vec, [](float d, float v) { return d * (1.0f - v * v); });
}

// mse_fwd: losses (F32) = (pred − target)².
extern "C" __global__ void mse_fwd(float *losses, const void *pred, int dtp, const void *target, int dtt, i64 n,
                                   int vec) {
	map2(losses, DT_F32, pred, dtp, target, dtt, n, vec, [](float p, float t) {
		float d = p - t;
		return d * d;
	});
}

// mse_bwd: dpred = scale·2·(pred − target); scale_by, when given, multiplies scale first (the loss scale on
// the device).
extern "C" __global__ void mse_bwd(void *dpred, int dtd, const void *pred, int dtp, const void *target, int dtt,
                                   i64 n, float scale, int vec, const float *scale_by) {
	if (scale_by) scale = __fmul_rn(scale, *scale_by);
	map2(dpred, dtd, pred, dtp, target, dtt, n, vec, [=](float p, float t) { return scale * 2.0f * (p - t); });
}

// dropout: out = x·keep·scale, scale = 1/(1−p) computed by the host in float32, keep drawn for element i as
// tensor.PhiloxKeep(seed, offset, i, p) (common.cuh's philox_words: slice i%8 of the Philox block at counter
// offset + i/8, key = seed's low and high words, mapped to slice·2⁻¹⁶ and kept when ≥ p). Each thread draws
// once per group of four. A dropped NaN stays NaN (0·NaN), as in tensor/cpu.
extern "C" __global__ void dropout(void *out, int dto, const void *x, int dtx, i64 n, float p, float scale,
                                   u64 seed, u64 offset, int vec) {
	i64 groups = (n + 3) / 4;
	uint2 key = make_uint2((u32)seed, (u32)(seed >> 32));
	offset += tune_philox_base; // the step's base (philox.cuh)
	FOR_GROUPS(g, groups) {
		u32 w[4];
		philox_words(w, (u64)g, key, offset);
		i64 i = g * 4;
		if (vec && i + 4 <= n) {
			F4 a = ld4(x, dtx, i), o;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				o.v[k] = a.v[k] * keep_of(w[k], p) * scale;
			}
			st4(out, dto, i, o);
		} else {
			for (int k = 0; k < 4 && i + k < n; k++) {
				st(out, dto, i + k, ld(x, dtx, i + k) * keep_of(w[k], p) * scale);
			}
		}
	}
}

// bias_add: y (rows, C) += bias (C). Each thread handles four consecutive elements of one row; vec requires
// C % 4 == 0 and aligned pointers.
extern "C" __global__ void bias_add(void *y, int dty, const void *bias, int dtb, i64 n, int C, int vec) {
	i64 groups = (n + 3) / 4;
	FOR_GROUPS(g, groups) {
		i64 i = g * 4;
		if (vec && i + 4 <= n) {
			F4 a = ld4(y, dty, i), b = ld4(bias, dtb, i % C);
#pragma unroll
			for (int k = 0; k < 4; k++) a.v[k] = a.v[k] + b.v[k];
			st4(y, dty, i, a);
		} else {
			for (i64 j = i; j < n && j < i + 4; j++) st(y, dty, j, ld(y, dty, j) + ld(bias, dtb, j % C));
		}
	}
}

// mat_cast: a strided batch of M×N matrices, dst[b][i][j] = src[b][i][j] (row strides ldd/lds, batch strides
// sd/ss, in elements). Used by the GEMM when cuBLASLt has no kernel for C's dtype: the product goes through an
// F32 scratch matrix and is rounded into C here.
extern "C" __global__ void mat_cast(void *dst, int dtd, i64 ldd, i64 sd, const void *src, int dts, i64 lds, i64 ss,
                                    i64 M, i64 N, i64 batch) {
	i64 total = M * N * batch;
	for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (i64)gridDim.x * blockDim.x) {
		i64 j = e % N, i = (e / N) % M, b = e / (M * N);
		st(dst, dtd, b * sd + i * ldd + j, ld(src, dts, b * ss + i * lds + j));
	}
}

// mat_bias: a strided batch of M×N matrices, c = (scale_c ? beta·c : c) + bias[j] (bias may be NULL). With
// scale_c and beta == 0, c is not read (it may hold NaN), as in BLAS. Used for the GEMM's bias when cuBLASLt's
// BIAS epilogue does not apply, and for K == 0.
extern "C" __global__ void mat_bias(void *c, int dtc, i64 ldc, i64 sc, i64 M, i64 N, i64 batch, const void *bias,
                                    int dtb, float beta, int scale_c) {
	i64 total = M * N * batch;
	for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (i64)gridDim.x * blockDim.x) {
		i64 j = e % N, i = (e / N) % M, b = e / (M * N);
		i64 k = b * sc + i * ldc + j;
		float v;
		if (scale_c) v = beta == 0.0f ? 0.0f : beta * ld(c, dtc, k);
		else v = ld(c, dtc, k);
		if (bias) v = v + ld(bias, dtb, j);
		st(c, dtc, k, v);
	}
}

// mat_diff compares two dense arrays x and y of n elements of one dtype, for the GEMM algorithm survey
// (gemmsurvey.go): out[0] = bits of max |x − y| (as float), out[1] = elements whose bits differ, out[2] = bits of
// max |y|, out[3] = non-finite elements of x. Non-negative floats order as their bit patterns do, so atomicMax
// on the bits is a float maximum. out must be zeroed first.
extern "C" __global__ void mat_diff(unsigned *out, const void *x, const void *y, int dt, i64 n) {
	float dmax = 0.0f, ymax = 0.0f;
	unsigned differ = 0, bad = 0;
	for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
		bool same = dt == DT_F32 ? ((const unsigned *)x)[e] == ((const unsigned *)y)[e]
		                         : ((const u16 *)x)[e] == ((const u16 *)y)[e];
		float a = ld(x, dt, e), b = ld(y, dt, e);
		if (!same) differ++;
		if (!isfinite(a)) bad++;
		else dmax = fmaxf(dmax, fabsf(a - b));
		ymax = fmaxf(ymax, fabsf(b));
	}
	if (differ) atomicAdd(&out[1], differ);
	if (bad) atomicAdd(&out[3], bad);
	if (dmax > 0.0f) atomicMax(&out[0], __float_as_uint(dmax));
	if (ymax > 0.0f) atomicMax(&out[2], __float_as_uint(ymax));
}
