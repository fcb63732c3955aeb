// index.cu: embedding lookup and its scatter-add backward, and the (A, B, C, D) → (A, C, B, D) transpose of
// attention heads.
//
// Variants:
// - embedding_fwd: one thread per group of four columns of one output row; with vec=1 (C % 4 == 0, table and
//   out aligned) each group is one vector load and store. The host has already checked every id against
//   [0, V) (the op must fail before writing anything, as tensor/cpu does).
// - embedding_bwd: deterministic, without atomics. The host groups the token rows by id (a stable counting
//   sort: ids ascending, token order inside a group); block u owns unique id uniq[u] and, for each of its
//   columns, adds the group's rows in token order onto the FP32-widened table row and rounds once. For an F32 table that is the
//   same sequence of FP32 additions as tensor/cpu's loop, so the result is bit-identical.
// - transpose12: one thread per group of four elements along D; vec=1 when D % 4 == 0 and both tensors are
//   aligned.
#include "common.cuh"

extern "C" __global__ void embedding_fwd(void *out, int dto, const void *ids, int dti, const void *table, int dtt,
                                         i64 N, int C, int vec) {
	i64 cg = (C + 3) / 4;
	i64 groups = N * cg;
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

// embedding_bwd: grid (nuniq, ceil(C / blockDim.x)); uniq[u] is the id, rows[start[u] .. start[u+1]) its
// token rows in order.
extern "C" __global__ void embedding_bwd(void *dtable, int dtt, const void *dout, int dtd, const int *uniq,
                                         const int *start, const int *rows, int C) {
	int u = blockIdx.x;
	int c = blockIdx.y * blockDim.x + threadIdx.x;
	if (c >= C) return;
	i64 id = uniq[u];
	float acc = ld(dtable, dtt, id * C + c);
	for (int k = start[u]; k < start[u + 1]; k++) acc += ld(dout, dtd, (i64)rows[k] * C + c);
	st(dtable, dtt, id * C + c, acc);
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
