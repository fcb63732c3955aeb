//go:build cuda

package cuda_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// openOrSkip opens device 0, skipping the test on a machine without a usable GPU.
func openOrSkip(t testing.TB) *cuda.Backend {
	t.Helper()
	b, err := cuda.Open(0)
	if errors.Is(err, tensor.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatalf("cuda.Open(0): %v", err)
	}
	return b.(*cuda.Backend)
}

func TestProbeReportsDeviceAndLibraries(t *testing.T) {
	ds, err := cuda.Probe()
	if errors.Is(err, tensor.ErrNoDevice) {
		if cuda.Available() {
			t.Error("Available() is true although Probe finds no device")
		}
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !cuda.Available() {
		t.Error("Available() is false although Probe found devices")
	}
	for _, d := range ds {
		t.Logf("cuda:%d %s sm_%d%d, %.1f GiB, driver %d", d.Ordinal, d.Name, d.Major, d.Minor, float64(d.MemoryBytes)/(1<<30), d.Driver)
		for _, l := range d.Libraries {
			t.Logf("  %s", l)
		}
		if d.Name == "" || d.Major == 0 || d.MemoryBytes == 0 || d.Driver == 0 {
			t.Errorf("incomplete DeviceInfo %+v", d)
		}
		joined := strings.Join(d.Libraries, "\n")
		for _, lib := range []string{"cublasLt: /", "nvrtc: /"} {
			if !strings.Contains(joined, lib) {
				t.Errorf("Libraries does not name the file loaded for %q:\n%s", lib, joined)
			}
		}
	}
}

func TestOpenSameOrdinalSharesBackend(t *testing.T) {
	b := openOrSkip(t)
	again, err := cuda.Open(0)
	if err != nil || again != tensor.Backend(b) {
		t.Errorf("second Open(0) = %v, %v; want the same backend", again, err)
	}
	if _, err := cuda.Open(1 << 20); !errors.Is(err, tensor.ErrArgument) {
		t.Errorf("Open of a device that does not exist: err = %v, want ErrArgument", err)
	}
}

func TestMemoryStatsCurrentAndPeak(t *testing.T) {
	b := openOrSkip(t)
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	b.ResetPeakMemoryStats()
	base := b.MemoryStats()
	x, err := b.Alloc(tensor.F32, 1000, 1000) // 4,000,000 bytes → class 4 MiB (2^22 = 4,194,304)
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Alloc(tensor.BF16, 3) // 6 bytes → 512
	if err != nil {
		t.Fatal(err)
	}
	s := b.MemoryStats()
	if got, want := s.Allocated-base.Allocated, int64(4<<20+512); got != want {
		t.Errorf("Allocated grew by %d, want %d (class sizes)", got, want)
	}
	if s.PeakAllocated != s.Allocated {
		t.Errorf("PeakAllocated = %d, want the current %d", s.PeakAllocated, s.Allocated)
	}
	b.Free(x)
	b.Free(y)
	after := b.MemoryStats()
	if after.Allocated != base.Allocated || after.PeakAllocated != s.PeakAllocated {
		t.Errorf("after Free: %+v; want Allocated back to %d and the peak kept at %d", after, base.Allocated, s.PeakAllocated)
	}
	if after.Reserved < s.Allocated-base.Allocated {
		t.Errorf("freed blocks left the cache: Reserved = %d", after.Reserved)
	}
	hits := after.CacheHits
	z, err := b.Alloc(tensor.F32, 999, 1001) // same class as x: served from the cache
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(z)
	if got := b.MemoryStats().CacheHits; got != hits+1 {
		t.Errorf("CacheHits = %d, want %d: a same-class allocation did not reuse the freed block", got, hits+1)
	}
	if s, ok := cuda.Memory(b); !ok || s.Allocated == 0 {
		t.Errorf("cuda.Memory(b) = %+v, %v", s, ok)
	}
}

func TestErrorsCarryStatusNames(t *testing.T) {
	b := openOrSkip(t)
	_, err := b.Alloc(tensor.F32, 1<<20, 1<<20, 64) // 256 TiB
	var oe *tensor.OpError
	var ce *cuda.Error
	if !errors.As(err, &oe) || !errors.As(err, &ce) {
		t.Fatalf("Alloc of 256 TiB: err = %v; want a *tensor.OpError wrapping a *cuda.Error", err)
	}
	if ce.Status != "CUDA_ERROR_OUT_OF_MEMORY" || oe.Op != "Alloc" {
		t.Errorf("err = %v; want op Alloc and status CUDA_ERROR_OUT_OF_MEMORY", err)
	}
	// The backend still works afterwards.
	x, err := b.Alloc(tensor.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(x)
	if err := b.Fill(x, 1.5); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if err := b.Download(got, x); err != nil || got[3] != 1.5 {
		t.Errorf("after the failed Alloc: %v, %v", got, err)
	}
}

func TestFillIntegers(t *testing.T) {
	b := openOrSkip(t)
	for _, c := range []struct {
		name string
		dt   tensor.DType
		v    float32
	}{{"I64 -100 (ignore_index)", tensor.I64, -100}, {"I64 2^33", tensor.I64, 1 << 33}, {"I32 -7", tensor.I32, -7}} {
		t.Run(c.name, func(t *testing.T) {
			x, err := b.Alloc(c.dt, 5)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(x)
			v, err := x.View(1, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Fill(v, c.v); err != nil {
				t.Fatal(err)
			}
			want := []int64{0, int64(c.v), int64(c.v), int64(c.v), 0}
			got := make([]int64, 5)
			if c.dt == tensor.I32 {
				g32 := make([]int32, 5)
				err = b.Download(g32, x)
				for i := range g32 {
					got[i] = int64(g32[i])
				}
			} else {
				err = b.Download(got, x)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("after Fill of elements 1..3 with %v: %v, want %v", c.v, got, want)
				}
			}
		})
	}
}

// nan is the poison written into outputs before an op runs.
var nan = float32(math.NaN())
