//go:build cuda

package cuda

import (
	"testing"

	"gorgonia.org/cu"
)

func TestClassSize(t *testing.T) {
	for _, c := range []struct {
		n, want int64
		why     string
	}{
		{1, 512, "the smallest class is 512 bytes"},
		{512, 512, "an exact class size is kept"},
		{513, 640, "above 512, four steps per power of two: 640"},
		{1000, 1024, "1000 rounds to 1024"},
		{1025, 1280, "just above a power of two goes to the first quarter step"},
		{3 << 20, 3 << 20, "3 MiB is a class (2 MiB + 2·512 KiB)"},
		{3<<20 + 1, 3<<20 + 512<<10, "one byte more takes the next step"},
		{16 << 20, 16 << 20, "16 MiB is the last quarter-step class"},
		{16<<20 + 1, 18 << 20, "above 16 MiB: multiples of 2 MiB"},
		{6690 << 20, 6690 << 20, "a 6.5 GiB arena slab keeps its size (a quarter step would make it 7 GiB)"},
		{6689<<20 + 1, 6690 << 20, "a large request wastes less than 2 MiB"},
	} {
		t.Run(c.why, func(t *testing.T) {
			if got := classSize(c.n); got != c.want {
				t.Errorf("classSize(%d) = %d, want %d", c.n, got, c.want)
			}
			if got := classSize(c.n); got < c.n || float64(got) > 1.25*float64(c.n)+512 {
				t.Errorf("classSize(%d) = %d wastes more than a quarter", c.n, got)
			}
		})
	}
}

// fakeDevice stands in for cuMemAlloc/cuMemFree: a bump allocator with a capacity.
type fakeDevice struct {
	next, used, capacity int64
	live                 map[cu.DevicePtr]int64
}

func (f *fakeDevice) alloc(n int64) (cu.DevicePtr, error) {
	if f.used+n > f.capacity {
		return 0, oomErr()
	}
	f.next += n
	f.used += n
	p := cu.DevicePtr(f.next)
	f.live[p] = n
	return p, nil
}

func (f *fakeDevice) release(p cu.DevicePtr) error {
	f.used -= f.live[p]
	delete(f.live, p)
	return nil
}

// oomErr returns gorgonia.org/cu's CUDA_ERROR_OUT_OF_MEMORY value.
func oomErr() error { return cu.OutOfMemory }

func TestAllocatorCachesAndCounts(t *testing.T) {
	dev := &fakeDevice{capacity: 10 << 20, live: map[cu.DevicePtr]int64{}}
	a := newAllocator()
	a.alloc, a.release = dev.alloc, dev.release

	p1, c1, err := a.get(1000)
	if err != nil || c1 != 1024 {
		t.Fatalf("get(1000) = %v, class %d, %v; want class 1024", p1, c1, err)
	}
	p2, c2, _ := a.get(3000)
	if s := a.stats(); s.Allocated != c1+c2 || s.PeakAllocated != c1+c2 || s.Reserved != c1+c2 || s.DeviceAllocs != 2 {
		t.Fatalf("after two gets: %+v", s)
	}
	a.put(p1, c1)
	if s := a.stats(); s.Allocated != c2 || s.PeakAllocated != c1+c2 || s.Reserved != c1+c2 {
		t.Fatalf("after a put the peak must stay and the block stay reserved: %+v", s)
	}
	p3, _, _ := a.get(900) // same class as 1000: served from the cache
	if p3 != p1 {
		t.Errorf("a request of the freed block's class got %v, want the cached %v", p3, p1)
	}
	if s := a.stats(); s.CacheHits != 1 || s.DeviceAllocs != 2 {
		t.Errorf("cache hit not counted: %+v", s)
	}
	a.put(p2, c2)
	a.put(p3, c1)
	if err := a.emptyCache(); err != nil {
		t.Fatal(err)
	}
	if s := a.stats(); s.Reserved != 0 || s.Allocated != 0 || dev.used != 0 {
		t.Errorf("after emptyCache: %+v, device still holds %d bytes", s, dev.used)
	}
}

func TestAllocatorRetriesAfterReleasingTheCache(t *testing.T) {
	dev := &fakeDevice{capacity: 8 << 20, live: map[cu.DevicePtr]int64{}}
	a := newAllocator()
	a.alloc, a.release = dev.alloc, dev.release
	p, c, err := a.get(6 << 20)
	if err != nil {
		t.Fatal(err)
	}
	a.put(p, c) // cached, still reserved on the device
	if _, _, err := a.get(5 << 20); err != nil {
		t.Fatalf("a request that fits only once the cache is released failed: %v", err)
	}
	if s := a.stats(); s.Reserved != classSize(5<<20) {
		t.Errorf("Reserved = %d, want only the new block %d", s.Reserved, classSize(5<<20))
	}
	if _, _, err := a.get(6 << 20); err == nil {
		t.Error("a request beyond the device's capacity succeeded")
	}
}

// TestAllocatorHandsOutTheLowestFreeBlock: which cached block a request gets depends only on the free set,
// not on the order the blocks were put back in — a step that releases its scratch in another order each time
// still gets the same addresses (the CUDA graph of a step replays unpatched).
func TestAllocatorHandsOutTheLowestFreeBlock(t *testing.T) {
	dev := &fakeDevice{capacity: 10 << 20, live: map[cu.DevicePtr]int64{}}
	a := newAllocator()
	a.alloc, a.release = dev.alloc, dev.release
	var ps [3]cu.DevicePtr
	var c int64
	for i := range ps {
		ps[i], c, _ = a.get(100)
	}
	for _, order := range [][3]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}} {
		for _, i := range order {
			a.put(ps[i], c)
		}
		var got [3]cu.DevicePtr
		for i := range got {
			got[i], _, _ = a.get(100)
		}
		for i := 1; i < 3; i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("put in order %v, then got %v: want ascending addresses", order, got)
			}
		}
		ps = got
	}
}
