package loaders

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestCheckpointNotHeldTwice opens a 32 MiB checkpoint and reads its tensor into a caller's buffer: the Go heap
// grows by far less than the file, because the file is memory-mapped and Get hands out views of the mapping.
func TestCheckpointNotHeldTwice(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no mmap on this platform: checkpoints are read into memory once")
	}
	const n = 8 << 20 // elements: 32 MiB of F32
	path := filepath.Join(t.TempDir(), "big.safetensors")
	{
		values := make([]float32, n)
		for i := range values {
			values[i] = float32(i % 1000)
		}
		ht, err := NewHostTensor("w", tensor.F32, []int{n / 1024, 1024}, values)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteSafetensors(path, []HostTensor{ht}, nil); err != nil {
			t.Fatal(err)
		}
	}
	dst := make([]float32, n) // the model's parameter buffer
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := OpenCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ht, err := c.Get("w")
	if err != nil {
		t.Fatal(err)
	}
	if err := ht.Float32Into(dst); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 1<<20 {
		t.Errorf("opening and reading a %d-byte checkpoint allocated %d bytes on the heap", 4*n, grown)
	}
	if dst[1234] != 234 || dst[n-1] != float32((n-1)%1000) {
		t.Errorf("values read wrong: %v %v", dst[1234], dst[n-1])
	}
}

// BenchmarkFloat32Into measures widening a 4M-element tensor into a float32 buffer, per dtype (GB/s of source).
func BenchmarkFloat32Into(b *testing.B) {
	const n = 4 << 20
	values := make([]float32, n)
	for i := range values {
		values[i] = float32(i) * 1e-3
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		b.Run(dt.String(), func(b *testing.B) {
			ht, err := NewHostTensor("x", dt, []int{n}, values)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]float32, n)
			b.SetBytes(int64(len(ht.Data)))
			b.ResetTimer()
			for range b.N {
				if err := ht.Float32Into(dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ht.Data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
