//go:build cuda

package cuda_test

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// BenchmarkOps times the non-GEMM kernels at BERT-base training sizes (batch 64 × seq 512 = 32768 tokens,
// hidden 768, FFN 3072, 12 heads, vocabulary 30522; AdamW over 110M parameters) with CUDA events, and
// reports the median time and the bandwidth it gives for the fewest bytes the op must move (each input read
// once, each output written once), to compare with the H200's ~4.3 TB/s copy rate.
func BenchmarkOps(b *testing.B) {
	gpu := openOrSkip(b)
	rng := rand.New(rand.NewPCG(7, 8))
	const tok, C, F, V = 32768, 768, 3072, 30522
	var live []*tensor.Tensor // the current case's tensors, freed after it
	mk := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		x, err := gpu.Alloc(dt, shape...)
		if err != nil {
			b.Fatal(err)
		}
		live = append(live, x)
		v := make([]float32, x.Numel())
		for i := range v { // 1 Mi random values, repeated: the host generator would dominate a large case
			if i < 1<<20 {
				v[i] = float32(rng.NormFloat64())
			} else {
				v[i] = v[i-1<<20]
			}
		}
		if err := gpu.Upload(x, v); err != nil {
			b.Fatal(err)
		}
		return x
	}
	bf := tensor.BF16
	cases := []struct {
		name  string
		bytes float64
		setup func() func() error
	}{
		{"GELU bf16 32768x3072", tok * F * 4, func() func() error {
			x, o := mk(bf, tok, F), mk(bf, tok, F)
			return func() error { return gpu.GELU(o, x) }
		}},
		{"GELUBackward bf16 32768x3072", tok * F * 6, func() func() error {
			x, d, o := mk(bf, tok, F), mk(bf, tok, F), mk(bf, tok, F)
			return func() error { return gpu.GELUBackward(o, d, x) }
		}},
		{"Add bf16 32768x768", tok * C * 6, func() func() error {
			x, y, o := mk(bf, tok, C), mk(bf, tok, C), mk(bf, tok, C)
			return func() error { return gpu.Add(o, x, y) }
		}},
		{"Dropout bf16 32768x768", tok * C * 4, func() func() error {
			x, o := mk(bf, tok, C), mk(bf, tok, C)
			return func() error { return gpu.Dropout(o, x, 0.1, 42, 0) }
		}},
		{"LayerNorm bf16 32768x768", tok * C * 4, func() func() error {
			x, o, g, be := mk(bf, tok, C), mk(bf, tok, C), mk(tensor.F32, C), mk(tensor.F32, C)
			m, r := mk(tensor.F32, tok), mk(tensor.F32, tok)
			return func() error { return gpu.LayerNorm(o, m, r, x, g, be, 1e-12) }
		}},
		{"LayerNormBackward bf16 32768x768", tok * C * 6, func() func() error {
			x, d, dx, g := mk(bf, tok, C), mk(bf, tok, C), mk(bf, tok, C), mk(tensor.F32, C)
			m, r, dg, db := mk(tensor.F32, tok), mk(tensor.F32, tok), mk(tensor.F32, C), mk(tensor.F32, C)
			if err := gpu.LayerNorm(dx, m, r, x, g, g, 1e-12); err != nil {
				b.Fatal(err)
			}
			return func() error { return gpu.LayerNormBackward(dx, dg, db, d, x, g, m, r) }
		}},
		{"BiasGrad bf16 32768x3072", tok * F * 2, func() func() error {
			dy, db := mk(bf, tok, F), mk(tensor.F32, F)
			return func() error { return gpu.BiasGrad(db, dy) }
		}},
		{"BiasGrad bf16 32768x768", tok * C * 2, func() func() error {
			dy, db := mk(bf, tok, C), mk(tensor.F32, C)
			return func() error { return gpu.BiasGrad(db, dy) }
		}},
		{"BiasGrad bf16 32768x2304", tok * 3 * C * 2, func() func() error {
			dy, db := mk(bf, tok, 3*C), mk(tensor.F32, 3*C)
			return func() error { return gpu.BiasGrad(db, dy) }
		}},
		{"GELUBackwardRecompute+dbias bf16 32768x3072", tok * F * 8, func() func() error {
			x, d, o, db := mk(bf, tok, F), mk(bf, tok, F), mk(bf, tok, F), mk(tensor.F32, F)
			return func() error { return gpu.GELUBackwardRecompute(d, o, db, d, x) }
		}},
		{"Cast f32 to bf16 3072x768", F * C * 6, func() func() error {
			x, o := mk(tensor.F32, F, C), mk(bf, F, C)
			return func() error { return gpu.Cast(o, x) }
		}},
		{"Cast f32 to bf16 32768x768", tok * C * 6, func() func() error {
			x, o := mk(tensor.F32, tok, C), mk(bf, tok, C)
			return func() error { return gpu.Cast(o, x) }
		}},
		{"ResidualLayerNorm bf16+f32 32768x768 p=0.1", tok * C * 16, func() func() error {
			y, x, g, be := mk(bf, tok, C), mk(tensor.F32, tok, C), mk(tensor.F32, C), mk(tensor.F32, C)
			sum, o, oh, m, r := mk(tensor.F32, tok, C), mk(tensor.F32, tok, C), mk(bf, tok, C), mk(tensor.F32, tok), mk(tensor.F32, tok)
			return func() error {
				return gpu.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: sum, Out: o, OutHalf: oh, Mean: m, Rstd: r, Y: y, X: x,
					Gamma: g, Beta: be, Eps: 1e-12, DropoutP: 0.1, Seed: 1, Offset: 0})
			}
		}},
		{"ResidualLayerNormBackward f32 32768x768 p=0.1", tok * C * 14, func() func() error {
			y, x, g, be := mk(bf, tok, C), mk(tensor.F32, tok, C), mk(tensor.F32, C), mk(tensor.F32, C)
			sum, o, m, r := mk(tensor.F32, tok, C), mk(tensor.F32, tok, C), mk(tensor.F32, tok), mk(tensor.F32, tok)
			if err := gpu.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: sum, Out: o, Mean: m, Rstd: r, Y: y, X: x,
				Gamma: g, Beta: be, Eps: 1e-12}); err != nil {
				b.Fatal(err)
			}
			d, dy, dg, db := mk(tensor.F32, tok, C), mk(bf, tok, C), mk(tensor.F32, C), mk(tensor.F32, C)
			return func() error {
				return gpu.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: d, DY: dy, DGamma: dg, DBeta: db,
					DOut: d, X: sum, Gamma: g, Mean: m, Rstd: r, DropoutP: 0.1, Seed: 1, Offset: 0})
			}
		}},
		{"EmbeddingBackward f32 32768 ids all 0 into 2x768", tok * C * 4, func() func() error {
			return embBwd(b, gpu, mk, &live, tok, 2, C, func(int) int32 { return 0 })
		}},
		{"EmbeddingBackward f32 32768 ids i%512 into 512x768", tok * C * 4, func() func() error {
			return embBwd(b, gpu, mk, &live, tok, 512, C, func(i int) int32 { return int32(i % 512) })
		}},
		{"Softmax f32 64x12x512x512 masked", 64 * 12 * 512 * 512 * 8, func() func() error {
			x, o, mask := mk(tensor.F32, 64, 12*512, 512), mk(tensor.F32, 64, 12*512, 512), mk(tensor.F32, 64, 512)
			return func() error { return gpu.Softmax(o, x, mask) }
		}},
		{"SoftmaxBackward f32 64x12x512x512", 64 * 12 * 512 * 512 * 12, func() func() error {
			y, d, dx := mk(tensor.F32, 64*12*512, 512), mk(tensor.F32, 64*12*512, 512), mk(tensor.F32, 64*12*512, 512)
			return func() error { return gpu.SoftmaxBackward(dx, d, y) }
		}},
		{"Transpose12 bf16 64x512x12x64", tok * C * 4, func() func() error {
			x, o := mk(bf, 64, 512, 12, 64), mk(bf, 64, 12, 512, 64)
			return func() error { return gpu.Transpose12(o, x, 64, 512, 12, 64) }
		}},
		{"CrossEntropy+Backward bf16 4096x30522", 4096 * V * 6, func() func() error {
			lg, dl, ls := mk(bf, 4096, V), mk(bf, 4096, V), mk(tensor.F32, 4096)
			lab, err := gpu.Alloc(tensor.I64, 4096)
			if err != nil {
				b.Fatal(err)
			}
			live = append(live, lab)
			labels := make([]int64, 4096)
			for i := range labels {
				labels[i] = int64(rng.IntN(V))
			}
			if err := gpu.Upload(lab, labels); err != nil {
				b.Fatal(err)
			}
			return func() error {
				if _, err := gpu.CrossEntropy(ls, lg, lab, -100); err != nil {
					return err
				}
				return gpu.CrossEntropyBackward(dl, lg, lab, 1.0/4096, -100)
			}
		}},
		{"EmbeddingBackward f32 32768 ids into 30522x768", tok * C * 2 * 4, func() func() error {
			d, tab := mk(tensor.F32, tok, C), mk(tensor.F32, V, C)
			ids, err := gpu.Alloc(tensor.I32, tok)
			if err != nil {
				b.Fatal(err)
			}
			live = append(live, ids)
			v := make([]int32, tok)
			for i := range v {
				v[i] = int32(rng.IntN(V))
			}
			if err := gpu.Upload(ids, v); err != nil {
				b.Fatal(err)
			}
			return func() error { return gpu.EmbeddingBackward(tab, ids, d) }
		}},
		{"AdamW f32 110M", 110e6 * 28, func() func() error {
			const n = 110_000_000
			p, g, m, v := mk(tensor.F32, n), mk(tensor.F32, n), mk(tensor.F32, n), mk(tensor.F32, n)
			if err := gpu.Fill(v, 1e-4); err != nil {
				b.Fatal(err)
			}
			return func() error {
				return gpu.AdamW(tensor.AdamWArgs{Params: p, Grads: g, ExpAvg: m, ExpAvgSq: v, LR: 1e-5, Beta1: 0.9,
					Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 10})
			}
		}},
		{"GlobalNorm f32 110M", 110e6 * 4, func() func() error {
			g := mk(tensor.F32, 110_000_000)
			return func() error { _, err := gpu.GlobalNorm([]*tensor.Tensor{g}); return err }
		}},
	}
	for _, c := range cases {
		vs := []string{"v1", "v2"}
		if strings.HasPrefix(c.name, "EmbeddingBackward") {
			vs = append(vs, "v3") // the plan on the device
		}
		for _, v := range vs {
			b.Run(c.name+"/"+v, func(b *testing.B) {
				defer cuda.SetOpsVariant(v)()
				fn := c.setup()
				defer func() {
					for _, x := range live {
						gpu.Free(x)
					}
					live = nil
				}()
				for i := 0; i < 2; i++ {
					if err := fn(); err != nil {
						b.Fatal(err)
					}
				}
				times := make([]float64, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ms, err := gpu.Time(fn)
					if err != nil {
						b.Fatal(err)
					}
					times = append(times, ms)
				}
				b.StopTimer()
				sort.Float64s(times)
				med := times[len(times)/2]
				b.ReportMetric(med*1e3, "µs/op")
				b.ReportMetric(c.bytes/(med*1e-3)/1e9, "GB/s")
			})
		}
	}
}

// embBwd sets up EmbeddingBackward of tok F32 rows into a (v, c) F32 table at ids id(i).
func embBwd(b *testing.B, gpu *cuda.Backend, mk func(tensor.DType, ...int) *tensor.Tensor, live *[]*tensor.Tensor, tok, v, c int, id func(int) int32) func() error {
	d, tab := mk(tensor.F32, tok, c), mk(tensor.F32, v, c)
	ids, err := gpu.Alloc(tensor.I32, tok)
	if err != nil {
		b.Fatal(err)
	}
	*live = append(*live, ids)
	h := make([]int32, tok)
	for i := range h {
		h[i] = id(i)
	}
	if err := gpu.Upload(ids, h); err != nil {
		b.Fatal(err)
	}
	return func() error { return gpu.EmbeddingBackward(tab, ids, d) }
}
