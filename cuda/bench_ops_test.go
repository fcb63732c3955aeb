//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// opsQueued is how many calls BenchmarkOps queues between two events for its "queued" figures: the host's
// per-call work (validation, the ids check, launches) then overlaps the device's, as in an unprofiled step,
// while a single call timed alone (the µs/op figure, as tune bench --breakdown times each op) also pays it.
const opsQueued = 10

// BenchmarkOps times the non-GEMM kernels of a BERT-base training step (hidden 768, FFN 3072, vocabulary 30522;
// AdamW over 110M parameters) at the two benchmark shapes of docs/PERFORMANCE.md, batch 64 × seq 512 (32768
// tokens) and 32 × 128 (4096 tokens), with CUDA events. Each case reports the median of one call timed alone
// (µs/op, GB/s) and of opsQueued calls queued back to back (µs/op-queued, GB/s-queued), the bytes being
// those tune bench's Meter counts for the op (each argument once, outputs read-modify-written twice). A
// device-to-device Copy of the same size classes gives the machine's copy rate to compare with (read +
// write bytes).
func BenchmarkOps(b *testing.B) {
	gpu := openOrSkip(b)
	for _, tok := range []int{32768, 4096} {
		for _, c := range opCases(b, gpu, tok) {
			b.Run(fmt.Sprintf("%s/tok=%d", c.name, tok), func(b *testing.B) { runOpCase(b, gpu, c) })
		}
	}
}

// opCase is one BenchmarkOps case: setup allocates its tensors (into *live) and returns the call.
type opCase struct {
	name  string
	bytes float64
	setup func() func() error
	live  *[]*tensor.Tensor
}

func runOpCase(b *testing.B, gpu *cuda.Backend, c opCase) {
	fn := c.setup()
	defer func() {
		for _, x := range *c.live {
			gpu.Free(x)
		}
		*c.live = nil
	}()
	for i := 0; i < 2; i++ {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	many := func() error {
		for i := 0; i < opsQueued; i++ {
			if err := fn(); err != nil {
				return err
			}
		}
		return nil
	}
	alone := make([]float64, 0, b.N)
	queued := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ms, err := gpu.Time(fn)
		if err != nil {
			b.Fatal(err)
		}
		alone = append(alone, ms)
		ms, err = gpu.Time(many)
		if err != nil {
			b.Fatal(err)
		}
		queued = append(queued, ms/opsQueued)
	}
	b.StopTimer()
	med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	a, q := med(alone), med(queued)
	b.ReportMetric(a*1e3, "µs/op")
	b.ReportMetric(c.bytes/(a*1e-3)/1e9, "GB/s")
	b.ReportMetric(q*1e3, "µs/op-queued")
	b.ReportMetric(c.bytes/(q*1e-3)/1e9, "GB/s-queued")
}

