package tensor_test

import (
	"errors"
	"fmt"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// The package tour's first steps: allocate, upload, run an op in BF16 storage, download.
func Example() {
	b := cpu.New()
	x, _ := b.Alloc(tensor.F32, 2, 3)
	if err := b.Upload(x, []float32{-2, -1, 0, 1, 2, 3}); err != nil {
		panic(err)
	}
	y, _ := b.Alloc(tensor.BF16, 2, 3)
	if err := b.GELU(y, x); err != nil { // computed in FP32, rounded to BF16 on store
		panic(err)
	}
	out := make([]float32, y.Numel())
	if err := b.Download(out, y); err != nil {
		panic(err)
	}
	fmt.Println(y, out)
	// Output: BF16[2 3] [-0.045410156 -0.15820312 0 0.83984375 1.953125 3]
}

// A Linear layer's forward y = x·Wᵀ + b as one GEMM with the bias fused, W stored (out, in) as PyTorch stores it.
func ExampleGemmArgs() {
	b := cpu.New()
	n, in, out := 2, 3, 2
	x, _ := b.Alloc(tensor.F32, n, in)
	w, _ := b.Alloc(tensor.F32, out, in)
	bias, _ := b.Alloc(tensor.F32, out)
	y, _ := b.Alloc(tensor.F32, n, out)
	_ = b.Upload(x, []float32{1, 2, 3, 4, 5, 6})
	_ = b.Upload(w, []float32{1, 0, 0, 0, 1, 1})
	_ = b.Upload(bias, []float32{10, 20})
	err := b.Gemm(tensor.GemmArgs{M: n, N: out, K: in, A: x, B: w, TransB: true, C: y, Alpha: 1, Bias: bias})
	if err != nil {
		panic(err)
	}
	got := make([]float32, y.Numel())
	_ = b.Download(got, y)
	fmt.Println(got)
	// Output: [11 25 14 31]
}

// Views carve tensors out of one buffer without copying: a weight and its bias in one flat parameter buffer.
func ExampleTensor_View() {
	b := cpu.New()
	out, in := 2, 3
	flat, _ := b.Alloc(tensor.F32, out*in+out)
	w, _ := flat.View(0, out, in)
	bias, _ := flat.View(out*in, out)
	fmt.Println(w, w.Offset, bias, bias.Offset)
	_, err := flat.View(out*in, out+1)
	fmt.Println(errors.Is(err, tensor.ErrShape))
	// Output:
	// F32[2 3] 0 F32[2] 6
	// true
}

// Every op error is an *OpError naming the op and its arguments' shapes, wrapping a sentinel.
func ExampleOpError() {
	b := cpu.New()
	x, _ := b.Alloc(tensor.F32, 2, 3)
	y, _ := b.Alloc(tensor.F32, 2, 2)
	err := b.Add(y, x, x) // Add needs equal element counts
	fmt.Println(err)
	var oe *tensor.OpError
	if errors.As(err, &oe) {
		fmt.Println(oe.Op, oe.Shapes, errors.Is(err, tensor.ErrShape))
	}
	// Output:
	// tensor: Add [2 2] [2 3] [2 3]: shape mismatch: a has 6 elements, want 4
	// Add [[2 2] [2 3] [2 3]] true
}

// RoundTo shows what storing a value in a half dtype keeps.
func ExampleRoundTo() {
	fmt.Println(tensor.RoundTo(tensor.F16, 0.1), tensor.RoundTo(tensor.BF16, 0.1), tensor.RoundTo(tensor.F16, 70000))
	// Output: 0.099975586 0.100097656 +Inf
}

// PhiloxKeep is the dropout draw every backend makes: the same (seed, offset) gives the same mask anywhere.
func ExamplePhiloxKeep() {
	kept := 0
	for i := 0; i < 10000; i++ {
		if tensor.PhiloxKeep(42, 0, i, 0.1) {
			kept++
		}
	}
	fmt.Println(kept > 8900 && kept < 9100, tensor.PhiloxCounters(10000))
	// Output: true 1250
}
