package tensortest

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// CheckDeviceStep checks the ops that keep an optimizer step's scalars on the device against the host-side
// path of the same backend, bit for bit: GlobalNormTo holds GlobalNorm's float64; ClipByNorm scales as
// Scale by the coefficient computed on the host (torch.nn.utils.clip_grad_norm_'s FP32 order), leaves the
// gradients alone when they are within the norm or maxNorm is 0, and flags a non-finite norm without
// touching anything; AdamW with a zero Skip flag is AdamW, with a set one it changes nothing. RunOpSuite runs
// it; a backend's own tests may run it alone.
func CheckDeviceStep(t *testing.T, b tensor.Backend) {
	g := newGen("device step")
	a, c := g.normal(33*7, 3), g.normal(11, 1)
	norm := Alloc(t, b, tensor.I64, 1)
	flag := Alloc(t, b, tensor.I32, 1)
	defer b.Free(norm)
	defer b.Free(flag)
	grads := func(poison bool) []*tensor.Tensor {
		x := append([]float32(nil), c...)
		if poison {
			x[4] = float32(math.Inf(-1))
		}
		return []*tensor.Tensor{Upload(t, b, tensor.F32, a, 33, 7), Upload(t, b, tensor.BF16, x)}
	}
	free := func(ts []*tensor.Tensor) {
		for _, x := range ts {
			b.Free(x)
		}
	}
	normBits := func() float64 {
		h := make([]int64, 1)
		if err := b.Download(h, norm); err != nil {
			t.Fatal(err)
		}
		return math.Float64frombits(uint64(h[0]))
	}
	flagOf := func() int32 {
		h := make([]int32, 1)
		if err := b.Download(h, flag); err != nil {
			t.Fatal(err)
		}
		return h[0]
	}
	same := func(what string, got, want []*tensor.Tensor) {
		t.Helper()
		for i := range got {
			x, y := Download(t, b, got[i]), Download(t, b, want[i])
			for k := range x {
				if math.Float32bits(x[k]) != math.Float32bits(y[k]) {
					t.Fatalf("%s: tensor %d element %d = %v, want %v", what, i, k, x[k], y[k])
				}
			}
		}
	}

	ts, ref := grads(false), grads(false)
	defer free(ts)
	defer free(ref)
	total, err := b.GlobalNorm(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.GlobalNormTo(norm, ts); err != nil {
		t.Fatal(err)
	}
	if got := normBits(); math.Float64bits(got) != math.Float64bits(total) {
		t.Fatalf("GlobalNormTo = %v, GlobalNorm = %v", got, total)
	}
	for _, maxNorm := range []float32{0, float32(total) * 4} { // nothing to clip
		if err := b.ClipByNorm(ts, norm, maxNorm, flag); err != nil {
			t.Fatal(err)
		}
		same("ClipByNorm within the norm", ts, ref)
	}
	maxNorm := float32(total) / 3
	if err := b.ClipByNorm(ts, norm, maxNorm, flag); err != nil {
		t.Fatal(err)
	}
	coef := (1 / (float32(total) + 1e-6)) * maxNorm
	for _, x := range ref {
		if err := b.Scale(x, coef); err != nil {
			t.Fatal(err)
		}
	}
	same("ClipByNorm", ts, ref)
	if f := flagOf(); f != 0 {
		t.Fatalf("ClipByNorm of a finite norm set the flag to %d", f)
	}

	bad, badRef := grads(true), grads(true)
	defer free(bad)
	defer free(badRef)
	if err := b.GlobalNormTo(norm, bad); err != nil {
		t.Fatal(err)
	}
	if got := normBits(); !math.IsInf(got, 1) && !math.IsNaN(got) {
		t.Fatalf("GlobalNormTo of an Inf gradient = %v", got)
	}
	if err := b.ClipByNorm(bad, norm, 1, flag); err != nil {
		t.Fatal(err)
	}
	same("ClipByNorm of a non-finite norm", bad, badRef)
	if f := flagOf(); f != 1 {
		t.Fatalf("ClipByNorm of a non-finite norm left the flag at %d, want 1", f)
	}

	const n = 37
	p0, gr, m0, v0 := g.normal(n, 1), g.normal(n, 1), g.normal(n, 0.1), g.uniform(n, 0, 1e-2)
	step := func(skip *tensor.Tensor) []float32 {
		p, gg, m, v := Upload(t, b, tensor.F32, p0), Upload(t, b, tensor.F32, gr), Upload(t, b, tensor.F32, m0), Upload(t, b, tensor.F32, v0)
		defer free([]*tensor.Tensor{p, gg, m, v})
		if err := b.AdamW(tensor.AdamWArgs{Params: p, Grads: gg, ExpAvg: m, ExpAvgSq: v, LR: 1e-3, Beta1: 0.9, Beta2: 0.999,
			Eps: 1e-8, WeightDecay: 0.01, Step: 2, Skip: skip}); err != nil {
			t.Fatal(err)
		}
		return append(append(Download(t, b, p), Download(t, b, m)...), Download(t, b, v)...)
	}
	plain := step(nil)
	if err := b.Fill(flag, 0); err != nil {
		t.Fatal(err)
	}
	for k, x := range step(flag) {
		if math.Float32bits(x) != math.Float32bits(plain[k]) {
			t.Fatalf("AdamW with a zero Skip flag: value %d = %v, want %v", k, x, plain[k])
		}
	}
	if err := b.Fill(flag, 1); err != nil {
		t.Fatal(err)
	}
	before := append(append(append([]float32(nil), p0...), m0...), v0...)
	for k, x := range step(flag) {
		if math.Float32bits(x) != math.Float32bits(before[k]) {
			t.Fatalf("AdamW with Skip set changed value %d: %v, was %v", k, x, before[k])
		}
	}
}
