//go:build cuda

package cuda_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// BenchmarkDecoderOps times the decoder kernels at Llama-3.2-1B training sizes (batch 8 × seq 2048 = 16384
// tokens, hidden 2048, MLP 8192, 32 query and 8 KV heads of 64) with CUDA events and reports the median time
// and the bandwidth of the fewest bytes each op must move (inputs read once, outputs written once), to compare
// with the H200's ~4.3 TB/s copy rate.
func BenchmarkDecoderOps(b *testing.B) {
	gpu := openOrSkip(b)
	rng := rand.New(rand.NewPCG(9, 10))
	const tok, C, I, B, T, Hq, Hkv, D = 16384, 2048, 8192, 8, 2048, 32, 8, 64
	var live []*tensor.Tensor
	pattern := make([]float32, 1<<20) // one MiB of normal values, tiled: drawing 10⁸ values per tensor is slow
	for i := range pattern {
		pattern[i] = float32(rng.NormFloat64())
	}
	mk := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		x, err := gpu.Alloc(dt, shape...)
		if err != nil {
			b.Fatal(err)
		}
		live = append(live, x)
		v := make([]float32, x.Numel())
		for i := 0; i < len(v); i += len(pattern) {
			copy(v[i:], pattern)
		}
		if err := gpu.Upload(x, v); err != nil {
			b.Fatal(err)
		}
		return x
	}
	bf, f32 := tensor.BF16, tensor.F32
	cases := []struct {
		name  string
		bytes float64
		setup func() func() error
	}{
		{"RMSNorm bf16→bf16 16384x2048", tok * C * 4, func() func() error {
			x, o, w, r := mk(bf, tok, C), mk(bf, tok, C), mk(bf, C), mk(f32, tok)
			return func() error { return gpu.RMSNorm(o, r, x, w, 1e-5) }
		}},
		{"RMSNorm f32→f32 16384x2048 (autocast residual)", tok * C * 8, func() func() error {
			x, o, w, r := mk(f32, tok, C), mk(f32, tok, C), mk(f32, C), mk(f32, tok)
			return func() error { return gpu.RMSNorm(o, r, x, w, 1e-5) }
		}},
		{"RMSNormBackward bf16 16384x2048", tok * C * 6, func() func() error {
			x, d, dx, w, dw, r := mk(bf, tok, C), mk(bf, tok, C), mk(bf, tok, C), mk(f32, C), mk(f32, C), mk(f32, tok)
			if err := gpu.RMSNorm(dx, r, x, w, 1e-5); err != nil {
				b.Fatal(err)
			}
			return func() error { return gpu.RMSNormBackward(dx, dw, d, x, w, r) }
		}},
		{"RoPE bf16 q+k in fused qkv 8x2048x(32+8+8)x64", float64(B*T*(Hq+Hkv)*D) * 4, func() func() error {
			qkv := mk(bf, B, T, Hq+2*Hkv, D)
			pos, err := gpu.Alloc(tensor.I32, B, T)
			if err != nil {
				b.Fatal(err)
			}
			live = append(live, pos)
			pv := make([]int32, B*T)
			for i := range pv {
				pv[i] = int32(i % T)
			}
			if err := gpu.Upload(pos, pv); err != nil {
				b.Fatal(err)
			}
			c, s := mk(f32, T, D/2), mk(f32, T, D/2)
			row := (Hq + 2*Hkv) * D
			q := tensor.AttnOperand{T: qkv, StrideB: T * row, StrideH: D, StrideT: row}
			kv, _ := qkv.View(Hq*D, qkv.Numel()-Hq*D)
			k := tensor.AttnOperand{T: kv, StrideB: T * row, StrideH: D, StrideT: row}
			return func() error {
				if err := gpu.RoPE(q, B, Hq, T, D, pos, c, s, false); err != nil {
					return err
				}
				return gpu.RoPE(k, B, Hkv, T, D, pos, c, s, false)
			}
		}},
		{"SwiGLU bf16 16384x8192", tok * I * 6, func() func() error {
			g, u, o := mk(bf, tok, I), mk(bf, tok, I), mk(bf, tok, I)
			return func() error { return gpu.SwiGLU(o, g, u) }
		}},
		{"SwiGLUBackward bf16 16384x8192", tok * I * 10, func() func() error {
			g, u, d, dg, du := mk(bf, tok, I), mk(bf, tok, I), mk(bf, tok, I), mk(bf, tok, I), mk(bf, tok, I)
			return func() error { return gpu.SwiGLUBackward(dg, du, d, g, u) }
		}},
		{"GELUTanh bf16 16384x8192", tok * I * 4, func() func() error {
			x, o := mk(bf, tok, I), mk(bf, tok, I)
			return func() error { return gpu.GELUTanh(o, x) }
		}},
		{"GELUTanhBackward bf16 16384x8192", tok * I * 6, func() func() error {
			x, d, o := mk(bf, tok, I), mk(bf, tok, I), mk(bf, tok, I)
			return func() error { return gpu.GELUTanhBackward(o, d, x) }
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			fn := c.setup()
			defer func() {
				for _, x := range live {
					gpu.Free(x)
				}
				live = nil
			}()
			med := medianMs(b, gpu, 2, fn)
			b.ReportMetric(med*1e3, "µs/op")
			b.ReportMetric(c.bytes/(med*1e-3)/1e9, "GB/s")
		})
	}
}