// opCases returns BenchmarkOps's cases for tok tokens.
func opCases(b *testing.B, gpu *cuda.Backend, tok int) []opCase {
	rng := rand.New(rand.NewPCG(7, uint64(tok)))
	const C, F, V, P = 768, 3072, 30522, 110_000_000
	live := new([]*tensor.Tensor)
	mk := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		x, err := gpu.Alloc(dt, shape...)
		if err != nil {
			b.Fatal(err)
		}
		*live = append(*live, x)
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
	ids := func(n, v int, id func(int) int32) *tensor.Tensor {
		t, err := gpu.Alloc(tensor.I32, n)
		if err != nil {
			b.Fatal(err)
		}
		*live = append(*live, t)
		h := make([]int32, n)
		for i := range h {
			h[i] = id(i)
		}
		if err := gpu.Upload(t, h); err != nil {
			b.Fatal(err)
		}
		return t
	}
	f32, bf := tensor.F32, tensor.BF16
	t := float64(tok)
	random := func(int) int32 { return int32(rng.IntN(V)) }
	seq := tok / 64
	if tok == 4096 {
		seq = 128
	}
	cases := []opCase{
		{"Copy f32 tok x768", t * C * 8, func() func() error {
			x, o := mk(f32, tok, C), mk(f32, tok, C)
			return func() error { return gpu.Copy(o, x) }
		}, live},
		{"Copy f32 110M", P * 8, func() func() error {
			x, o := mk(f32, P), mk(f32, P)
			return func() error { return gpu.Copy(o, x) }
		}, live},
		{"GELU bf16 tok x3072", t * F * 4, func() func() error {
			x, o := mk(bf, tok, F), mk(bf, tok, F)
			return func() error { return gpu.GELU(o, x) }
		}, live},
		{"GELUBackwardRecompute+dbias bf16 tok x3072", t*F*8 + 2*F*4, func() func() error {
			x, d, o, db := mk(bf, tok, F), mk(bf, tok, F), mk(bf, tok, F), mk(f32, F)
			return func() error { return gpu.GELUBackwardRecompute(d, o, db, d, x) }
		}, live},
		{"BiasGrad bf16 tok x768", t*C*2 + 2*C*4, func() func() error {
			dy, db := mk(bf, tok, C), mk(f32, C)
			return func() error { return gpu.BiasGrad(db, dy) }
		}, live},
		{"BiasGrad bf16 tok x2304", t*3*C*2 + 2*3*C*4, func() func() error {
			dy, db := mk(bf, tok, 3*C), mk(f32, 3*C)
			return func() error { return gpu.BiasGrad(db, dy) }
		}, live},
		{"ResidualLayerNorm bf16+f32 tok x768 p=0.1", t*C*(2+4+4+4+2) + t*8 + 2*C*4, func() func() error {
			y, x, g, be := mk(bf, tok, C), mk(f32, tok, C), mk(f32, C), mk(f32, C)
			sum, o, oh, m, r := mk(f32, tok, C), mk(f32, tok, C), mk(bf, tok, C), mk(f32, tok), mk(f32, tok)
			return func() error {
				return gpu.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: sum, Out: o, OutHalf: oh, Mean: m, Rstd: r, Y: y, X: x,
					Gamma: g, Beta: be, Eps: 1e-12, DropoutP: 0.1, Seed: 1, Offset: 0})
			}
		}, live},
		{"ResidualLayerNormBackward f32 tok x768 p=0.1", t*C*(4+2+4+4) + t*8 + C*4 + 4*C*4, func() func() error {
			y, x, g, be := mk(bf, tok, C), mk(f32, tok, C), mk(f32, C), mk(f32, C)
			sum, o, m, r := mk(f32, tok, C), mk(f32, tok, C), mk(f32, tok), mk(f32, tok)
			if err := gpu.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: sum, Out: o, Mean: m, Rstd: r, Y: y, X: x,
				Gamma: g, Beta: be, Eps: 1e-12}); err != nil {
				b.Fatal(err)
			}
			d, dy, dg, db := mk(f32, tok, C), mk(bf, tok, C), mk(f32, C), mk(f32, C)
			return func() error {
				return gpu.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: d, DY: dy, DGamma: dg, DBeta: db,
					DOut: d, X: sum, Gamma: g, Mean: m, Rstd: r, DropoutP: 0.1, Seed: 1, Offset: 0})
			}
		}, live},
		{"ResidualLayerNormBackward+dbias f32 tok x768 p=0.1", t*C*(4+2+4+4) + t*8 + C*4 + 6*C*4, func() func() error {
			y, x, g, be := mk(bf, tok, C), mk(f32, tok, C), mk(f32, C), mk(f32, C)
			sum, o, m, r := mk(f32, tok, C), mk(f32, tok, C), mk(f32, tok), mk(f32, tok)
			if err := gpu.ResidualLayerNorm(tensor.ResidualNormArgs{Sum: sum, Out: o, Mean: m, Rstd: r, Y: y, X: x,
				Gamma: g, Beta: be, Eps: 1e-12}); err != nil {
				b.Fatal(err)
			}
			d, dy, dg, db, dc := mk(f32, tok, C), mk(bf, tok, C), mk(f32, C), mk(f32, C), mk(f32, C)
			return func() error {
				return gpu.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: d, DY: dy, DGamma: dg, DBeta: db, DBias: dc,
					DOut: d, X: sum, Gamma: g, Mean: m, Rstd: r, DropoutP: 0.1, Seed: 1, Offset: 0})
			}
		}, live},
		{"Embedding word f32 tok x768", t*4 + 2*t*C*4, func() func() error {
			tab, o, id := mk(f32, V, C), mk(f32, tok, C), ids(tok, V, random)
			return func() error { return gpu.Embedding(o, id, tab) }
		}, live},
		{"EmbeddingBackward word f32 tok x768", t*4 + 3*t*C*4, func() func() error {
			tab, d, id := mk(f32, V, C), mk(f32, tok, C), ids(tok, V, random)
			return func() error { return gpu.EmbeddingBackward(tab, id, d) }
		}, live},
		{"EmbeddingBackward position f32 tok x768", t*4 + 3*t*C*4, func() func() error {
			tab, d, id := mk(f32, 512, C), mk(f32, tok, C), ids(tok, 512, func(i int) int32 { return int32(i % seq) })
			return func() error { return gpu.EmbeddingBackward(tab, id, d) }
		}, live},
		{"EmbeddingBackward type f32 tok x768", t*4 + 3*t*C*4, func() func() error {
			tab, d, id := mk(f32, 2, C), mk(f32, tok, C), ids(tok, 2, func(int) int32 { return 0 })
			return func() error { return gpu.EmbeddingBackward(tab, id, d) }
		}, live},
		{"Dropout bf16 tok x768", t * C * 4, func() func() error {
			x, o := mk(bf, tok, C), mk(bf, tok, C)
			return func() error { return gpu.Dropout(o, x, 0.1, 42, 0) }
		}, live},
		{"Cast f32 to bf16 tok x768", t * C * 6, func() func() error {
			x, o := mk(f32, tok, C), mk(bf, tok, C)
			return func() error { return gpu.Cast(o, x) }
		}, live},
	}
	if tok == 32768 { // the optimizer step does not depend on the batch: once
		cases = append(cases,
			opCase{"AdamW f32 110M", P * 28, func() func() error {
				p, g, m, v := mk(f32, P), mk(f32, P), mk(f32, P), mk(f32, P)
				if err := gpu.Fill(v, 1e-4); err != nil {
					b.Fatal(err)
				}
				return func() error {
					return gpu.AdamW(tensor.AdamWArgs{Params: p, Grads: g, ExpAvg: m, ExpAvgSq: v, LR: 1e-5, Beta1: 0.9,
						Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 10})
				}
			}, live},
			opCase{"AdamW f32 110M clipped by a device norm", P*28 + 8, func() func() error {
				p, g, m, v := mk(f32, P), mk(f32, P), mk(f32, P), mk(f32, P)
				n, err := gpu.Alloc(tensor.I64, 1)
				if err != nil {
					b.Fatal(err)
				}
				*live = append(*live, n)
				if err := gpu.Fill(v, 1e-4); err != nil {
					b.Fatal(err)
				}
				if err := gpu.Upload(n, []int64{int64(math.Float64bits(1e3))}); err != nil { // clips: max_norm/1e3
					b.Fatal(err)
				}
				return func() error {
					return gpu.AdamW(tensor.AdamWArgs{Params: p, Grads: g, ExpAvg: m, ExpAvgSq: v, LR: 1e-5, Beta1: 0.9,
						Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 10, GradNorm: n, MaxGradNorm: 1})
				}
			}, live},
			opCase{"AdamW f32 110M in 200 segments", P * 28, func() func() error {
				p, g, m, v := mk(f32, P), mk(f32, P), mk(f32, P), mk(f32, P)
				if err := gpu.Fill(v, 1e-4); err != nil {
					b.Fatal(err)
				}
				var segs []tensor.Segment
				for off, i := 0, 0; off < P; i++ { // odd lengths: unaligned segment starts, as BERT's biases give
					n := min(P-off, P/200+2*i+1)
					segs = append(segs, tensor.Segment{Offset: off, Len: n, Decay: i%2 == 0})
					off += n
				}
				return func() error {
					return gpu.AdamW(tensor.AdamWArgs{Params: p, Grads: g, ExpAvg: m, ExpAvgSq: v, LR: 1e-5, Beta1: 0.9,
						Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 10, Segments: segs})
				}
			}, live},
			opCase{"GlobalNormTo f32 110M", P*4 + 8, func() func() error {
				g := mk(f32, P)
				n, err := gpu.Alloc(tensor.I64, 1)
				if err != nil {
					b.Fatal(err)
				}
				*live = append(*live, n)
				return func() error { return gpu.GlobalNormTo(n, []*tensor.Tensor{g}) }
			}, live},
		)
	}
	return cases
}
