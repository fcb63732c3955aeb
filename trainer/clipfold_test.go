package trainer

import (
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// clipInMemory makes the deferred steps clip the gradients in a pass of their own before AdamW.
func clipInMemory() Option { return func(t *Trainer) { t.clipInMemory = true } }

// TestFoldedClipIsBitIdentical: deferred steps whose AdamW clips the gradients as it reads them
// (tensor.AdamWArgs.GradNorm) end with the weights and logs of the same steps clipping the gradients in memory
// (ClipByNorm) before AdamW, bit for bit: FP32, BF16 with clipping acting and with max_grad_norm 0, FP16 with
// the GradScaler on the device, and BF16 and FP16 steps run as CUDA graphs (fakeGraph on the CPU). On CUDA
// (-tags cuda) the same runs go through the GPU's kernels.
func TestFoldedClipIsBitIdentical(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		w := asyncBackend(t, b)
		for _, c := range []struct {
			name   string
			set    func(*TrainingArguments)
			graphs bool
			clips  bool // the logged grad_norm exceeds max_grad_norm at some step
		}{
			{"fp32", nil, false, true},
			{"bf16", func(a *TrainingArguments) { a.BF16 = true }, false, true},
			{"bf16 max_grad_norm 0", func(a *TrainingArguments) { a.BF16, a.MaxGradNorm = true, 0 }, false, false},
			{"fp16", func(a *TrainingArguments) { a.FP16 = true }, false, true},
			{"bf16 cuda_graphs", func(a *TrainingArguments) { a.BF16, a.MaxSteps = true, 14 }, true, true},
			{"fp16 cuda_graphs", func(a *TrainingArguments) { a.FP16, a.MaxSteps = true, 10 }, true, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				data, eval := fixedLength{toyTask(20, 64, 11), 8}, toyTask(7, 64, 5)
				run := func(opts ...Option) (*Trainer, []float32) {
					m := tinyBert(t, w)
					if c.graphs {
						g, _ := withGraphs(w)
						opts = append(opts, g)
					}
					tr, _, _ := newTestTrainer(t, m, deferredArgs(t, c.set), data, eval, append([]Option{deferSteps(true)}, opts...)...)
					mustTrain(t, tr)
					params, _, _ := m.Trainable()
					return tr, tensortest.Download(t, w, params)
				}
				inMemory, iw := run(clipInMemory())
				folded, fw := run()
				if !slices.Equal(iw, fw) {
					t.Fatal("weights with the clip folded into AdamW differ from those of the ClipByNorm pass")
				}
				compareTrainLogs(t, inMemory.State().LogHistory, folded.State().LogHistory)
				clipped := false
				for _, l := range trainLogs(folded.State().LogHistory) {
					clipped = clipped || l["grad_norm"] > folded.args.MaxGradNorm
				}
				if c.clips && !clipped {
					t.Errorf("no logged grad_norm above max_grad_norm %v: the clip never acted", folded.args.MaxGradNorm)
				}
			})
		}
	})
}
