//go:build cuda

package cuda_test

import (
	"testing"
	"time"

	"github.com/tune-ml/tune/tensor"
)

// TestTimeGatedExcludesHostWork: two small fills with 3 ms of host work between them take ≥ 3 ms by Time
// (the device idles while the host works) and well under it by TimeGated, whose host time counts the 3 ms;
// an op that makes the host wait (Download) times the gate out instead of hanging, and says so.
func TestTimeGatedExcludesHostWork(t *testing.T) {
	gpu := openOrSkip(t)
	x, err := gpu.Alloc(tensor.F32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Free(x)
	const pause = 3 * time.Millisecond
	fn := func() error {
		if err := gpu.Fill(x, 1); err != nil {
			return err
		}
		time.Sleep(pause)
		return gpu.Fill(x, 2)
	}
	if err := fn(); err != nil { // warm up: compile the kernels
		t.Fatal(err)
	}
	ms, err := gpu.Time(fn)
	if err != nil {
		t.Fatal(err)
	}
	dev, host, timedOut, err := gpu.TimeGated(fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Time %.3f ms; TimeGated device %.3f ms, host %.3f ms, timed out %v", ms, dev, host, timedOut)
	if ms < 3 {
		t.Errorf("Time = %.3f ms, want ≥ 3 (the device waits for the host's pause)", ms)
	}
	if dev <= 0 || dev > 1 {
		t.Errorf("TimeGated device time = %.3f ms, want in (0, 1]: the host's pause must not count", dev)
	}
	if host < 3 || timedOut {
		t.Errorf("TimeGated host time = %.3f ms, timed out %v; want ≥ 3 ms and no timeout", host, timedOut)
	}
	got := make([]float32, 1024)
	_, _, timedOut, err = gpu.TimeGated(func() error { return gpu.Download(got, x) })
	if err != nil {
		t.Fatal(err)
	}
	if !timedOut || got[0] != 2 {
		t.Errorf("a Download under the gate: timed out %v, x[0] = %v; want true, 2", timedOut, got[0])
	}
}
