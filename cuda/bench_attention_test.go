//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// BenchmarkAttention times the fused attention kernels (Attention, AttentionBackward) in BF16 at BERT-base's
// (B, H, T, D) = (64, 12, 512, 64) without a mask (and at attention dropout 0.1, as BERT trains; at 32 × 128 with
// and without it), decoders' (8, 32, 2048, 128) and (8, 32, 2048, 64) causal and SmolLM2-135M's GQA 9/3
// (8, 9, 2048, 64) causal, with CUDA
// events, and reports the median time and TFLOP/s counted as FlashAttention counts them: forward 4·B·H·T²·D
// (the two products), halved when causal; backward 2.5× the forward (five products; the dQ pass's extra
// products for Δ and the recomputed S and dP are not counted). tools/reference/bench_attention.py times
// PyTorch's scaled_dot_product_attention on the same shapes. "fwd" and "bwd" are the whole ops; "bwd only dq"
// and "bwd only dkdv" time one backward kernel (still counted against the whole backward's FLOPs, so their
// times add up; "only dkdv" with dropout reads bits nobody stored, which is fine for timing).
// -test.bench 'Attention/(fwd|bwd)_bf16_' selects the whole ops.
func BenchmarkAttention(b *testing.B) {
	gpu := openOrSkip(b)
	for k, c := range []struct {
		B, H, T, D int
		hkv        int // KV heads (GQA); 0 means H
		causal     bool
		p          float32  // attention dropout
		bwd        []string // backward parts ("" both kernels)
	}{
		{64, 12, 512, 64, 0, false, 0, []string{"", "dq", "dkdv"}},
		{64, 12, 512, 64, 0, false, 0.1, []string{"", "dq", "dkdv"}}, // BERT training: dropout 0.1
		{32, 12, 128, 64, 0, false, 0.1, []string{""}},               // BERT at 32×128
		{32, 12, 128, 64, 0, false, 0, []string{"", "dq", "dkdv"}},   // the same without dropout
		{8, 32, 2048, 128, 0, true, 0, []string{"", "dq", "dkdv"}},
		{8, 32, 2048, 128, 0, false, 0, []string{""}},
		{8, 32, 2048, 64, 0, true, 0, []string{""}},              // a decoder with 64-wide heads (Llama-3.2-1B)
		{8, 9, 2048, 64, 3, true, 0, []string{"", "dq", "dkdv"}}, // SmolLM2-135M: GQA 9/3
	} {
		hkv := c.hkv
		if hkv == 0 {
			hkv = c.H
		}
		n, nkv := c.B*c.H*c.T*c.D, c.B*hkv*c.T*c.D
		var live []*tensor.Tensor
		var tb testing.TB // the benchmark running setup
		rng := rand.New(rand.NewPCG(3, uint64(k)))
		mk := func(dt tensor.DType, n int, fill bool) *tensor.Tensor {
			x, err := gpu.Alloc(dt, n)
			if err != nil {
				tb.Fatal(err)
			}
			live = append(live, x)
			if fill {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				if err := gpu.Upload(x, v); err != nil {
					tb.Fatal(err)
				}
			}
			return x
		}
		var a tensor.AttentionArgs
		var ba tensor.AttentionBackwardArgs
		// setup allocates and fills the shape's operands the first time one of its benchmarks runs, so that a
		// -test.bench filter selecting one shape does not pay for the others.
		once := false
		setup := func(b *testing.B) {
			if once {
				return
			}
			once, tb = true, b
			bf := tensor.BF16
			a = tensor.AttentionArgs{B: c.B, Hq: c.H, Hkv: hkv, Tq: c.T, Tk: c.T, D: c.D,
				Q: tensor.AttnOperand{T: mk(bf, n, true)}, K: tensor.AttnOperand{T: mk(bf, nkv, true)}, V: tensor.AttnOperand{T: mk(bf, nkv, true)},
				O: tensor.AttnOperand{T: mk(bf, n, false)}, LSE: mk(tensor.F32, c.B*c.H*c.T, false),
				Scale: float32(1 / math.Sqrt(float64(c.D))), Causal: c.causal, DropoutP: c.p, Seed: 1, Offset: 0}
			if c.p > 0 { // as the attention layer trains: the forward stores the keep bits for the backward
				a.KeepBits = mk(tensor.I32, tensor.AttentionKeepBitsLen(c.B, c.H, c.T, c.T), false)
			}
			ba = tensor.AttentionBackwardArgs{AttentionArgs: a, DO: tensor.AttnOperand{T: mk(bf, n, true)},
				DQ: tensor.AttnOperand{T: mk(bf, n, false)}, DK: tensor.AttnOperand{T: mk(bf, nkv, false)}, DV: tensor.AttnOperand{T: mk(bf, nkv, false)}}
		}
		fwdFlops := 4 * float64(c.B*c.H) * float64(c.T) * float64(c.T) * float64(c.D)
		if c.causal {
			fwdFlops /= 2
		}
		name := fmt.Sprintf("bf16 %dx%dx%dx%d causal=%v p=%v", c.B, c.H, c.T, c.D, c.causal, c.p)
		if hkv != c.H {
			name = fmt.Sprintf("bf16 %dx%d/%dx%dx%d causal=%v p=%v", c.B, c.H, hkv, c.T, c.D, c.causal, c.p)
		}
		type pass struct {
			name    string
			flops   float64
			fn      func() error
			restore func() func()
		}
		passes := []pass{{"fwd", fwdFlops, func() error { return gpu.Attention(a) }, func() func() { return func() {} }}}
		for _, part := range c.bwd {
			n := "bwd"
			if part != "" {
				n += " only " + part
			}
			passes = append(passes, pass{n, 2.5 * fwdFlops, func() error { return gpu.AttentionBackward(ba) },
				func() func() { return cuda.SetAttnBwdOnly(part) }})
		}
		for _, pass := range passes {
			b.Run(pass.name+" "+name, func(b *testing.B) {
				setup(b)
				defer pass.restore()()
				med := medianMs(b, gpu, 3, pass.fn)
				b.ReportMetric(med*1e3, "µs/op")
				b.ReportMetric(pass.flops/(med*1e-3)/1e12, "TFLOP/s")
			})
		}
		for _, x := range live {
			gpu.Free(x)
		}
	}
}
