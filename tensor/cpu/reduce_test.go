package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestGlobalNorm(t *testing.T) {
	b := New()
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	big := make([]float32, 70000) // several parallel chunks
	for i := range big {
		big[i] = 1e30 // squares overflow float32 but not float64
	}
	cases := []struct {
		name string
		ts   []*tensor.Tensor
		want float64
	}{
		{"empty list", nil, 0},
		{"3-4-5 across an F32 and a BF16 tensor", []*tensor.Tensor{put(t, b, tensor.F32, []float32{3}, 1), put(t, b, tensor.BF16, []float32{4}, 1)}, 5},
		{"F16 tensor of ones", []*tensor.Tensor{put(t, b, tensor.F16, []float32{1, 1, 1, 1}, 2, 2)}, 2},
		{"float64 accumulation keeps 1e30 values finite", []*tensor.Tensor{put(t, b, tensor.F32, big, len(big))}, 1e30 * math.Sqrt(float64(len(big)))},
		{"Inf gives Inf", []*tensor.Tensor{put(t, b, tensor.F32, []float32{1, inf}, 2)}, math.Inf(1)},
		{"NaN gives NaN", []*tensor.Tensor{put(t, b, tensor.F32, []float32{nan, 1}, 2)}, math.NaN()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := b.GlobalNorm(c.ts)
			if err != nil {
				t.Fatal(err)
			}
			if !(math.IsNaN(got) && math.IsNaN(c.want)) && !(got == c.want || math.Abs(got-c.want) <= 1e-6*c.want) {
				t.Fatalf("norm = %v, want %v", got, c.want)
			}
		})
	}
	if _, err := b.GlobalNorm([]*tensor.Tensor{put(t, b, tensor.F32, []float32{1}, 1), nil}); !errorIs(err, tensor.ErrArgument) {
		t.Errorf("a nil tensor in the list: err = %v, want ErrArgument", err)
	}
}

func TestNonFiniteCheckAndUnscale(t *testing.T) {
	b := New()
	inf, nan := float32(math.Inf(-1)), float32(math.NaN())
	cases := []struct {
		name     string
		vals     [][]float32
		invScale float32
		found    bool
		want     [][]float64
	}{
		{"finite values are unscaled", [][]float32{{2, -4}, {8}}, 0.5, false, [][]float64{{1, -2}, {4}}},
		{"Inf in the second tensor is found; every tensor is still unscaled", [][]float32{{2}, {inf, 6}}, 0.5, true, [][]float64{{1}, {math.Inf(-1), 3}}},
		{"NaN is found and stays NaN", [][]float32{{nan, 2}}, 0.25, true, [][]float64{{math.NaN(), 0.5}}},
		{"invScale 1 leaves values alone but still checks", [][]float32{{3, nan}}, 1, true, [][]float64{{3, math.NaN()}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ts []*tensor.Tensor
			for _, v := range c.vals {
				ts = append(ts, put(t, b, tensor.F32, v, len(v)))
			}
			found, err := b.NonFiniteCheckAndUnscale(ts, c.invScale)
			if err != nil {
				t.Fatal(err)
			}
			if found != c.found {
				t.Errorf("found = %v, want %v", found, c.found)
			}
			for i, x := range ts {
				near(t, "tensor", get(t, b, x), c.want[i], 0)
			}
		})
	}
	t.Run("a half tensor is ErrDType and nothing is unscaled", func(t *testing.T) {
		f := put(t, b, tensor.F32, []float32{2}, 1)
		_, err := b.NonFiniteCheckAndUnscale([]*tensor.Tensor{f, put(t, b, tensor.BF16, []float32{2}, 1)}, 0.5)
		if !errorIs(err, tensor.ErrDType) {
			t.Fatalf("err = %v, want ErrDType", err)
		}
		near(t, "F32 tensor", get(t, b, f), []float64{2}, 0)
	})
}
