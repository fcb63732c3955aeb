package tensortest

import (
	"fmt"
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

// CheckClippedAdamW checks AdamW clipping the gradients as it reads them (AdamWArgs.GradNorm and MaxGradNorm)
// against the composition it replaces on the same backend, bit for bit: ClipByNorm of the gradients in memory,
// then AdamW without GradNorm. The norms cover a clip, a norm within max_norm, max_norm 0 and a non-finite
// norm (nothing scaled: taken without a flag, skipped by the flag ClipByNorm of no tensors sets), each over
// a short buffer and one of several chunks whose segments start off 16-byte boundaries, plain and with the
// step's scalars from a table row; the gradients must come back unchanged. RunOpSuite runs it.
func CheckClippedAdamW(t *testing.T, b tensor.Backend) {
	g := newGen("clipped AdamW")
	type layout struct {
		n    int
		segs []tensor.Segment
	}
	for _, l := range []layout{
		{37, nil},
		{70001, []tensor.Segment{{Offset: 3, Len: 40000, Decay: true}, {Offset: 40003, Len: 29990, Decay: false}, {Offset: 69998, Len: 3, Decay: true}}},
	} {
		p0, g0, m0, v0 := g.normal(l.n, 1), g.normal(l.n, 1), g.normal(l.n, 0.1), g.uniform(l.n, 0, 1e-2)
		host := []float64{0}
		for _, x := range g0 {
			host[0] += float64(x) * float64(x)
		}
		total := math.Sqrt(host[0]) // near the backend's norm; the bits the test uses are the backend's own
		for _, c := range []struct {
			name    string
			norm    float64 // 0: the backend's GlobalNormTo of the gradients
			maxNorm float32
			flag    bool // set the skip flag by ClipByNorm of no tensors, and pass it as Skip
			table   bool
		}{
			{"clipping", 0, float32(total / 3), false, false},
			{"clipping, from a table row", 0, float32(total / 7), true, true},
			{"within max_norm", 0, float32(total * 4), true, false},
			{"max_norm 0", 0, 0, true, false},
			{"non-finite norm, no flag", math.Inf(1), 1, false, false},
			{"non-finite norm, skipped", math.NaN(), 1, true, true},
		} {
			t.Run(fmt.Sprintf("%d elements, %s", l.n, c.name), func(t *testing.T) {
				var keep []*tensor.Tensor
				defer func() {
					for _, x := range keep {
						b.Free(x)
					}
				}()
				up := func(dt tensor.DType, v []float32) *tensor.Tensor {
					x := Upload(t, b, dt, v)
					keep = append(keep, x)
					return x
				}
				alloc := func(dt tensor.DType, n int) *tensor.Tensor {
					x := Alloc(t, b, dt, n)
					keep = append(keep, x)
					return x
				}
				norm := alloc(tensor.I64, 1)
				if c.norm == 0 {
					if err := b.GlobalNormTo(norm, []*tensor.Tensor{up(tensor.F32, g0)}); err != nil {
						t.Fatal(err)
					}
				} else if err := b.Upload(norm, []int64{int64(math.Float64bits(c.norm))}); err != nil {
					t.Fatal(err)
				}
				var table, row *tensor.Tensor
				if c.table {
					r := tensor.AdamWScalars(3e-3, 0.9, 0.999, 0.01, 4)
					table, row = up(tensor.F32, append([]float32{0, 0, 0}, r[:]...)), alloc(tensor.I32, 1)
					if err := b.Upload(row, []int32{1}); err != nil {
						t.Fatal(err)
					}
				}
				step := func(folded bool) (out []float32, grads []float32, flag int32) {
					p, gg, m, v := up(tensor.F32, p0), up(tensor.F32, g0), up(tensor.F32, m0), up(tensor.F32, v0)
					var skip *tensor.Tensor
					if c.flag {
						skip = alloc(tensor.I32, 1)
						if err := b.Fill(skip, 0); err != nil {
							t.Fatal(err)
						}
						if err := b.ClipByNorm(nil, norm, 0, skip); err != nil {
							t.Fatal(err)
						}
					}
					a := tensor.AdamWArgs{Params: p, Grads: gg, ExpAvg: m, ExpAvgSq: v, Segments: l.segs, LR: 3e-3, Beta1: 0.9,
						Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 4, Skip: skip, Table: table, Row: row}
					if folded {
						a.GradNorm, a.MaxGradNorm = norm, c.maxNorm
					} else if err := b.ClipByNorm([]*tensor.Tensor{gg}, norm, c.maxNorm, nil); err != nil {
						t.Fatal(err)
					}
					if err := b.AdamW(a); err != nil {
						t.Fatal(err)
					}
					if skip != nil {
						h := make([]int32, 1)
						if err := b.Download(h, skip); err != nil {
							t.Fatal(err)
						}
						flag = h[0]
					}
					return append(append(Download(t, b, p), Download(t, b, m)...), Download(t, b, v)...), Download(t, b, gg), flag
				}
				want, _, wantFlag := step(false)
				got, grads, flag := step(true)
				for k := range want {
					if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
						t.Fatalf("value %d (of p, m, v) = %v, ClipByNorm then AdamW gives %v", k, got[k], want[k])
					}
				}
				for k := range grads {
					if math.Float32bits(grads[k]) != math.Float32bits(g0[k]) {
						t.Fatalf("gradient %d changed: %v, was %v", k, grads[k], g0[k])
					}
				}
				nonFinite := math.IsInf(c.norm, 0) || math.IsNaN(c.norm)
				if c.flag && (flag != wantFlag || (flag != 0) != nonFinite) {
					t.Fatalf("skip flag %d, ClipByNorm's %d (norm %v)", flag, wantFlag, c.norm)
				}
				if c.flag && nonFinite { // skipped: nothing changed
					before := append(append(append([]float32(nil), p0...), m0...), v0...)
					for k := range got {
						if math.Float32bits(got[k]) != math.Float32bits(before[k]) {
							t.Fatalf("a skipped step changed value %d: %v, was %v", k, got[k], before[k])
						}
					}
				}
			})
		}
	}
}
