package amp_test

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// A recipe's precision gives the autocast policy and the scaler it needs: PyTorch's GradScaler defaults under
// FP16, a disabled scaler (scale 1) under BF16 and FP32.
func ExampleParsePrecision() {
	b := cpu.New()
	for _, name := range []string{"fp16", "bf16", "fp32"} {
		p, err := amp.ParsePrecision(name)
		if err != nil {
			fmt.Println(err)
			return
		}
		s, err := amp.NewGradScalerFor(b, p)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(name, p.GemmDType(), s.Enabled(), s.Scale())
	}
	// Output:
	// fp16 F16 true 65536
	// bf16 BF16 false 1
	// fp32 F32 false 1
}

// Which dtype each op class returns under BF16 autocast (PyTorch's CUDA autocast lists).
func ExamplePolicy_OutputDType() {
	p := amp.BF16
	fmt.Println(p.OutputDType(amp.LowerPrecision, tensor.F32, tensor.F32)) // a Linear on FP32 activations
	fmt.Println(p.OutputDType(amp.FP32Class, tensor.BF16))                 // LayerNorm, softmax, losses
	fmt.Println(p.OutputDType(amp.Promote, tensor.BF16, tensor.F32))       // mixed inputs: the wider type
	fmt.Println(p.Disabled().OutputDType(amp.LowerPrecision, tensor.F32))  // autocast(enabled=False)
	// Output:
	// BF16
	// F32
	// F32
	// F32
}

// One FP16 optimizer step whose gradients overflowed: Unscale finds the Inf, Step skips the optimizer, and
// Update halves the scale (backoff_factor 0.5), as torch.amp.GradScaler does.
func ExampleGradScaler() {
	b := cpu.New()
	s, err := amp.NewGradScalerFor(b, amp.FP16)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := b.Alloc(tensor.F32, 3) // a gradient accumulated by a backward seeded with s.Scale()
	_ = b.Upload(g, []float32{65536, float32(math.Inf(1)), -131072})
	grads := []*tensor.Tensor{g}
	if err := s.Unscale(grads); err != nil {
		fmt.Println(err)
		return
	}
	norm, _ := amp.ClipGradNorm(b, grads, 1.0) // after Unscale: the true norm (here +Inf)
	skipped, _ := s.Step(func() error { fmt.Println("AdamW step"); return nil })
	found := s.FoundInf() // this step's check; Update clears it
	_ = s.Update()
	fmt.Println(norm, found, skipped, s.Scale())
	// Output: +Inf true true 32768
}
