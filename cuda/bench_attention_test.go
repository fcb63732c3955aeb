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
		bert       bool     // as BERT's layers call it: a key mask of zeros and Q, K, V, O in the (B, T, H, D) rows layout
	}{
		{64, 12, 512, 64, 0, false, 0, []string{"", "dq", "dkdv"}, false},
		{64, 12, 512, 64, 0, false, 0.1, []string{"", "dq", "dkdv"}, false}, // BERT training: dropout 0.1
		{64, 12, 512, 64, 0, false, 0.1, []string{"", "dq", "dkdv"}, true},  // the call of BERT-base's 64×512 step
		{32, 12, 128, 64, 0, false, 0.1, []string{""}, false},               // BERT at 32×128
		{32, 12, 128, 64, 0, false, 0, []string{"", "dq", "dkdv"}, false},   // the same without dropout
		{8, 32, 2048, 128, 0, true, 0, []string{"", "dq", "dkdv"}, false},
		{8, 32, 2048, 128, 0, false, 0, []string{""}, false},
		{8, 32, 2048, 64, 0, true, 0, []string{""}, false},              // a decoder with 64-wide heads (Llama-3.2-1B)
		{8, 9, 2048, 64, 3, true, 0, []string{"", "dq", "dkdv"}, false}, // SmolLM2-135M: GQA 9/3
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
			op := func(x *tensor.Tensor, h int) tensor.AttnOperand {
				if !c.bert {
					return tensor.AttnOperand{T: x}
				}
				return tensor.AttnOperand{T: x, StrideB: c.T * h * c.D, StrideH: c.D, StrideT: h * c.D}
			}
			a = tensor.AttentionArgs{B: c.B, Hq: c.H, Hkv: hkv, Tq: c.T, Tk: c.T, D: c.D,
				Q: op(mk(bf, n, true), c.H), K: op(mk(bf, nkv, true), hkv), V: op(mk(bf, nkv, true), hkv),
				O: op(mk(bf, n, false), c.H), LSE: mk(tensor.F32, c.B*c.H*c.T, false),
				Scale: float32(1 / math.Sqrt(float64(c.D))), Causal: c.causal, DropoutP: c.p, Seed: 1, Offset: 0}
			if c.bert {
				a.Mask = mk(tensor.F32, c.B*c.T, false)
				if err := gpu.Fill(a.Mask, 0); err != nil {
					tb.Fatal(err)
				}
			}
			if c.p > 0 { // as the attention layer trains: the forward stores the keep bits for the backward
				a.KeepBits = mk(tensor.I32, tensor.AttentionKeepBitsLen(c.B, c.H, c.T, c.T), false)
			}
			ba = tensor.AttentionBackwardArgs{AttentionArgs: a, DO: op(mk(bf, n, true), c.H),
				DQ: op(mk(bf, n, false), c.H), DK: op(mk(bf, nkv, false), hkv), DV: op(mk(bf, nkv, false), hkv)}
		}
		fwdFlops := 4 * float64(c.B*c.H) * float64(c.T) * float64(c.T) * float64(c.D)
		if c.causal {
			fwdFlops /= 2
		}
		name := fmt.Sprintf("bf16 %dx%dx%dx%d causal=%v p=%v", c.B, c.H, c.T, c.D, c.causal, c.p)
		if hkv != c.H {
			name = fmt.Sprintf("bf16 %dx%d/%dx%dx%d causal=%v p=%v", c.B, c.H, hkv, c.T, c.D, c.causal, c.p)
		}
		if c.bert {
			name += " bert"
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
