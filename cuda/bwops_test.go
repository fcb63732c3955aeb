//go:build cuda

package cuda_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestAdamWVectorMatchesScalar checks AdamW's float4 path against its element-by-element path (the same
// buffers one element into larger ones, so that no 16-byte boundary lines up) and against tensor/cpu, bit for
// bit, over segments of odd offsets and lengths, one longer than a work chunk (65536 elements), decaying and
// not, with a frozen gap.
func TestAdamWVectorMatchesScalar(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	const n = 300_007
	segs := []tensor.Segment{{Offset: 0, Len: 7, Decay: true}, {Offset: 7, Len: 140_001, Decay: true},
		{Offset: 140_008, Len: 3, Decay: false}, {Offset: 140_020, Len: 100_000, Decay: false}, {Offset: 240_021, Len: 59_986, Decay: true}}
	rng := rand.New(rand.NewPCG(3, 4))
	vals := make([][]float32, 4)
	for k := range vals {
		vals[k] = make([]float32, n)
		for i := range vals[k] {
			vals[k][i] = float32(rng.NormFloat64())
			if k == 3 {
				vals[k][i] = float32(1e-4 * rng.Float64())
			}
		}
	}
	run := func(b tensor.Backend, off int) [][]float32 {
		ts := make([]*tensor.Tensor, 4)
		for k := range ts {
			buf, err := b.Alloc(tensor.F32, n+off)
			must(t, err)
			defer b.Free(buf)
			host := make([]float32, n+off)
			copy(host[off:], vals[k])
			must(t, b.Upload(buf, host))
			ts[k], err = buf.View(off, n)
			must(t, err)
		}
		for step := 1; step <= 3; step++ {
			must(t, b.AdamW(tensor.AdamWArgs{Params: ts[0], Grads: ts[1], ExpAvg: ts[2], ExpAvgSq: ts[3], Segments: segs,
				LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step}))
		}
		out := make([][]float32, 4)
		for k := range out {
			out[k] = make([]float32, n)
			must(t, b.Download(out[k], ts[k]))
		}
		return out
	}
	vec, scalar, want := run(gpu, 0), run(gpu, 1), run(ref, 0)
	for k, name := range []string{"params", "grads", "exp_avg", "exp_avg_sq"} {
		if d := firstBitDiff(vec[k], scalar[k]); d >= 0 {
			t.Errorf("%s: aligned (float4) and unaligned (scalar) differ at %d: %v vs %v", name, d, vec[k][d], scalar[k][d])
		}
		if d := firstBitDiff(vec[k], want[k]); d >= 0 {
			t.Errorf("%s: cuda and cpu differ at %d: %v vs %v", name, d, vec[k][d], want[k][d])
		}
	}
}

