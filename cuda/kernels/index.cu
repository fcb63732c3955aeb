// index.cu: embedding lookup and its scatter-add backward, and the (A, B, C, D) → (A, C, B, D) transpose of
// attention heads.
//
// Variants:
// - embedding_fwd: one thread per group of four columns of one output row; with vec=1 (C % 4 == 0, table and
//   out aligned) each group is one vector load and store. The host has already checked every id against
//   [0, V) (the op must fail before writing anything, as tensor/cpu does).
// - embedding_bwd_rows / embedding_bwd_merge: deterministic, without atomics. The host groups the token rows
//   by id (a stable counting sort: ids ascending, token order inside a group) and cuts each group into work
//   items of consecutive rows (cuda/index.go, embeddingWork). A block per item adds its rows in token order,
//   four columns per thread (vector loads when vec=1), onto the FP32-widened table row (a group of one item:
//   for an F32 table the same FP32 additions as tensor/cpu's loop, bit-identical) or into an FP32 partial row;
//   a block per split group then adds its partial rows in order onto the table row and rounds once. A group of
//   N rows takes O(√N) sequential steps instead of N (the token-type table's two ids own every row).
// - transpose12: one thread per group of four elements along D; vec=1 when D % 4 == 0 and both tensors are
//   aligned.
#include "common.cuh"

// embedding_fwd: out[n] = table[ids[n]]. With vec=2 (TUNE_CUDA_OPS=v2, cuda/ops.go; C % 4 == 0, aligned) a
// thread loads EMB_U groups (a grid stride apart: their ids, then their table rows) before it stores any, as
// elementwise.cu's vec=2 does; the values are the same.
#define EMB_U 4

extern "C" __global__ void embedding_fwd(void *out, int dto, const void *ids, int dti, const void *table, int dtt,
                                         i64 N, int C, int vec) {
	i64 cg = (C + 3) / 4;
	i64 groups = N * cg;
	if (vec == 2) {
		bool small = groups <= 0x7fffffff; // 32-bit division then
		auto row = [&](i64 g) { return small ? (i64)((u32)g / (u32)cg) : g / cg; };
		i64 stride = (i64)gridDim.x * blockDim.x, g = (i64)blockIdx.x * blockDim.x + threadIdx.x;
		for (; g + (EMB_U - 1) * stride < groups; g += EMB_U * stride) {
			i64 n[EMB_U], id[EMB_U];
			F4 v[EMB_U];
#pragma unroll
			for (int u = 0; u < EMB_U; u++) {
				n[u] = row(g + u * stride);
				id[u] = ldi(ids, dti, n[u]);
			}
#pragma unroll
			for (int u = 0; u < EMB_U; u++) v[u] = ld4(table, dtt, id[u] * C + (g + u * stride - n[u] * cg) * 4);
#pragma unroll
			for (int u = 0; u < EMB_U; u++) st4(out, dto, (g + u * stride) * 4, v[u]);
		}
		for (; g < groups; g += stride) {
			i64 n = row(g);
			st4(out, dto, g * 4, ld4(table, dtt, ldi(ids, dti, n) * C + (g - n * cg) * 4));
		}
		return;
	}
	FOR_GROUPS(g, groups) {
		i64 n = g / cg;
		int c = (int)(g % cg) * 4;
		i64 id = ldi(ids, dti, n);
		if (vec) {
			st4(out, dto, n * C + c, ld4(table, dtt, id * C + c));
		} else {
			for (int j = c; j < C && j < c + 4; j++) st(out, dto, n * C + j, ld(table, dtt, id * C + j));
		}
	}
}

// embedding_bwd_rows: block i owns work item i = (id, lo, hi, slot) of the host's plan (cuda/index.go,
// embeddingWork): for each of its columns it sums dout's rows rows[lo .. hi) in order, starting from the
// widened table row (slot < 0; the result is rounded into the table) or from zero (the result goes to the FP32
// partial row slot).
extern "C" __global__ void embedding_bwd_rows(void *dtable, int dtt, const void *dout, int dtd, float *partial,
                                              const int *items, const int *rows, int C, int vec) {
	const int *it = items + 4 * (i64)blockIdx.x;
	i64 id = it[0];
	int lo = it[1], hi = it[2], slot = it[3];
	for (int c = threadIdx.x * 4; c < C; c += blockDim.x * 4) {
		F4 acc;
		if (vec) {
			if (slot < 0) acc = ld4(dtable, dtt, id * C + c);
			else acc.v[0] = acc.v[1] = acc.v[2] = acc.v[3] = 0.0f;
			for (int k = lo; k < hi; k++) {
				F4 d = ld4(dout, dtd, (i64)rows[k] * C + c);
#pragma unroll
				for (int j = 0; j < 4; j++) acc.v[j] += d.v[j];
			}
			if (slot < 0) st4(dtable, dtt, id * C + c, acc);
			else st4(partial, DT_F32, (i64)slot * C + c, acc);
		} else {
			for (int j = 0; j < 4 && c + j < C; j++) {
				float a = slot < 0 ? ld(dtable, dtt, id * C + c + j) : 0.0f;
				for (int k = lo; k < hi; k++) a += ld(dout, dtd, (i64)rows[k] * C + c + j);
				if (slot < 0) st(dtable, dtt, id * C + c + j, a);
				else partial[(i64)slot * C + c + j] = a;
			}
		}
	}
}

// embedding_bwd_merge: block g owns split group g = (id, first, n): table row id += partial rows first ..
// first+n in order, in FP32, rounded once.
extern "C" __global__ void embedding_bwd_merge(void *dtable, int dtt, const float *partial, const int *merges, int C,
                                               int vec) {
	const int *m = merges + 3 * (i64)blockIdx.x;
	i64 id = m[0];
	int first = m[1], n = m[2];
	for (int c = threadIdx.x * 4; c < C; c += blockDim.x * 4) {
		if (vec) {
			F4 acc = ld4(dtable, dtt, id * C + c);
			for (int s = first; s < first + n; s++) {
				F4 p = ld4(partial, DT_F32, (i64)s * C + c);
#pragma unroll
				for (int j = 0; j < 4; j++) acc.v[j] += p.v[j];
			}
			st4(dtable, dtt, id * C + c, acc);
		} else {
			for (int j = 0; j < 4 && c + j < C; j++) {
				float a = ld(dtable, dtt, id * C + c + j);
				for (int s = first; s < first + n; s++) a += partial[(i64)s * C + c + j];
				st(dtable, dtt, id * C + c + j, a);
			}
		}
	}
}

// transpose12: x (A, B, C, D) → out (A, C, B, D).
extern "C" __global__ void transpose12(void *out, int dto, const void *x, int dtx, i64 A, i64 B, i64 C, i64 D,
                                       int vec) {
	i64 dg = (D + 3) / 4;
	i64 groups = A * C * B * dg;
	FOR_GROUPS(g, groups) {
		i64 d = (g % dg) * 4;
		i64 r = g / dg; // row index of out: ((a·C + c)·B + b)
		i64 b = r % B, c = (r / B) % C, a = r / (B * C);
		i64 src = ((a * B + b) * C + c) * D + d, dst = r * D + d;
		if (vec) {
			st4(out, dto, dst, ld4(x, dtx, src));
		} else {
			for (i64 j = 0; j < 4 && d + j < D; j++) st(out, dto, dst + j, ld(x, dtx, src + j));
		}
	}
}
