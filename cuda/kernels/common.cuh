// common.cuh: helpers shared by every kernel file of package cuda (it is passed to NVRTC as a header, not
// compiled on its own).
//
// - Element types are run-time arguments (the DT_* codes equal tensor.DType's values), so one kernel serves
//   every F32/F16/BF16 combination of its arguments; the switch is uniform across a warp and costs a few
//   instructions per element in kernels that are bound by memory traffic.
// - Loads widen exactly to FP32; stores round to nearest even exactly as the Go side does
//   (tensor.F32ToF16 via x448/float16, tensor.F32ToBF16 as c10::BFloat16), NaN payloads included, so a
//   value stored here has the same bits as the CPU reference would store.
// - The ld4/st4 pairs move four consecutive elements with one 16-byte (F32) or 8-byte (F16/BF16) access; the
//   host passes vec=1 only when every pointer involved is aligned for it.
// - Kernels are compiled with --fmad=false: a·b+c is not contracted into an FMA, so elementwise results match
//   the CPU reference bit for bit; reductions still differ from it in summation order.
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I32 4
#define DT_I64 5

__device__ __forceinline__ float f16_to_f32(u16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

// f32_to_f16 rounds to nearest even; Inf stays Inf and a NaN keeps its top payload bits with the quiet bit
// set (x448/float16's rule), finite values use the hardware conversion (also RNE, overflow to Inf).
__device__ __forceinline__ u16 f32_to_f16(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7f800000u) == 0x7f800000u) {
		u32 coef = u & 0x007fffffu;
		return (u16)(((u & 0x80000000u) >> 16) | 0x7c00u | (coef ? 0x0200u : 0u) | (coef >> 13));
	}
	u16 h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}

__device__ __forceinline__ float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }

// f32_to_bf16: c10::BFloat16 round_to_nearest_even; any NaN becomes 0x7FC0.
__device__ __forceinline__ u16 f32_to_bf16(float f) {
	if (f != f) return 0x7FC0;
	u32 u = __float_as_uint(f);
	return (u16)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float half_to_f32(u16 h, int dt) { return dt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h); }
__device__ __forceinline__ u16 f32_to_half(float f, int dt) { return dt == DT_F16 ? f32_to_f16(f) : f32_to_bf16(f); }

// bf16x2_rn packs f32_to_bf16(lo) | f32_to_bf16(hi) << 16 with one hardware conversion (cvt.rn.bf16x2.f32,
// sm_80+: round to nearest even, subnormals kept, overflow to Inf), which gives f32_to_bf16's bits for every
// value but NaN; a NaN gets f32_to_bf16's 0x7FC0 (the hardware writes 0x7FFF). f32_to_bf16's integer rounding
// costs about seven instructions a value, a large part of the BF16 GELU kernels' instruction budget
// (TestBF16PackMatchesHost checks the equality on every sign, exponent and leading mantissa bits with the
// rounding-boundary low halves).
__device__ __forceinline__ u32 bf16x2_rn(float lo, float hi) {
	u32 r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	if (__builtin_expect(lo != lo || hi != hi, 0)) { // one unordered test per pair; the fix-ups are rare
		if (lo != lo) r = (r & 0xffff0000u) | 0x7FC0u;
		if (hi != hi) r = (r & 0x0000ffffu) | 0x7FC00000u;
	}
	return r;
}

// f16x2_rn packs f32_to_f16(lo) | f32_to_f16(hi) << 16 with one hardware conversion (cvt.rn.f16x2.f32,
// sm_80+: round to nearest even, overflow and Inf to Inf — what f32_to_f16's hardware path gives one value at a
// time); a NaN takes f32_to_f16's payload rule (TestF16PackMatchesHost checks it against tensor.F32ToF16).
__device__ __forceinline__ u32 f16x2_rn(float lo, float hi) {
	u32 r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	if (__builtin_expect(lo != lo || hi != hi, 0)) { // one unordered test per pair, as bf16x2_rn
		if (lo != lo) r = (r & 0xffff0000u) | (u32)f32_to_f16(lo);
		if (hi != hi) r = (r & 0x0000ffffu) | ((u32)f32_to_f16(hi) << 16);
	}
	return r;
}

// round_to rounds an FP32 value to dt and widens it back (the identity for F32): a value "held in dt".
__device__ __forceinline__ float round_to(float v, int dt) {
	return dt == DT_F32 ? v : half_to_f32(f32_to_half(v, dt), dt);
}

// ld reads element i of a float tensor of type dt as FP32.
__device__ __forceinline__ float ld(const void *p, int dt, i64 i) {
	if (dt == DT_F32) return ((const float *)p)[i];
	return half_to_f32(((const u16 *)p)[i], dt);
}

// st rounds v to dt and writes it as element i.
__device__ __forceinline__ void st(void *p, int dt, i64 i, float v) {
	if (dt == DT_F32) ((float *)p)[i] = v;
	else ((u16 *)p)[i] = f32_to_half(v, dt);
}

