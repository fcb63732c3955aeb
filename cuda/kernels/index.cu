// index.cu: embedding lookup and its scatter-add backward, and the (A, B, C, D) → (A, C, B, D) transpose of
// attention heads.
//
// Variants:
// - embedding_fwd: a block per EMB_U output rows, a thread per group of four columns (vec=1: C % 4 == 0, table
//   and out aligned; one vector load and store) or per column (vec=0). The host has already checked every id
//   against [0, V) (the op must fail before writing anything, as tensor/cpu does).
// - embedding_bwd_rows / embedding_bwd_merge: deterministic, without atomics. The token rows are grouped by id
//   (ids ascending, token order inside a group) and each group is cut into work items of consecutive rows
//   (cuda/index.go, embeddingWork; the plan is built by the emb2_* kernels below, or on the host past
//   embDeviceMaxRows rows). A block per item adds its rows in token order,
//   four columns per thread (vector loads when vec=1), onto the FP32-widened table row (a group of one item:
//   for an F32 table the same FP32 additions as tensor/cpu's loop, bit-identical) or into an FP32 partial row;
//   a block per split group then adds its partial rows in order onto the table row and rounds once. A group of
//   N rows takes O(√N) sequential steps instead of N (the token-type table's two ids own every row).
// - transpose12: one thread per group of four elements along D; vec=1 when D % 4 == 0 and both tensors are
//   aligned.
#include "common.cuh"

// EMB_U is how many rows a block of embedding_fwd gathers: it loads its columns of all of them before it stores
// any (out may alias nothing it reads, but the compiler cannot know: one row at a time left a thread with one
// dependent id → table → out chain in flight).
#define EMB_U 4

