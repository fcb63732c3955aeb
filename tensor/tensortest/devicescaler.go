package tensortest

import (
	"fmt"
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// CheckDeviceScaler checks the ops of FP16 loss scaling kept on the device against the host arithmetic they
// replace, bit for bit: NonFiniteCheckAndUnscaleOnDevice is NonFiniteCheckAndUnscale with
// invScale = float32(1/float64(scale)) and ORs its result into the flag; UpdateScale follows
// _amp_update_scale_ (a plain host model below) over a run of clean and overflowing steps, growth capped
// below Inf, backoff floored at MinScale, records each step's flag, counts the clean steps and the
// consecutive skipped ones and leaves the flag set once MaxSkipped is reached; AdamW with a Table row is AdamW with
// that row's lr and t; the loss backward ops with scaleBy are the ops with scale·*scaleBy. RunOpSuite runs it.
func CheckDeviceScaler(t *testing.T, b tensor.Backend) {
	g := newGen("device scaler")
	i32 := func(v ...int32) *tensor.Tensor {
		x := Alloc(t, b, tensor.I32, len(v))
		if err := b.Upload(x, v); err != nil {
			t.Fatal(err)
		}
		return x
	}
	ints := func(x *tensor.Tensor) []int32 {
		h := make([]int32, x.Numel())
		if err := b.Download(h, x); err != nil {
			t.Fatal(err)
		}
		return h
	}
	bitsEqual := func(what string, got, want []float32) {
		t.Helper()
		for k := range want {
			if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
				t.Fatalf("%s: element %d = %v, want %v", what, k, got[k], want[k])
			}
		}
	}

	t.Run("NonFiniteCheckAndUnscaleOnDevice", func(t *testing.T) {
		a, c := g.normal(70000, 3), g.normal(13, 1) // two chunks of the multi-tensor kernels, and a small one
		for _, sc := range []float32{65536, 3, 1, 0x1p-126} {
			for _, poison := range []bool{false, true} {
				cc := append([]float32(nil), c...)
				if poison {
					cc[7] = float32(math.NaN())
				}
				ts := []*tensor.Tensor{Upload(t, b, tensor.F32, a), Upload(t, b, tensor.F32, cc)}
				ref := []*tensor.Tensor{Upload(t, b, tensor.F32, a), Upload(t, b, tensor.F32, cc)}
				scale, found := Upload(t, b, tensor.F32, []float32{sc}), i32(0)
				want, err := b.NonFiniteCheckAndUnscale(ref, float32(1/float64(sc)))
				if err != nil {
					t.Fatal(err)
				}
				if err := b.NonFiniteCheckAndUnscaleOnDevice(ts, scale, found); err != nil {
					t.Fatal(err)
				}
				for i := range ts {
					bitsEqual(fmt.Sprintf("scale %v poison %v tensor %d", sc, poison, i), Download(t, b, ts[i]), Download(t, b, ref[i]))
				}
				if f := ints(found)[0]; (f != 0) != want {
					t.Fatalf("scale %v poison %v: found %d, the host op says %v", sc, poison, f, want)
				}
				if poison { // a clean call leaves a set flag set
					if err := b.NonFiniteCheckAndUnscaleOnDevice(ts[:1], scale, found); err != nil {
						t.Fatal(err)
					}
					if f := ints(found)[0]; f != 1 {
						t.Fatalf("a clean call reset the flag to %d", f)
					}
				}
				for _, x := range append(append(ts, ref...), scale, found) {
					b.Free(x)
				}
			}
		}
	})

	t.Run("UpdateScale", func(t *testing.T) {
		for _, o := range []struct {
			name                  string
			init                  float32
			growth, backoff, minS float64
			interval, maxSkipped  int
		}{
			{"defaults", 65536, 2, 0.5, 0x1p-126, 3, 0},
			{"rounded factors", 1000, 1.37, 0.3, 0x1p-126, 2, 2},
			{"grows to the FP32 cap", 0x1p125, 2, 0.5, 0x1p-126, 1, 0},
			{"backs off to the floor", 0x1p-124, 2, 0.5, 0x1p-126, 5, 6},
			{"no floor", 0x1p-148, 2, 0.5, 0, 5, 0},
		} {
			t.Run(o.name, func(t *testing.T) {
				scale, tracker, found, steps := Upload(t, b, tensor.F32, []float32{o.init}), i32(0), i32(0), i32(0)
				record, skipped := i32(7), i32(0)
				defer func() {
					for _, x := range []*tensor.Tensor{scale, tracker, found, steps, record, skipped} {
						b.Free(x)
					}
				}()
				s, tr, n, run := o.init, int32(0), int32(0), int32(0)
				for k := range 24 {
					bad := k%7 == 3 || k%11 == 10 || (o.name == "backs off to the floor" && k < 8)
					if err := b.Fill(found, map[bool]float32{false: 0, true: 1}[bad]); err != nil {
						t.Fatal(err)
					}
					if err := b.UpdateScale(tensor.UpdateScaleArgs{Scale: scale, GrowthTracker: tracker, FoundInf: found, Record: record,
						Steps: steps, Skipped: skipped, MaxSkipped: o.maxSkipped,
						GrowthFactor: o.growth, BackoffFactor: o.backoff, GrowthInterval: o.interval, MinScale: float32(o.minS)}); err != nil {
						t.Fatal(err)
					}
					s, tr = refUpdateScale(s, tr, bad, o.growth, o.backoff, o.interval, float32(o.minS))
					run++
					if !bad {
						n, run = n+1, 0
					}
					halt := int32(0)
					if o.maxSkipped > 0 && run >= int32(o.maxSkipped) {
						halt = 1
					}
					got, rec := Download(t, b, scale)[0], int32(0)
					if bad {
						rec = 1
					}
					if math.Float32bits(got) != math.Float32bits(s) || ints(tracker)[0] != tr || ints(steps)[0] != n {
						t.Fatalf("step %d (inf %v): scale %v tracker %d steps %d, want %v %d %d", k, bad, got, ints(tracker)[0], ints(steps)[0], s, tr, n)
					}
					if ints(record)[0] != rec || ints(skipped)[0] != run || ints(found)[0] != halt {
						t.Fatalf("step %d (inf %v): record %d skipped %d found after %d, want %d %d %d", k, bad, ints(record)[0], ints(skipped)[0], ints(found)[0], rec, run, halt)
					}
				}
			})
		}
	})

	t.Run("AdamW from a device table", func(t *testing.T) {
		const n = 70001
		p0, gr, m0, v0 := g.normal(n, 1), g.normal(n, 1), g.normal(n, 0.1), g.uniform(n, 0, 1e-2)
		segs := []tensor.Segment{{Offset: 0, Len: 40000, Decay: true}, {Offset: 40000, Len: n - 40000}}
		lrs := []float32{0, 3e-4, 1.7e-3}
		table := make([]float32, 0, 3*len(lrs))
		for k, lr := range lrs {
			r := tensor.AdamWScalars(lr, 0.9, 0.999, 0.01, 5+k)
			table = append(table, r[:]...)
		}
		tab := Upload(t, b, tensor.F32, table, len(lrs), 3)
		defer b.Free(tab)
		step := func(lr float32, t0 int, row *tensor.Tensor) []float32 {
			p, gg, m, v := Upload(t, b, tensor.F32, p0), Upload(t, b, tensor.F32, gr), Upload(t, b, tensor.F32, m0), Upload(t, b, tensor.F32, v0)
			defer func() {
				for _, x := range []*tensor.Tensor{p, gg, m, v} {
					b.Free(x)
				}
			}()
			a := tensor.AdamWArgs{Params: p, Grads: gg, ExpAvg: m, ExpAvgSq: v, Segments: segs, LR: lr, Beta1: 0.9, Beta2: 0.999,
				Eps: 1e-8, WeightDecay: 0.01, Step: t0}
			if row != nil {
				a.LR, a.Step, a.Table, a.Row = 1, 999, tab, row // LR and Step are not used
			}
			if err := b.AdamW(a); err != nil {
				t.Fatal(err)
			}
			return append(append(Download(t, b, p), Download(t, b, m)...), Download(t, b, v)...)
		}
		for k, lr := range lrs {
			row := i32(int32(k))
			bitsEqual(fmt.Sprintf("row %d", k), step(lr, 5+k, row), step(lr, 5+k, nil))
			b.Free(row)
		}
		row := i32(7) // clamped to the last row
		defer b.Free(row)
		bitsEqual("row 7 of 3", step(lrs[2], 7, row), step(lrs[2], 7, nil))
	})

	t.Run("loss backward scaled by a device value", func(t *testing.T) {
		sb := Upload(t, b, tensor.F32, []float32{0x1p13})
		defer b.Free(sb)
		const scale = float32(1.0 / 37)
		for _, v := range []int{5, 3000} { // warp-per-row and block-per-row kernels
			for _, dt := range []tensor.DType{tensor.F32, tensor.F16} {
				const n = 6
				logits := Upload(t, b, dt, g.normal(n*v, 2), n, v)
				labels := Alloc(t, b, tensor.I32, n)
				if err := b.Upload(labels, []int32{1, 0, -100, 4, 2, 3}); err != nil {
					t.Fatal(err)
				}
				got, want := Alloc(t, b, dt, n, v), Alloc(t, b, dt, n, v)
				if err := b.CrossEntropyBackward(got, logits, labels, scale, -100, sb); err != nil {
					t.Fatal(err)
				}
				if err := b.CrossEntropyBackward(want, logits, labels, scale*0x1p13, -100, nil); err != nil {
					t.Fatal(err)
				}
				bitsEqual(fmt.Sprintf("CrossEntropyBackward V=%d %v", v, dt), Download(t, b, got), Download(t, b, want))
				losses, pred := Alloc(t, b, tensor.F32, n), Alloc(t, b, tensor.I32, n)
				if _, err := b.CrossEntropyWithGrad(losses, pred, got, logits, labels, scale, -100, sb); err != nil {
					t.Fatal(err)
				}
				bitsEqual(fmt.Sprintf("CrossEntropyWithGrad V=%d %v", v, dt), Download(t, b, got), Download(t, b, want))
				for _, x := range []*tensor.Tensor{logits, labels, got, want, losses, pred} {
					b.Free(x)
				}
			}
		}
		pred, target := Upload(t, b, tensor.F32, g.normal(9, 1)), Upload(t, b, tensor.F32, g.normal(9, 1))
		got, want := Alloc(t, b, tensor.F32, 9), Alloc(t, b, tensor.F32, 9)
		defer func() {
			for _, x := range []*tensor.Tensor{pred, target, got, want} {
				b.Free(x)
			}
		}()
		if err := b.MSELossBackward(got, pred, target, scale, sb); err != nil {
			t.Fatal(err)
		}
		if err := b.MSELossBackward(want, pred, target, scale*0x1p13, nil); err != nil {
			t.Fatal(err)
		}
		bitsEqual("MSELossBackward", Download(t, b, got), Download(t, b, want))
	})
}

// refUpdateScale is _amp_update_scale_ on the host (aten/src/ATen/native/cuda/AmpKernels.cu), with a floor
// minScale on a backoff: the products in float64, rounded once to float32.
func refUpdateScale(s float32, tracker int32, found bool, growth, backoff float64, interval int, minScale float32) (float32, int32) {
	round := func(x float64) float32 {
		if x >= 0x1.ffffffp127 {
			return float32(math.Inf(1))
		}
		return float32(x)
	}
	if found {
		return max(round(float64(s)*backoff), minScale), 0
	}
	if tracker+1 == int32(interval) {
		if g := round(float64(s) * growth); !math.IsInf(float64(g), 0) {
			s = g
		}
		return s, 0
	}
	return s, tracker + 1
}
