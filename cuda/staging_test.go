//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestUploadsThroughTheRingKeepTheirValues queues three rings' worth of 1 MiB uploads from one reused host
// slice behind device work that keeps the copies waiting, so the ring wraps while earlier copies out of it
// are still queued: every buffer must hold the values the slice had when its Upload returned.
func TestUploadsThroughTheRingKeepTheirValues(t *testing.T) {
	b := openOrSkip(t)
	const n, count = 1 << 18, 24 // 1 MiB of I32 each; the ring is 8 MiB
	big, err := b.Alloc(tensor.F32, 1<<28)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(big)
	for range 8 { // ~10 ms of device work queued ahead of the copies
		if err := b.Fill(big, 1); err != nil {
			t.Fatal(err)
		}
	}
	bufs := make([]*tensor.Tensor, count)
	host := make([]int32, n)
	for k := range bufs {
		if bufs[k], err = b.Alloc(tensor.I32, n); err != nil {
			t.Fatal(err)
		}
		defer b.Free(bufs[k])
		for i := range host {
			host[i] = int32(k*1000003 + i)
		}
		if err := b.Upload(bufs[k], host); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]int32, n)
	for k, buf := range bufs {
		if err := b.Download(got, buf); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if want := int32(k*1000003 + i); v != want {
				t.Fatalf("upload %d: element %d is %d, want %d", k, i, v, want)
			}
		}
	}
}

// TestSmallUploadsDoNotWait: uploads that fit in the ring together never wait for the device, however far
// behind it is (the earlier tests' copies are finished by the Synchronize, wherever the ring's head is).
func TestSmallUploadsDoNotWait(t *testing.T) {
	b := openOrSkip(t)
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	big, err := b.Alloc(tensor.F32, 1<<28)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(big)
	ids, err := b.Alloc(tensor.I32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(ids)
	host := make([]int32, 1024)
	before := b.HostWaits()["Upload"]
	for k := range 200 { // 200 × 4 KiB, each aligned to 256 bytes: 800 KiB of the 8 MiB ring
		if err := b.Fill(big, float32(k)); err != nil {
			t.Fatal(err)
		}
		host[0] = int32(k)
		if err := b.Upload(ids, host); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.HostWaits()["Upload"] - before; got != 0 { // a wrap reuses only bytes of finished copies
		t.Errorf("200 small uploads behind device work waited %d times, want 0", got)
	}
	got := make([]int32, 1024)
	if err := b.Download(got, ids); err != nil {
		t.Fatal(err)
	}
	if got[0] != 199 {
		t.Errorf("last upload: element 0 is %d, want 199", got[0])
	}
}
