// attention_ref.cu: the general fused attention kernels (tensor.Backend.Attention and AttentionBackward,
// cuda/attention.go), the slow, obvious reference beside the tensor-core kernels of attention_fwd.cu and
// attention_bwd.cu and the fallback for what they do not cover: F32, head sizes other than 64 and 128 (up to
// REF_MAXD), operands not aligned to 16 bytes, GPUs before sm_80.
//
//   attn_fwd_ref       one warp per query row: O and the LSE (a first sweep for the row's max and sum).
//   attn_bwd_dq_ref    one warp per query row: dQ, and Δ_i = Σ_j P_ij·dP_ij for the dK/dV kernel.
//   attn_bwd_dkdv_ref  one warp per key row of a KV head: dK and dV over the group's query heads in order.
//
// FP32 with expf/logf, P' and dS rounded where tensor/cpu rounds them (P normalised first), any float dtype, any
// strides; exact to the contract of attention.cuh's numerics.
#include "attention.cuh"

#define REF_MAXD 256
#define REF_PER (REF_MAXD / 32)

// ref_rnd rounds a product input to the operands' half dtype (identity for F32), as tensor/cpu's reference
// rounds P' and dS.
__device__ __forceinline__ float ref_rnd(float x, int dt) { return dt == DT_F32 ? x : half_to_f32(f32_to_half(x, dt), dt); }

// ref_visible reports whether query i sees key j, and its additive mask value.
__device__ __forceinline__ bool ref_visible(const AttnParams &p, i64 b, i64 i, i64 j, float &mk) {
	if (p.causal && j > i + (p.Tk - p.Tq)) return false;
	if (p.seg && p.seg[b * p.Tq + i] != p.seg[b * p.Tk + j]) return false;
	mk = p.mask ? p.mask[b * p.Tk + j] : 0.0f;
	return mk != NEG_INF;
}

// ref_dot returns Σ_d x[xb + d]·y[yb + d] over the warp's lanes (x held in registers xr).
__device__ __forceinline__ float ref_dot(const float xr[REF_PER], const void *y, int dt, i64 yb, int D, int lane) {
	float s = 0.0f;
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) s += xr[k] * ld(y, dt, yb + d);
	}
	return warp_sum(s);
}

__device__ __forceinline__ void ref_load(float r[REF_PER], const void *x, int dt, i64 base, int D, int lane) {
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		r[k] = d < D ? ld(x, dt, base + d) : 0.0f;
	}
}

// attn_fwd_ref: one warp per query row; a first sweep over the keys finds the row's max and sum (online, FP32,
// expf), the second accumulates O = Σ_j rnd(P_ij·f_ij)·V_j with P normalised first, as tensor/cpu rounds it.
extern "C" __global__ void attn_fwd_ref(const AttnParams p) {
	i64 i = (i64)blockIdx.x * 8 + threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x % 32, dt = (int)p.dtype, D = (int)p.D;
	if (i >= p.Tq) return;
	i64 hk = h / (p.Hq / p.Hkv);
	float q[REF_PER], o[REF_PER];
	ref_load(q, p.q, dt, b * p.qs[0] + h * p.qs[1] + i * p.qs[2], D, lane);
#pragma unroll
	for (int k = 0; k < REF_PER; k++) o[k] = 0.0f;
	float m = NEG_INF, l = 0.0f;
	u32 thr = keep_thr(p.p);
	u64 rowbase = ((u64)(b * p.Hq + h) * (u64)p.Tq + (u64)i) * (u64)p.Tk;
	for (i64 j = 0; j < p.Tk; j++) {
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		float sc = ref_dot(q, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane) * p.scale + mk;
		if (sc == NEG_INF) continue;
		float mn = fmaxf(m, sc);
		l = l * expf(m - mn) + expf(sc - mn);
		m = mn;
	}
	float inv = l == 0.0f ? 0.0f : 1.0f / l; // a NaN score makes l NaN (fmaxf drops it from m): the row is NaN
	for (i64 j = 0; j < p.Tk && l != 0.0f; j++) {
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		float sc = ref_dot(q, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane) * p.scale + mk;
		if (sc == NEG_INF) continue;
		float f = (p.p > 0.0f && !keep1(rowbase + (u64)j, p, thr)) ? 0.0f : p.dscale;
		float pd = ref_rnd(expf(sc - m) * inv * f, dt);
		if (pd == 0.0f) continue;
		i64 vb = b * p.vs[0] + hk * p.vs[1] + j * p.vs[2];
#pragma unroll
		for (int k = 0; k < REF_PER; k++) {
			int d = lane + 32 * k;
			if (d < D) o[k] += pd * ld(p.v, dt, vb + d);
		}
	}
	i64 obase = b * p.os[0] + h * p.os[1] + i * p.os[2];
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) st(p.o, dt, obase + d, o[k]);
	}
	if (lane == 0) p.lse[(b * p.Hq + h) * p.Tq + i] = l == 0.0f ? NEG_INF : m + logf(l);
}

