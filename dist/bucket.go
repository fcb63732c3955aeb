package dist

// Bucket limits of PyTorch DDP (torch/nn/parallel/distributed.py): bucket_cap_mb = 25, and a first bucket
// of dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB so that the first all-reduce starts early in backward.
const (
	FirstBucketBytes = 1 << 20
	BucketBytes      = 25 << 20
)

// Param describes one parameter's gradient for bucketing: its size in bytes and a key of what may share a
// bucket (its dtype: one NCCL call reduces one dtype).
type Param struct {
	Bytes int64  // the gradient's size in bytes
	Key   string // what may share a bucket with it (its dtype)
}

// Buckets groups parameters (given in forward order, as the model lists them) into all-reduce buckets the way
// DDP's reducer assigns them (compute_bucket_assignment_by_size in torch/csrc/distributed/c10d/reducer.cpp,
// called with the parameters reversed): walking the parameters from the last to the first, each joins the
// open bucket of its key, and a bucket closes once it holds at least the current limit (firstCap for the
// first bucket closed, cap after); the buckets are returned in the order backward completes them (the bucket
// holding the last parameter first), each listing parameter indices from the last to the first. A cap ≤ 0
// puts every parameter of a key in one bucket.
func Buckets(params []Param, firstCap, cap int64) [][]int {
	type open struct {
		idx  []int
		size int64
	}
	limit := firstCap
	if limit <= 0 {
		limit = cap
	}
	buckets := map[string]*open{}
	var out [][]int
	var first []int // smallest reversed position of each bucket in out, for ordering
	for pos := range params {
		i := len(params) - 1 - pos
		p := params[i]
		b := buckets[p.Key]
		if b == nil {
			b = &open{}
			buckets[p.Key] = b
		}
		b.idx = append(b.idx, i)
		b.size += p.Bytes
		if limit > 0 && b.size >= limit {
			out = append(out, b.idx)
			first = append(first, len(params)-1-b.idx[0])
			delete(buckets, p.Key)
			limit = cap
		}
	}
	// The still-open buckets, in the order their first parameter was reached.
	for pos := range params {
		i := len(params) - 1 - pos
		if b := buckets[params[i].Key]; b != nil && b.idx[0] == i {
			out = append(out, b.idx)
			first = append(first, pos)
		}
	}
	// Order by the first parameter each bucket holds (DDP sorts its buckets the same way).
	for a := 1; a < len(out); a++ {
		for b := a; b > 0 && first[b] < first[b-1]; b-- {
			out[b], out[b-1] = out[b-1], out[b]
			first[b], first[b-1] = first[b-1], first[b]
		}
	}
	return out
}