// ldi reads element i of an I32 or I64 index tensor.
__device__ __forceinline__ i64 ldi(const void *p, int dt, i64 i) {
	return dt == DT_I32 ? (i64)((const int *)p)[i] : ((const i64 *)p)[i];
}

struct F4 {
	float v[4];
};

// ld4 reads elements i..i+3 (i a multiple of 4, the pointer aligned) with one vector access.
__device__ __forceinline__ F4 ld4(const void *p, int dt, i64 i) {
	F4 r;
	if (dt == DT_F32) {
		float4 q = *(const float4 *)((const float *)p + i);
		r.v[0] = q.x, r.v[1] = q.y, r.v[2] = q.z, r.v[3] = q.w;
	} else {
		uint2 q = *(const uint2 *)((const u16 *)p + i);
		r.v[0] = half_to_f32((u16)(q.x & 0xffffu), dt);
		r.v[1] = half_to_f32((u16)(q.x >> 16), dt);
		r.v[2] = half_to_f32((u16)(q.y & 0xffffu), dt);
		r.v[3] = half_to_f32((u16)(q.y >> 16), dt);
	}
	return r;
}

// st4 rounds and writes elements i..i+3 with one vector access.
__device__ __forceinline__ void st4(void *p, int dt, i64 i, F4 r) {
	if (dt == DT_F32) {
		*(float4 *)((float *)p + i) = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
	} else {
		uint2 q;
		q.x = (u32)f32_to_half(r.v[0], dt) | ((u32)f32_to_half(r.v[1], dt) << 16);
		q.y = (u32)f32_to_half(r.v[2], dt) | ((u32)f32_to_half(r.v[3], dt) << 16);
		*(uint2 *)((u16 *)p + i) = q;
	}
}

// Grid-stride loop over groups of four elements.
#define FOR_GROUPS(g, groups) \
	for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < (groups); g += (i64)gridDim.x * blockDim.x)

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// maxnan is max that propagates NaN (as Go's max), unlike fmaxf.
__device__ __forceinline__ float maxnan(float a, float b) { return (a > b || a != a) ? a : b; }

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = maxnan(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

#define NEG_INF __int_as_float(0xff800000)

// Philox 4x32-10 (Salmon et al., SC'11; Random123 constants), identical to tensor.Philox4x32.
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k.x += 0x9E3779B9u;
			k.y += 0xBB67AE85u;
		}
		u32 hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
		u32 hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
		c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
	}
	return c;
}

// The dropout draw (tensor.PhiloxUniform): element n of a stream (seed, offset) reads 16-bit slice n % 8 of the
// Philox block at counter offset + n/8 (slice 2k the low half of word k, 2k+1 the high half) and is kept when
// slice·2⁻¹⁶ ≥ p, i.e. slice ≥ ceil(p·2¹⁶) (tensor.PhiloxThreshold; p·2¹⁶ is exact in FP32).
__device__ __forceinline__ uint4 philox_block(u64 ctr, uint2 key) {
	return philox4x32_10(make_uint4((u32)ctr, (u32)(ctr >> 32), 0u, 0u), key);
}
__device__ __forceinline__ u32 philox_thr(float p) { return (u32)ceilf(p * 65536.0f); }
// philox_slice is slice s (0 … 7) of blk.
__device__ __forceinline__ u32 philox_slice(uint4 blk, int s) {
	u32 w = s < 4 ? (s < 2 ? blk.x : blk.y) : (s < 6 ? blk.z : blk.w);
	return (s & 1) ? w >> 16 : w & 0xffffu;
}
// keep_of is 1 when draw w (a slice, as philox_words gives them) keeps its element under probability p, else 0.
__device__ __forceinline__ float keep_of(u32 w, float p) { return (float)w * (1.0f / 65536.0f) >= p ? 1.0f : 0.0f; }

// branch_grad returns the branch gradient of element k of a philox_words group w from its stored dx value v
// (already rounded to dx's dtype): v·keep·scale as the dropout kernel (DropoutBackward of dx), or v itself
// when p == 0 (a cast).
__device__ __forceinline__ float branch_grad(float v, int k, const u32 *w, float p, float scale) {
	if (p == 0.0f) return v;
	return v * keep_of(w[k], p) * scale;
}

// philox_words fills w with the draws of elements 4g … 4g+3 (the dropout mask of a group of four): slices
// 4(g % 2) … 4(g % 2) + 3 of the Philox block at counter offset + g/2.
__device__ __forceinline__ void philox_words(u32 *w, u64 g, uint2 key, u64 offset) {
	uint4 blk = philox_block(offset + (g >> 1), key);
	u32 a = (g & 1) ? blk.z : blk.x, b = (g & 1) ? blk.w : blk.y;
	w[0] = a & 0xffffu, w[1] = a >> 16, w[2] = b & 0xffffu, w[3] = b >> 16;
}