// embedding_fwd: block b copies rows b·EMB_U .. b·EMB_U + EMB_U − 1 of out from the table rows their ids name,
// thread t columns 4t, 4t + 4·blockDim, … (vec=1: one vector access per group of four) or t, t + blockDim, …
// (vec=0).
extern "C" __global__ void embedding_fwd(void *out, int dto, const void *ids, int dti, const void *table, int dtt,
                                         i64 N, int C, int vec) {
	i64 r0 = (i64)blockIdx.x * EMB_U;
	i64 id[EMB_U];
#pragma unroll
	for (int u = 0; u < EMB_U; u++) id[u] = r0 + u < N ? ldi(ids, dti, r0 + u) : -1;
	if (vec) {
		for (int c = threadIdx.x * 4; c < C; c += blockDim.x * 4) {
			F4 q[EMB_U];
#pragma unroll
			for (int u = 0; u < EMB_U; u++)
				if (id[u] >= 0) q[u] = ld4(table, dtt, id[u] * C + c);
#pragma unroll
			for (int u = 0; u < EMB_U; u++)
				if (id[u] >= 0) st4(out, dto, (r0 + u) * C + c, q[u]);
		}
	} else {
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float q[EMB_U];
#pragma unroll
			for (int u = 0; u < EMB_U; u++)
				if (id[u] >= 0) q[u] = ld(table, dtt, id[u] * C + c);
#pragma unroll
			for (int u = 0; u < EMB_U; u++)
				if (id[u] >= 0) st(out, dto, (r0 + u) * C + c, q[u]);
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

// ---- EmbeddingBackward's plan built on the device (cuda/index.go) ----
//
// The same plan as the host's embeddingWork (ids ascending, token order inside a group, groups of more than 32
// rows cut into chunks of max(32, ⌈√n⌉) rows, the same partial slots), so embedding_bwd_rows/merge give the
// same bits as with the host's plan, with no host work and no upload (a CUDA graph can hold it):
//   emb2_hist        cnt[id] = rows of id (integer atomics: the counts do not depend on their order)
//   emb2_scan        one block: exclusive scans over the ids of rows, items, slots and merges; the list of
//                    split ids (ascending); the totals into tot (items, merges, slots)
//   emb2_place       each token of a group of ≤ EMB_MID rows into its group (atomic order) …
//   emb2_sort_small  … then a warp per group of ≤ 32 rows sorts its token numbers ascending (token order)
//   emb2_sort_mid    … and a block per larger such group ranks them in shared memory
//   emb2_compact     a block per group of more than EMB_MID rows scans all tokens in order and writes the
//                    group's token numbers ascending (a stream compaction: stable by construction)
//   emb2_items       the work items and merges of every id, at its scanned offsets
// then embedding_bwd_rows / embedding_bwd_merge loop over the device counts.

// emb_work returns a group's (rows, items, slots, merges) for n rows (cuda/index.go's embeddingItems).
__device__ __forceinline__ int4 emb_work(int n) {
	if (n == 0) return make_int4(0, 0, 0, 0);
	if (n <= 32) return make_int4(n, 1, 0, 0);
	int k = max(32, (int)ceil(sqrt((double)n)));
	int m = (n + k - 1) / k;
	return make_int4(n, m, m, 1);
}

__device__ __forceinline__ int4 add4(int4 a, int4 b) { return make_int4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

// emb2_hist and emb2_place go over the ids a warp of 32 consecutive tokens at a time (the loop is uniform
// across the warp) and aggregate each warp's equal ids (__match_any_sync): one atomic per distinct id a warp,
// not per token. The token-type table's one id owned every one of 32768 tokens: 32768 atomics on one counter
// (and as many on its fill) became 1024. A count is a sum and emb2_place's order within a group is undone by
// the sorts below, so the plan is the same.
extern "C" __global__ void emb2_hist(int *cnt, const void *ids, int dti, i64 N) {
	int lane = threadIdx.x & 31;
	i64 stride = (i64)gridDim.x * blockDim.x;
	for (i64 w = (i64)blockIdx.x * blockDim.x + (threadIdx.x & ~31); w < N; w += stride) {
		i64 i = w + lane;
		i64 id = i < N ? ldi(ids, dti, i) : -1;
		unsigned same = __match_any_sync(0xffffffffu, id);
		if (id >= 0 && lane == __ffs(same) - 1) atomicAdd(&cnt[id], __popc(same));
	}
}

// int4_shfl_up is __shfl_up_sync of each component.
__device__ __forceinline__ int4 int4_shfl_up(int4 v, int d) {
	return make_int4(__shfl_up_sync(0xffffffffu, v.x, d), __shfl_up_sync(0xffffffffu, v.y, d),
	                 __shfl_up_sync(0xffffffffu, v.z, d), __shfl_up_sync(0xffffffffu, v.w, d));
}

// emb2_scan: one block of 1024 threads walks the ids in tiles of 1024, thread t taking id tile + t (coalesced
// loads and stores; a thread that owned a contiguous range of ids made every warp access 32 cache lines, about
// 90 µs for the word table's 30522 ids): exclusive scans of the rows, items, slots and merges of emb_work, by
// warp shuffles and one pass over the 32 warp totals, carried from tile to tile. A sum of integers, so the
// offsets do not depend on the order it is formed in.
extern "C" __global__ void emb2_scan(const int *cnt, int *start, int *itemOff, int *slotOff, int *mergeOff, int *big,
                                     int *tot, int V) {
	__shared__ int4 wsum[32], tsum;
	int t = threadIdx.x, lane = t & 31, w = t >> 5;
	int4 carry = make_int4(0, 0, 0, 0);
	for (int base = 0; base < V; base += 1024) {
		int id = base + t;
		int4 x = id < V ? emb_work(cnt[id]) : make_int4(0, 0, 0, 0), inc = x;
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			int4 y = int4_shfl_up(inc, d);
			if (lane >= d) inc = add4(inc, y);
		}
		if (lane == 31) wsum[w] = inc;
		__syncthreads();
		if (w == 0) { // exclusive scan of the warp totals
			int4 v = wsum[lane], vi = v;
#pragma unroll
			for (int d = 1; d < 32; d <<= 1) {
				int4 y = int4_shfl_up(vi, d);
				if (lane >= d) vi = add4(vi, y);
			}
			wsum[lane] = make_int4(vi.x - v.x, vi.y - v.y, vi.z - v.z, vi.w - v.w);
			if (lane == 31) tsum = vi; // the tile's total
		}
		__syncthreads();
		int4 tileTotal = tsum, pre = wsum[w];
		int4 e = add4(carry, add4(pre, make_int4(inc.x - x.x, inc.y - x.y, inc.z - x.z, inc.w - x.w)));
		if (id < V) {
			start[id] = e.x, itemOff[id] = e.y, slotOff[id] = e.z, mergeOff[id] = e.w;
			if (x.w) big[e.w] = id;
		}
		__syncthreads();
		carry = add4(carry, tileTotal);
	}
	if (t == 0) {
		start[V] = carry.x;
		tot[0] = carry.y, tot[1] = carry.w, tot[2] = carry.z;
	}
}

// EMB_MID is the largest group whose token numbers emb2_place scatters and a sort restores to token order
// (emb2_sort_small up to 32 rows, emb2_sort_mid above); larger groups are written in order by emb2_compact.
#define EMB_MID 1024

extern "C" __global__ void emb2_place(int *rows, int *fill, const int *cnt, const int *start, const void *ids, int dti,
                                      i64 N) {
	int lane = threadIdx.x & 31;
	i64 stride = (i64)gridDim.x * blockDim.x;
	for (i64 w = (i64)blockIdx.x * blockDim.x + (threadIdx.x & ~31); w < N; w += stride) {
		i64 i = w + lane;
		i64 id = i < N ? ldi(ids, dti, i) : -1;
		unsigned same = __match_any_sync(0xffffffffu, id);
		int lead = __ffs(same) - 1, off = 0;
		bool mid = id >= 0 && cnt[id] <= EMB_MID;
		if (mid && lane == lead) off = atomicAdd(&fill[id], __popc(same));
		off = __shfl_sync(0xffffffffu, off, lead);
		if (mid) rows[start[id] + off + __popc(same & ((1u << lane) - 1u))] = (int)i;
	}
}

// emb2_sort_mid: block b takes split ids big[b], big[b + grid], … of 33..EMB_MID rows: it loads the group's
// token numbers (distinct) into shared memory, ranks each against all of them and stores them ascending.
extern "C" __global__ void emb2_sort_mid(int *rows, const int *cnt, const int *start, const int *big, const int *tot) {
	__shared__ int sh[EMB_MID];
	int nb = tot[1];
	for (int b = blockIdx.x; b < nb; b += gridDim.x) {
		int id = big[b], n = cnt[id];
		if (n > EMB_MID) continue; // uniform over the block
		int s = start[id];
		for (int i = threadIdx.x; i < n; i += blockDim.x) sh[i] = rows[s + i];
		__syncthreads();
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
			int v = sh[i], rank = 0;
			for (int j = 0; j < n; j++) rank += sh[j] < v ? 1 : 0;
			rows[s + rank] = v;
		}
		__syncthreads();
	}
}

// emb2_sort_small: a warp per id with 2..32 rows ranks its token numbers (distinct) and stores them ascending.
extern "C" __global__ void emb2_sort_small(int *rows, const int *cnt, const int *start, int V) {
	int lane = threadIdx.x & 31;
	int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = (gridDim.x * blockDim.x) >> 5;
	for (int id = warp; id < V; id += nw) {
		int n = cnt[id];
		if (n <= 1 || n > 32) continue;
		int s = start[id];
		int v = lane < n ? rows[s + lane] : 0x7fffffff;
		int rank = 0;
		for (int j = 0; j < 32; j++) rank += __shfl_sync(0xffffffffu, v, j) < v ? 1 : 0;
		__syncwarp();
		if (lane < n) rows[s + rank] = v;
		__syncwarp();
	}
}

// emb2_compact: block b handles split ids big[b], big[b + grid], … of more than EMB_MID rows: it walks the
// tokens in order, EMB_CT per thread per step, and writes those with that id at start[id] + (their number
// among them so far). (A block per id reading every token was most of the position table's backward at
// 64×512: 512 ids of 64 rows.)
#define EMB_CT 4
extern "C" __global__ void emb2_compact(int *rows, const int *start, const int *big, const int *tot, const void *ids,
                                        int dti, i64 N, const int *cnt) {
	__shared__ int wsum[EMB_CT][32];
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
	int nb = tot[1];
	for (int b = blockIdx.x; b < nb; b += gridDim.x) {
		i64 id = big[b];
		if (cnt[id] <= EMB_MID) continue; // placed by emb2_place, ordered by emb2_sort_mid
		int base = start[id];
		for (i64 t0 = 0; t0 < N; t0 += (i64)EMB_CT * blockDim.x) {
			bool p[EMB_CT];
#pragma unroll
			for (int q = 0; q < EMB_CT; q++) {
				i64 i = t0 + (i64)q * blockDim.x + threadIdx.x;
				p[q] = i < N && ldi(ids, dti, i) == id;
			}
			unsigned bal[EMB_CT];
#pragma unroll
			for (int q = 0; q < EMB_CT; q++) {
				bal[q] = __ballot_sync(0xffffffffu, p[q]);
				if (lane == 0) wsum[q][w] = __popc(bal[q]);
			}
			__syncthreads();
#pragma unroll
			for (int q = 0; q < EMB_CT; q++) {
				int off = 0, all = 0;
				for (int j = 0; j < nwarps; j++) {
					int c = wsum[q][j];
					off += j < w ? c : 0;
					all += c;
				}
				if (p[q]) rows[base + off + __popc(bal[q] & ((1u << lane) - 1u))] = (int)(t0 + (i64)q * blockDim.x + threadIdx.x);
				base += all;
			}
			__syncthreads();
		}
	}
}

extern "C" __global__ void emb2_items(int *items, int *merges, const int *cnt, const int *start, const int *itemOff,
                                      const int *slotOff, const int *mergeOff, int V) {
	for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < V; id += gridDim.x * blockDim.x) {
		int n = cnt[id];
		if (n == 0) continue;
		int lo = start[id], it = itemOff[id];
		if (n <= 32) {
			items[4 * it] = id, items[4 * it + 1] = lo, items[4 * it + 2] = lo + n, items[4 * it + 3] = -1;
			continue;
		}
		int k = max(32, (int)ceil(sqrt((double)n)));
		int s0 = slotOff[id], j = 0;
		for (int a = lo; a < lo + n; a += k, j++) {
			int *q = items + 4 * (i64)(it + j);
			q[0] = id, q[1] = a, q[2] = min(a + k, lo + n), q[3] = s0 + j;
		}
		int *m = merges + 3 * (i64)mergeOff[id];
		m[0] = id, m[1] = s0, m[2] = j;
	}
}

