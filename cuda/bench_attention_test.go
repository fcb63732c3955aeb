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

// BenchmarkAttention times the fused attention kernels (Attention, AttentionBackward) in BF16 at BERT-base's
// (B, H, T, D) = (64, 12, 512, 64) without a mask (and at attention dropout 0.1, as BERT trains), decoders'
// (8, 32, 2048, 128) and (8, 32, 2048, 64) causal and SmolLM2-135M's GQA 9/3 (8, 9, 2048, 64) causal, with CUDA
// events, and reports the median time and TFLOP/s counted as FlashAttention counts them: forward 4·B·H·T²·D
// (the two products), halved when causal; backward 2.5× the forward (five products; the dQ pass's extra
// products for Δ and the recomputed S and dP are not counted). tools/reference/bench_attention.py times
// PyTorch's scaled_dot_product_attention on the same shapes. Forward variants (fwd_sb, fwd_db, fwd_bc128,
// fwd_m2, fwd_m1, fwd_m1o4, fwd_m1s3, fwd_s3, fwd_h3, fwd_h3s3: kernels/attention.cu) are timed beside the default. The backward
// ("bwd": the default, attnBwdDefault) beside the variants of TUNE_ATTN_BWD ("v2": the two kernels on 3-D
// grids, the default before v8; "v3": longest-first block order, GQA dK/dV per query head; "v4": v3 with two
// key tiles per warp in the D = 64 dK/dV kernel; "v5"/"v6": v2/v3 with the D = 64 kernels at three blocks
// per SM; "v7": v3 with the D = 64 kernels in half-tile steps at three blocks per SM; "v8": v7 with
// quarter-tile dK/dV steps; "v9"/"v10": v3/v8 without the GQA split; "v11": v8 with three-stage rings; "v12": v8 with the dK/dV kernel at four blocks per SM), earlier designs ("dq2": the two-sweep dQ
// kernel; "smq": the one-sweep dQ kernel reading Q and dO from shared memory; "nokeep": the backward drawing
// the dropout bits once itself instead of reading those the forward stored in KeepBits; "redraw": every
// kernel drawing its own) and single kernels ("only dq", "only dkdv", "vN only ...": still counted against the
// whole backward's FLOPs, so their times add up; "only dkdv" with dropout reads bits nobody stored, which is
// fine for timing).
func BenchmarkAttention(b *testing.B) {
	gpu := openOrSkip(b)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		B, H, T, D int
		hkv        int // KV heads (GQA); 0 means H
		causal     bool
		p          float32  // attention dropout
		fwd, bwd   []string // forward variants, backward parts ("" both kernels)
	}{
		{64, 12, 512, 64, 0, false, 0, []string{"", "_sb", "_bc128", "_m1", "_m1o4", "_m1s3", "_s3", "_h3", "_h3s3"}, []string{"", "v2", "v3", "v4", "v5", "v7", "v8", "v11", "v12", "dq2", "smq", "dq", "dkdv", "v2 dq", "v2 dkdv", "v4 dkdv", "v5 dq", "v5 dkdv", "v7 dq", "v7 dkdv", "v11 dq", "v11 dkdv", "v12 dkdv"}},
		{64, 12, 512, 64, 0, false, 0.1, []string{"", "_m1", "_h3"}, []string{"", "v2", "v3", "v4", "v5", "v7", "v8", "v11", "nokeep", "dq2", "redraw", "dq", "dkdv", "v2 dq", "v2 dkdv"}}, // BERT training: dropout 0.1
		{8, 32, 2048, 128, 0, true, 0, []string{"", "_db", "_m2"}, []string{"", "v3", "v8", "dq2", "dq", "dkdv", "v3 dq", "v3 dkdv"}},
		{8, 32, 2048, 128, 0, false, 0, []string{""}, []string{"", "v3", "dq2"}},
		{8, 32, 2048, 64, 0, true, 0, []string{"", "_m1", "_h3"}, []string{"", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "dq2"}}, // a decoder with 64-wide heads (Llama-3.2-1B)
		{8, 9, 2048, 64, 3, true, 0, []string{"", "_m1", "_m1s3", "_h3", "_h3s3"}, []string{"", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "dq", "dkdv", "v2 dq", "v2 dkdv", "v3 dq", "v3 dkdv", "v4 dkdv", "v6 dq", "v6 dkdv", "v7 dq", "v7 dkdv", "v9 dkdv", "v10 dkdv", "v11 dq", "v11 dkdv", "v12 dkdv"}}, // SmolLM2-135M: GQA 9/3
	} {
		hkv := c.hkv
		if hkv == 0 {
			hkv = c.H
		}
		n, nkv := c.B*c.H*c.T*c.D, c.B*hkv*c.T*c.D
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
		bf := tensor.BF16
		a := tensor.AttentionArgs{B: c.B, Hq: c.H, Hkv: hkv, Tq: c.T, Tk: c.T, D: c.D,
			Q: tensor.AttnOperand{T: mk(bf, n, true)}, K: tensor.AttnOperand{T: mk(bf, nkv, true)}, V: tensor.AttnOperand{T: mk(bf, nkv, true)},
			O: tensor.AttnOperand{T: mk(bf, n, false)}, LSE: mk(tensor.F32, c.B*c.H*c.T, false),
			Scale: float32(1 / math.Sqrt(float64(c.D))), Causal: c.causal, DropoutP: c.p, Seed: 1, Offset: 0}
		if c.p > 0 { // as the attention layer trains: the forward stores the keep bits for the backward
			a.KeepBits = mk(tensor.I32, tensor.AttentionKeepBitsLen(c.B, c.H, c.T, c.T), false)
		}
		ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: tensor.AttnOperand{T: mk(bf, n, true)},
			DQ: tensor.AttnOperand{T: mk(bf, n, false)}, DK: tensor.AttnOperand{T: mk(bf, nkv, false)}, DV: tensor.AttnOperand{T: mk(bf, nkv, false)}}
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
		var passes []pass
		for _, v := range c.fwd {
			passes = append(passes, pass{"fwd" + v, fwdFlops, func() error { return gpu.Attention(a) },
				func() func() { return cuda.SetAttnFwdVariant(v) }})
		}
		for _, part := range c.bwd {
			n := "bwd"
			switch part {
			case "":
			case "redraw", "dq2", "smq", "nokeep", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12":
				n += " " + part
			case "v2 dq", "v2 dkdv", "v3 dq", "v3 dkdv", "v4 dkdv", "v5 dq", "v5 dkdv", "v6 dq", "v6 dkdv", "v7 dq", "v7 dkdv", "v8 dkdv", "v9 dkdv", "v10 dkdv", "v11 dq", "v11 dkdv", "v12 dkdv":
				v, k, _ := strings.Cut(part, " ")
				n += " " + v + " only " + k
			default:
				n += " only " + part
			}
			passes = append(passes, pass{n, 2.5 * fwdFlops, func() error { return gpu.AttentionBackward(ba) },
				func() func() {
					def := cuda.SetAttnBwdVariant(cuda.AttnBwdDefault) // the default unless the pass names a variant
					r := func() func() {
						switch part {
						case "redraw": // every kernel draws its own keep bits (the earlier design)
							r1, r2 := cuda.SetAttnNoKeepBits(true), cuda.SetAttnBwdRedraw(true)
							return func() { r2(); r1() }
						case "nokeep": // KeepBits ignored: the dQ kernel draws the bits and stores them for dK/dV
							return cuda.SetAttnNoKeepBits(true)
						case "dq2", "smq": // the two-sweep dQ kernel (the earlier design); Q from shared memory
							return cuda.SetAttnDQVariant(part)
						case "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12": // TUNE_ATTN_BWD=v3: longest-first block order, GQA dK/dV split per query head; v4: two key tiles per warp; v5/v6: v2/v3 at three blocks per SM
							return cuda.SetAttnBwdVariant(part)
						case "v2 dq", "v2 dkdv", "v3 dq", "v3 dkdv", "v4 dkdv", "v5 dq", "v5 dkdv", "v6 dq", "v6 dkdv", "v7 dq", "v7 dkdv", "v8 dkdv", "v9 dkdv", "v10 dkdv", "v11 dq", "v11 dkdv", "v12 dkdv":
							v, k, _ := strings.Cut(part, " ")
							r1, r2 := cuda.SetAttnBwdVariant(v), cuda.SetAttnBwdOnly(k)
							return func() { r2(); r1() }
						}
						return cuda.SetAttnBwdOnly(part)
					}()
					return func() { r(); def() }
				}})
		}
		for _, pass := range passes {
			b.Run(pass.name+" "+name, func(b *testing.B) {
				defer pass.restore()()
				for i := 0; i < 3; i++ {
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
		for _, x := range live {
			gpu.Free(x)
		}
	}
}
