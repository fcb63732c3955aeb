package llama

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/cuda" // registers "cuda" when built with -tags cuda
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// TestPresetSizes checks the presets against the published parameter counts of their checkpoints.
func TestPresetSizes(t *testing.T) {
	for name, want := range map[string]int64{"smollm2-135m": 134_515_008, "qwen2.5-0.5b": 494_032_768, "llama-3.2-1b": 1_235_814_400} {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := c.NumParameters(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}
}

// BenchmarkDecoderStep measures one full fine-tuning step of a preset decoder shape under BF16 autocast —
// Forward + Backward of the shifted cross-entropy, one fused AdamW over the flat trainable buffer (lr 2e-5),
// ZeroGrad — and reports tokens/s and, on CUDA, the peak device memory allocated since before the model was
// built (GiB: weights, gradients, moments, activations, scratch). Everything is freed after each run, since
// testing.B runs the body once with N = 1 before the timed N. `tune bench --model` is the full harness (LoRA,
// breakdown, plan, PyTorch comparison); this benchmark is the package-level check. The backend is
// TUNE_BENCH_BACKEND (default "cuda", falling back to "cpu"), the batch TUNE_BENCH_BT ("8x2048"; on the CPU
// "1x128"), the presets TUNE_BENCH_PRESETS (all). Run on the GPU machine with a -tags cuda test binary:
//
//	llama.test -test.run '^$' -test.bench BenchmarkDecoderStep -test.benchtime 10x
func BenchmarkDecoderStep(b *testing.B) {
	want := os.Getenv("TUNE_BENCH_BACKEND")
	if want == "" {
		want = "cuda"
	}
	var bk tensor.Backend
	for _, f := range tensor.Backends() {
		if f.Name == want || (bk == nil && f.Name == "cpu") {
			if x, err := f.Open(); err == nil {
				bk = x
			}
		}
	}
	bt := os.Getenv("TUNE_BENCH_BT")
	if bt == "" {
		bt = "8x2048"
		if want == "cpu" || bk == nil {
			bt = "1x128"
		}
	}
	var B, T int
	if _, err := fmt.Sscanf(bt, "%dx%d", &B, &T); err != nil {
		b.Fatalf("TUNE_BENCH_BT %q: want BxT", bt)
	}
	names := PresetNames()
	if p := os.Getenv("TUNE_BENCH_PRESETS"); p != "" {
		names = []string{p}
	}
	for _, name := range names {
		b.Run(name+"/"+strconv.Itoa(B)+"x"+strconv.Itoa(T), func(b *testing.B) {
			cfg, _ := Preset(name)
			ms, hasStats := bk.(interface {
				MemoryStats() cuda.MemoryStats
				ResetPeakMemoryStats()
			})
			var base int64
			if hasStats {
				base = ms.MemoryStats().Allocated
				ms.ResetPeakMemoryStats()
			}
			m, err := New(bk, cfg, 1)
			if err != nil {
				b.Skip(err)
			}
			defer m.FreeParameters()
			defer m.Arena().Free()
			defer func() {
				if c := m.Cache(); c != nil {
					c.Free()
				}
			}()
			m.SetPolicy(amp.BF16)
			batch := &loaders.Batch{B: B, T: T, InputIDs: make([]int32, B*T), Labels: make([]int64, B*T)}
			for i := range batch.InputIDs {
				batch.InputIDs[i] = int32((i * 7919) % cfg.VocabSize)
				batch.Labels[i] = int64(batch.InputIDs[i])
			}
			params, grads, segs := m.Trainable()
			mom, err1 := bk.Alloc(tensor.F32, params.Numel())
			vel, err2 := bk.Alloc(tensor.F32, params.Numel())
			if err1 != nil || err2 != nil {
				b.Skip(err1, err2)
			}
			defer bk.Free(mom)
			defer bk.Free(vel)
			bk.Fill(mom, 0)
			bk.Fill(vel, 0)
			n := 0
			step := func() {
				n++
				if _, err := m.Forward(batch, transformer.ForwardOptions{Train: true, ReuseWeightCasts: true}); err != nil {
					b.Fatal(err)
				}
				if err := m.Backward(1); err != nil {
					b.Fatal(err)
				}
				if err := bk.AdamW(tensor.AdamWArgs{Params: params, Grads: grads, ExpAvg: mom, ExpAvgSq: vel, Segments: segs,
					LR: 2e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: n}); err != nil {
					b.Fatal(err)
				}
				m.WeightsUpdated()
				if err := m.ZeroGrad(); err != nil {
					b.Fatal(err)
				}
				if err := bk.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
			step()
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.ReportMetric(float64(b.N*B*T)/b.Elapsed().Seconds(), "tokens/s")
			if hasStats {
				b.ReportMetric(float64(ms.MemoryStats().PeakAllocated-base)/(1<<30), "peak-GiB")
			}
		})
	}
}