// EMB_K is how many of an item's rows (or a merge's partial rows) a thread loads before it adds them, in order.
#define EMB_K 4

// embedding_bwd_rows: for work items b = blockIdx.x, + gridDim.x, … below *count, item b = (id, lo, hi, slot)
// of the plan (cuda/index.go, embeddingWork; built on the host or by emb2_*): for each of its columns it sums
// dout's rows rows[lo .. hi) in order, starting from the widened table row (slot < 0; the result is rounded
// into the table) or from zero (the result goes to the FP32 partial row slot). EMB_K rows are loaded before
// they are added (a group of 128 rows, the token-type table's, was a chain of 128 dependent loads).
extern "C" __global__ void embedding_bwd_rows(void *dtable, int dtt, const void *dout, int dtd, float *partial,
                                              const int *items, const int *rows, int C, int vec, const int *count) {
	int n = *count;
	for (int b = blockIdx.x; b < n; b += gridDim.x) {
		const int *it = items + 4 * (i64)b;
		i64 id = it[0];
		int lo = it[1], hi = it[2], slot = it[3];
		for (int c = threadIdx.x * 4; c < C; c += blockDim.x * 4) {
			if (vec) {
				F4 acc;
				if (slot < 0) acc = ld4(dtable, dtt, id * C + c);
				else acc.v[0] = acc.v[1] = acc.v[2] = acc.v[3] = 0.0f;
				int k = lo;
				for (; k + EMB_K <= hi; k += EMB_K) {
					F4 d[EMB_K];
#pragma unroll
					for (int u = 0; u < EMB_K; u++) d[u] = ld4(dout, dtd, (i64)rows[k + u] * C + c);
#pragma unroll
					for (int u = 0; u < EMB_K; u++)
#pragma unroll
						for (int j = 0; j < 4; j++) acc.v[j] += d[u].v[j];
				}
				for (; k < hi; k++) {
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
}

// embedding_bwd_merge: for split groups b = blockIdx.x, + gridDim.x, … below *count, group b = (id, first,
// n): table row id += partial rows first .. first+n in order, in FP32, rounded once.
extern "C" __global__ void embedding_bwd_merge(void *dtable, int dtt, const float *partial, const int *merges, int C,
                                               int vec, const int *count) {
	int n = *count;
	for (int b = blockIdx.x; b < n; b += gridDim.x) {
		const int *m = merges + 3 * (i64)b;
		i64 id = m[0];
		int first = m[1], ns = m[2];
		for (int c = threadIdx.x * 4; c < C; c += blockDim.x * 4) {
			if (vec) {
				F4 acc = ld4(dtable, dtt, id * C + c);
				int s = first;
				for (; s + EMB_K <= first + ns; s += EMB_K) {
					F4 p[EMB_K];
#pragma unroll
					for (int u = 0; u < EMB_K; u++) p[u] = ld4(partial, DT_F32, (i64)(s + u) * C + c);
#pragma unroll
					for (int u = 0; u < EMB_K; u++)
#pragma unroll
						for (int j = 0; j < 4; j++) acc.v[j] += p[u].v[j];
				}
				for (; s < first + ns; s++) {
					F4 p = ld4(partial, DT_F32, (i64)s * C + c);
#pragma unroll
					for (int j = 0; j < 4; j++) acc.v[j] += p.v[j];
				}
				st4(dtable, dtt, id * C + c, acc);
			} else {
				for (int j = 0; j < 4 && c + j < C; j++) {
					float a = ld(dtable, dtt, id * C + c + j);
					for (int s = first; s < first + ns; s++) a += partial[(i64)s * C + c + j];
					st(dtable, dtt, id * C + c + j, a);
				}
			}
		}
	}
}
