package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestLossGradients(t *testing.T) {
	rng := newRNG(t)
	for _, v := range []int{1, 2, 7, 33} {
		n := pick(rng)
		t.Run("CrossEntropy", func(t *testing.T) {
			logits := randn(rng, n*v, 3)
			labels := make([]int, n)
			for i := range labels {
				labels[i] = rng.IntN(v)
				if i%3 == 1 {
					labels[i] = -100
				}
			}
			losses := make([]float64, n)
			const scale = 0.37
			loss := func() float64 {
				crossEntropyKernel(losses, logits, labels, v, -100)
				var s float64
				for _, l := range losses {
					s += l
				}
				return scale * s
			}
			dl := make([]float64, n*v)
			crossEntropyBackwardKernel(dl, logits, labels, v, scale, -100)
			checkGrad(t, rng, loss, gradInput{"logits", logits, dl})
		})
		t.Run("MSE", func(t *testing.T) {
			pred, target := randn(rng, n, 1), randn(rng, n, 1)
			losses, dp := make([]float64, n), make([]float64, n)
			const scale = 1.0 / 3
			mseBackwardKernel(dp, pred, target, scale)
			checkGrad(t, rng, func() float64 {
				mseKernel(losses, pred, target)
				var s float64
				for _, l := range losses {
					s += l
				}
				return scale * s
			}, gradInput{"pred", pred, dp})
		})
	}
}

func TestCrossEntropyValues(t *testing.T) {
	b := New()
	// Rows: logits [0, ln 3] label 1 → −log(3/4); [1000, 0] label 1 → 1000 (stable); any row labelled −100 → 0.
	logits := []float32{0, float32(math.Log(3)), 1000, 0, 5, -5}
	for _, ldt := range []tensor.DType{tensor.I32, tensor.I64} {
		t.Run(ldt.String()+" labels", func(t *testing.T) {
			L := put(t, b, tensor.F32, logits, 3, 2)
			labels := mustAlloc(t, b, ldt, 3)
			if ldt == tensor.I32 {
				_ = b.Upload(labels, []int32{1, 1, -100})
			} else {
				_ = b.Upload(labels, []int64{1, 1, -100})
			}
			losses := mustAlloc(t, b, tensor.F32, 3)
			count, err := b.CrossEntropy(losses, L, labels, -100)
			if err != nil {
				t.Fatal(err)
			}
			if count != 2 {
				t.Errorf("count = %d, want 2 (one row ignored)", count)
			}
			near(t, "losses", get(t, b, losses), []float64{-math.Log(0.75), 1000, 0}, 1e-6)
			dl := mustAlloc(t, b, tensor.BF16, 3, 2)
			if err := b.CrossEntropyBackward(dl, L, labels, 0.5, -100, nil); err != nil {
				t.Fatal(err)
			}
			near(t, "dlogits", get(t, b, dl), []float64{0.5 * 0.25, 0.5 * (0.75 - 1), 0.5, -0.5, 0, 0}, 1.0/256)
		})
	}
	t.Run("a label outside [0, V) other than ignore_index is an error", func(t *testing.T) {
		labels := mustAlloc(t, b, tensor.I64, 3)
		_ = b.Upload(labels, []int64{0, 2, 1})
		_, err := b.CrossEntropy(mustAlloc(t, b, tensor.F32, 3), put(t, b, tensor.F32, logits, 3, 2), labels, -100)
		if !errorIs(err, tensor.ErrArgument) {
			t.Fatalf("err = %v, want ErrArgument", err)
		}
	})
	t.Run("losses must be F32", func(t *testing.T) {
		labels := mustAlloc(t, b, tensor.I64, 3)
		_, err := b.CrossEntropy(mustAlloc(t, b, tensor.BF16, 3), put(t, b, tensor.F32, logits, 3, 2), labels, -100)
		if !errorIs(err, tensor.ErrDType) {
			t.Fatalf("err = %v, want ErrDType", err)
		}
	})
}

func TestMSEValues(t *testing.T) {
	b := New()
	pred := put(t, b, tensor.BF16, []float32{1, 2, 3}, 3)
	target := put(t, b, tensor.F32, []float32{0, 2, 5}, 3)
	losses, dp := mustAlloc(t, b, tensor.F32, 3), mustAlloc(t, b, tensor.F32, 3)
	if err := b.MSELoss(losses, pred, target); err != nil {
		t.Fatal(err)
	}
	near(t, "losses", get(t, b, losses), []float64{1, 0, 4}, 0)
	if err := b.MSELossBackward(dp, pred, target, 0.5, nil); err != nil {
		t.Fatal(err)
	}
	near(t, "dpred", get(t, b, dp), []float64{1, 0, -2}, 0)
}
