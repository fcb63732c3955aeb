//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// BenchmarkAttentionF32 times fused attention with F32 operands (the chunked GEMM path, cuda/attention_f32.go)
// at BERT-base's (64, 12, 512, 64) without a mask (and with attention dropout 0.1, as BERT trains) and at
// (8, 32, 2048, 128) causal, forward and backward, with CUDA events; it reports the median time and TFLOP/s
// counted as BenchmarkAttention counts them (forward 4·B·H·T²·D, halved when causal; backward 2.5×). Each pass
// runs with the row kernels ("sgemm") and without them ("sgemm-norows": the products alone, wrong results), at
// several score-scratch bounds (the "sNN" suffix, MiB: cuda.SetAttnF32Scratch) and, when causal, row blocks
// ("cbNNN": cuda.SetAttnF32CausalBlock). tools/reference/bench_attention.py --dtypes fp32 times PyTorch's FP32
// scaled_dot_product_attention (memory-efficient and math backends) on the same shapes.
func BenchmarkAttentionF32(b *testing.B) {
	gpu := openOrSkip(b)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		B, H, T, D int
		causal     bool
		p          float32
		scratch    []int // MiB
		blocks     []int // causal row blocks
	}{
		{64, 12, 512, 64, false, 0, []int{64, 256}, []int{0}},
		{64, 12, 512, 64, false, 0.1, []int{256}, []int{0}},
		{8, 32, 2048, 128, true, 0, []int{256}, []int{256, 512}},
		{32, 12, 128, 64, false, 0.1, []int{256}, []int{0}}, // BERT-base at 32×128
	} {
		n := c.B * c.H * c.T * c.D
		var live []*tensor.Tensor
		mk := func(dt tensor.DType, n int, fill bool) *tensor.Tensor {
			x, err := gpu.Alloc(dt, n)
			if err != nil {
				b.Fatal(err)
			}
			live = append(live, x)
			if fill {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				if err := gpu.Upload(x, v); err != nil {
					b.Fatal(err)
				}
			}
			return x
		}
		f := tensor.F32
		a := tensor.AttentionArgs{B: c.B, Hq: c.H, Hkv: c.H, Tq: c.T, Tk: c.T, D: c.D,
			Q: tensor.AttnOperand{T: mk(f, n, true)}, K: tensor.AttnOperand{T: mk(f, n, true)}, V: tensor.AttnOperand{T: mk(f, n, true)},
			O: tensor.AttnOperand{T: mk(f, n, false)}, LSE: mk(tensor.F32, c.B*c.H*c.T, false),
			Scale: float32(1 / math.Sqrt(float64(c.D))), Causal: c.causal, DropoutP: c.p, Seed: 1}
		ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: tensor.AttnOperand{T: mk(f, n, true)},
			DQ: tensor.AttnOperand{T: mk(f, n, false)}, DK: tensor.AttnOperand{T: mk(f, n, false)}, DV: tensor.AttnOperand{T: mk(f, n, false)}}
		fwdFlops := 4 * float64(c.B*c.H) * float64(c.T) * float64(c.T) * float64(c.D)
		if c.causal {
			fwdFlops /= 2
		}
		for _, mode := range []string{"sgemm", "sgemm-norows"} {
			if strings.HasSuffix(mode, "-norows") && (c.p > 0 || c.causal) {
				continue
			}
			for _, sm := range c.scratch {
				for _, cb := range c.blocks {
					for _, pass := range []struct {
						name  string
						flops float64
						fn    func() error
					}{{"fwd", fwdFlops, func() error { return gpu.Attention(a) }}, {"bwd", 2.5 * fwdFlops, func() error { return gpu.AttentionBackward(ba) }}} {
						name := fmt.Sprintf("%s f32 %s %dx%dx%dx%d causal=%v p=%v s%d", pass.name, mode, c.B, c.H, c.T, c.D, c.causal, c.p, sm)
						if cb > 0 {
							name += fmt.Sprintf(" cb%d", cb)
						}
						b.Run(name, func(b *testing.B) {
							defer cuda.SetAttnF32Scratch(sm << 20)()
							defer cuda.SetAttnF32NoRows(strings.HasSuffix(mode, "-norows"))()
							if cb > 0 {
								defer cuda.SetAttnF32CausalBlock(cb)()
							}
							for i := 0; i < 2; i++ {
								if err := pass.fn(); err != nil {
									b.Fatal(err)
								}
							}
							times := make([]float64, 0, b.N)
							b.ResetTimer()
							for i := 0; i < b.N; i++ {
								ms, err := gpu.Time(pass.fn)
								if err != nil {
									b.Fatal(err)
								}
								times = append(times, ms)
							}
							b.StopTimer()
							sort.Float64s(times)
							med := times[len(times)/2]
							b.ReportMetric(med*1e3, "µs/op")
							b.ReportMetric(pass.flops/(med*1e-3)/1e12, "TFLOP/s")
						})
					}
				}
			}
		}
		for _, x := range live {
			gpu.Free(x)
		}
	}
}
