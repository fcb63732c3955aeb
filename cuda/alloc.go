//go:build cuda

package cuda

import (
	"math/bits"
	"sort"

	"gorgonia.org/cu"
)

// allocator is a caching device-memory allocator, after PyTorch's CUDACachingAllocator in its simplest
// form: a freed block goes back to a free list of its size class instead of to cuMemFree, and the next
// request of that class reuses it. Every block is used on the backend's one stream, so a block freed by the
// host can be handed out again at once: work queued later on the stream runs after the work that used it.
//
// Size classes: requests are rounded up to 512 bytes, and above 512 bytes to the next of four steps per
// power of two (512, 640, 768, 896, 1024, 1280, ...), so at most a quarter of a block is slack and tensors
// whose sizes differ a little (dynamic padding) still share blocks. Above largeClass (16 MiB) a request is
// rounded up to a multiple of 2 MiB instead, as PyTorch rounds its large allocations (kRoundLarge in
// c10/cuda/CUDACachingAllocator.cpp): a quarter of a step arena's multi-GiB slab would be a gigabyte of slack
// (a 6.2 GiB BF16 arena took a 7 GiB block). When cuMemAlloc runs out of memory, the free lists are released
// to the driver and the allocation is tried once more.
//
// The allocator is not safe for concurrent use; the Backend's mutex guards it.
type allocator struct {
	free      map[int64][]cu.DevicePtr // cached blocks by class size
	allocated int64                    // bytes of class sizes handed out and not yet freed
	peak      int64                    // high-water mark of allocated since the last ResetPeak
	reserved  int64                    // bytes obtained from cuMemAlloc and not returned to the driver
	mallocs   int64                    // cuMemAlloc calls (cache misses)
	hits      int64                    // requests served from the cache

	// alloc and release are cuMemAlloc and cuMemFree (replaceable in tests).
	alloc   func(bytes int64) (cu.DevicePtr, error)
	release func(cu.DevicePtr) error
}

func newAllocator() *allocator {
	return &allocator{free: map[int64][]cu.DevicePtr{}, alloc: cu.MemAlloc, release: cu.MemFree}
}

// largeClass is the request size above which size classes are multiples of largeRound.
const largeClass, largeRound = 16 << 20, 2 << 20

// classSize rounds a request of n > 0 bytes up to its size class.
func classSize(n int64) int64 {
	if n <= 512 {
		return 512
	}
	if n > largeClass {
		return (n + largeRound - 1) / largeRound * largeRound
	}
	e := bits.Len64(uint64(n - 1)) // 2^(e-1) < n ≤ 2^e
	step := int64(1) << (e - 3)    // four steps between 2^(e-1) and 2^e
	return (n + step - 1) / step * step
}

// get returns a block of at least n bytes and its class size. n == 0 gives the null pointer.
func (a *allocator) get(n int64) (cu.DevicePtr, int64, error) {
	if n == 0 {
		return 0, 0, nil
	}
	c := classSize(n)
	if l := a.free[c]; len(l) > 0 {
		p := l[len(l)-1]
		a.free[c] = l[:len(l)-1]
		a.hits++
		a.take(c)
		return p, c, nil
	}
	p, err := a.alloc(c)
	if err != nil {
		if code, ok := cuCode(err); ok && code == 2 { // CUDA_ERROR_OUT_OF_MEMORY: give the cache back, retry once
			if a.emptyCache() == nil {
				p, err = a.alloc(c)
			}
		}
		if err != nil {
			return 0, 0, err
		}
	}
	a.mallocs++
	a.reserved += c
	a.take(c)
	return p, c, nil
}

func (a *allocator) take(c int64) {
	a.allocated += c
	if a.allocated > a.peak {
		a.peak = a.allocated
	}
}

// put returns a block of class c to the cache.
func (a *allocator) put(p cu.DevicePtr, c int64) {
	if c == 0 {
		return
	}
	a.allocated -= c
	// The list stays sorted by address, highest first, so get hands out the lowest free block: which block a
	// request gets depends on the set of free blocks, not on the order they were put back in. A training
	// step that frees all its scratch then gets the same addresses every step, whatever order its ops release
	// them in (a CUDA graph of the step replays without patching its kernels' pointers: graph.go).
	l := a.free[c]
	i := sort.Search(len(l), func(i int) bool { return l[i] < p })
	l = append(l, 0)
	copy(l[i+1:], l[i:])
	l[i] = p
	a.free[c] = l
}

// emptyCache releases every cached block to the driver (torch.cuda.empty_cache). Blocks in use are kept.
func (a *allocator) emptyCache() error {
	classes := make([]int64, 0, len(a.free))
	for c := range a.free {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return classes[i] < classes[j] })
	var first error
	for _, c := range classes {
		for _, p := range a.free[c] {
			if err := a.release(p); err != nil && first == nil {
				first = err
			}
			a.reserved -= c
		}
		delete(a.free, c)
	}
	return first
}

func (a *allocator) stats() MemoryStats {
	return MemoryStats{Allocated: a.allocated, PeakAllocated: a.peak, Reserved: a.reserved, DeviceAllocs: a.mallocs, CacheHits: a.hits}
}