// attn_bwd_dq_ref: one warp per query row: dQ_i = scale·Σ_j dS_ij·K_j.
extern "C" __global__ void attn_bwd_dq_ref(const AttnParams p) {
	i64 i = (i64)blockIdx.x * 8 + threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x % 32, dt = (int)p.dtype, D = (int)p.D;
	if (i >= p.Tq) return;
	i64 hk = h / (p.Hq / p.Hkv), row = (b * p.Hq + h) * p.Tq + i;
	float q[REF_PER], dO[REF_PER], dq[REF_PER];
	ref_load(q, p.q, dt, b * p.qs[0] + h * p.qs[1] + i * p.qs[2], D, lane);
	ref_load(dO, p.dout, dt, b * p.dos[0] + h * p.dos[1] + i * p.dos[2], D, lane);
#pragma unroll
	for (int k = 0; k < REF_PER; k++) dq[k] = 0.0f;
	float lse = p.lse[row], dl = 0.0f;
	u32 thr = keep_thr(p.p);
	u64 rowbase = (u64)row * (u64)p.Tk;
	for (i64 j = 0; j < p.Tk && lse != NEG_INF; j++) { // Δ = Σ_j P_ij·dP_ij
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		float sc = ref_dot(q, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane) * p.scale + mk;
		float dpv = ref_dot(dO, p.v, dt, b * p.vs[0] + hk * p.vs[1] + j * p.vs[2], D, lane);
		if (p.p > 0.0f) dpv = keep1(rowbase + (u64)j, p, thr) ? dpv * p.dscale : 0.0f;
		dl += expf(sc - lse) * dpv;
	}
	if (lane == 0) p.delta[row] = dl;
	for (i64 j = 0; j < p.Tk && lse != NEG_INF; j++) {
		float mk;
		if (!ref_visible(p, b, i, j, mk)) continue;
		i64 kb = b * p.ks[0] + hk * p.ks[1] + j * p.ks[2];
		float sc = ref_dot(q, p.k, dt, kb, D, lane) * p.scale + mk;
		float pr = expf(sc - lse);
		float dpv = ref_dot(dO, p.v, dt, b * p.vs[0] + hk * p.vs[1] + j * p.vs[2], D, lane);
		if (p.p > 0.0f) dpv = keep1(rowbase + (u64)j, p, thr) ? dpv * p.dscale : 0.0f;
		float ds = ref_rnd(pr * (dpv - dl), dt);
#pragma unroll
		for (int k = 0; k < REF_PER; k++) {
			int d = lane + 32 * k;
			if (d < D) dq[k] += ds * ld(p.k, dt, kb + d);
		}
	}
	i64 base = b * p.dqs[0] + h * p.dqs[1] + i * p.dqs[2];
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) st(p.dq, dt, base + d, dq[k] * p.scale);
	}
}

// attn_bwd_dkdv_ref: one warp per key row of one KV head: dV_j = Σ_h Σ_i P'_ij·dO_i, dK_j = scale·Σ_h Σ_i
// dS_ij·Q_i over the group's query heads h in order.
extern "C" __global__ void attn_bwd_dkdv_ref(const AttnParams p) {
	i64 j = (i64)blockIdx.x * 8 + threadIdx.x / 32, hk = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x % 32, dt = (int)p.dtype, D = (int)p.D;
	if (j >= p.Tk) return;
	i64 G = p.Hq / p.Hkv;
	float kr[REF_PER], vr[REF_PER], dk[REF_PER], dv[REF_PER];
	ref_load(kr, p.k, dt, b * p.ks[0] + hk * p.ks[1] + j * p.ks[2], D, lane);
	ref_load(vr, p.v, dt, b * p.vs[0] + hk * p.vs[1] + j * p.vs[2], D, lane);
#pragma unroll
	for (int k = 0; k < REF_PER; k++) dk[k] = dv[k] = 0.0f;
	u32 thr = keep_thr(p.p);
	for (i64 h = hk * G; h < (hk + 1) * G; h++)
		for (i64 i = 0; i < p.Tq; i++) {
			float mk;
			if (!ref_visible(p, b, i, j, mk)) continue;
			i64 row = (b * p.Hq + h) * p.Tq + i;
			float lse = p.lse[row];
			if (lse == NEG_INF) continue;
			i64 qb = b * p.qs[0] + h * p.qs[1] + i * p.qs[2], ob = b * p.dos[0] + h * p.dos[1] + i * p.dos[2];
			float sc = ref_dot(kr, p.q, dt, qb, D, lane) * p.scale + mk;
			float pr = expf(sc - lse), pd = pr;
			float dpv = ref_dot(vr, p.dout, dt, ob, D, lane);
			if (p.p > 0.0f) {
				bool kp = keep1((u64)row * (u64)p.Tk + (u64)j, p, thr);
				pd = pr * (kp ? p.dscale : 0.0f); // as tensor/cpu: a NaN row's dropped P' stays NaN
				dpv = kp ? dpv * p.dscale : 0.0f;
			}
			pd = ref_rnd(pd, dt);
			float ds = ref_rnd(pr * (dpv - p.delta[row]), dt);
#pragma unroll
			for (int k = 0; k < REF_PER; k++) {
				int d = lane + 32 * k;
				if (d < D) {
					dv[k] += pd * ld(p.dout, dt, ob + d);
					dk[k] += ds * ld(p.q, dt, qb + d);
				}
			}
		}
	i64 kb = b * p.dks[0] + hk * p.dks[1] + j * p.dks[2], vb = b * p.dvs[0] + hk * p.dvs[1] + j * p.dvs[2];
#pragma unroll
	for (int k = 0; k < REF_PER; k++) {
		int d = lane + 32 * k;
		if (d < D) {
			st(p.dk, dt, kb + d, dk[k] * p.scale);
			st(p.dv, dt, vb + d, dv[k]);
		}
	}
}
