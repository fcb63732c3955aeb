package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

const (
	// minChunkWork is the work (about one multiply-add per unit) below which a chunk is not worth a goroutine.
	minChunkWork = 1 << 15
	// maxChunks bounds the number of chunks, and so the per-chunk partial sums a reduction keeps.
	maxChunks = 64
)

// chunking returns the chunk size and count for n items of cost units each. It depends only on n and cost,
// never on the core count, so chunked reductions give the same bits on every machine.
func chunking(n, cost int) (size, count int) {
	if n <= 0 {
		return 1, 0
	}
	size = max(1, minChunkWork/max(1, cost), (n+maxChunks-1)/maxChunks)
	return size, (n + size - 1) / size
}

// parallelChunks calls fn(chunk, lo, hi) for each chunk of [0, n) (see chunking), on up to GOMAXPROCS
// goroutines, and returns when all have finished.
func parallelChunks(n, cost int, fn func(chunk, lo, hi int)) {
	size, count := chunking(n, cost)
	workers := min(count, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for k := 0; k < count; k++ {
			fn(k, k*size, min(n, (k+1)*size))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					panicked.CompareAndSwap(nil, r)
				}
			}()
			for {
				k := int(next.Add(1) - 1)
				if k >= count {
					return
				}
				fn(k, k*size, min(n, (k+1)*size))
			}
		}()
	}
	wg.Wait()
	if r := panicked.Load(); r != nil {
		panic(r) // re-raised on the op's goroutine, where guard turns it into an error
	}
}

// parallelFor calls fn(lo, hi) over chunks of [0, n); see parallelChunks.
func parallelFor(n, cost int, fn func(lo, hi int)) {
	parallelChunks(n, cost, func(_, lo, hi int) { fn(lo, hi) })
}
