package dist

import (
	"reflect"
	"testing"
)

func TestBucketsLikeDDP(t *testing.T) {
	const mib = 1 << 20
	// Forward order: embeddings (large), then 4 layers of 4 MiB, then a small head.
	ps := []Param{{30 * mib, "F32"}, {4 * mib, "F32"}, {4 * mib, "F32"}, {4 * mib, "F32"}, {4 * mib, "F32"}, {mib / 4, "F32"}}
	got := Buckets(ps, FirstBucketBytes, 10*mib)
	// Reverse walk: head (0.25) + layer 4 (4) ≥ 1 MiB closes the first bucket; then layers 3, 2, 1 (12 ≥ 10);
	// then the embeddings alone.
	want := [][]int{{5, 4}, {3, 2, 1}, {0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Buckets = %v, want %v", got, want)
	}
	// Dtypes never share a bucket; an unfilled bucket is closed at the end, in the order it was opened.
	mixed := []Param{{mib, "F32"}, {mib, "BF16"}, {mib, "F32"}, {mib, "BF16"}}
	got = Buckets(mixed, 0, 10*mib)
	want = [][]int{{3, 1}, {2, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mixed dtypes: %v, want %v", got, want)
	}
	// Every parameter is in exactly one bucket, for any caps.
	for _, cap := range []int64{0, 1, mib, 5 * mib, 100 * mib} {
		seen := map[int]int{}
		for _, b := range Buckets(ps, cap/2, cap) {
			for _, i := range b {
				seen[i]++
			}
		}
		for i := range ps {
			if seen[i] != 1 {
				t.Errorf("cap %d: parameter %d in %d buckets", cap, i, seen[i])
			}
		}
	}
}
