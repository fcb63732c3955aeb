package trainer_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer/detweights"
	"github.com/tune-ml/tune/transformer/llama"
)

// decoderGolden is testdata/decoder/trainer_golden.json, written by tools/reference/decoder_goldens.py.
type decoderGolden struct {
	Data struct {
		InputIDs      [][]int32 `json:"input_ids"`
		AttentionMask [][]int32 `json:"attention_mask"`
		Labels        [][]int64 `json:"labels"`
	} `json:"data"`
	Runs map[string]json.RawMessage `json:"-"`
}

// tokenRows is a trainer.Dataset of pre-tokenized rows of equal length.
type tokenRows struct{ g *decoderGolden }

func (d tokenRows) Len() int { return len(d.g.Data.InputIDs) }

func (d tokenRows) Batch(idx []int) (*loaders.Batch, error) {
	t := len(d.g.Data.InputIDs[0])
	b := &loaders.Batch{B: len(idx), T: t}
	for _, i := range idx {
		b.InputIDs = append(b.InputIDs, d.g.Data.InputIDs[i]...)
		b.AttentionMask = append(b.AttentionMask, d.g.Data.AttentionMask[i]...)
		b.Labels = append(b.Labels, d.g.Data.Labels[i]...)
	}
	return b, nil
}

// TestDecoderTrainerMatchesTransformers trains the golden tiny Llama (decoder_goldens.py's llama_rope3, the same
// detweights init) for 30 steps on the same token rows in the same order as transformers' Trainer did — batch
// 4 × 16, lr 1e-3 constant, AdamW, max_grad_norm 1 — in FP32, BF16 and FP16 with gradient_accumulation_steps 1,
// and FP32 with 2 (the window normalised by its supervised tokens, as transformers' num_items_in_batch does),
// and compares every step's loss (1e-3 absolute in FP32, 2e-2 under autocast) and the FP16 loss scales exactly.
func TestDecoderTrainerMatchesTransformers(t *testing.T) {
	path := testutil.Testdata(t, "decoder", "trainer_golden.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s not present: run tools/reference/decoder_goldens.py testdata/decoder on the GPU machine (%v)", path, err)
	}
	var g decoderGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &g.Runs); err != nil {
		t.Fatal(err)
	}
	ck, err := loaders.OpenCheckpoint(testutil.Testdata(t, "decoder", "llama_rope3.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := llama.ParseConfig([]byte(ck.Metadata()["config"]))
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, tc := range []struct {
			run        string
			ga         int
			fp16, bf16 bool
			tol        float64
		}{
			{"fp32", 1, false, false, 1e-3}, {"bf16", 1, false, true, 2e-2}, {"fp16", 1, true, false, 2e-2},
			{"fp32_ga2", 2, false, false, 1e-3},
		} {
			t.Run(tc.run, func(t *testing.T) {
				var want compareMode
				if err := json.Unmarshal(g.Runs[tc.run], &want); err != nil || len(want.Loss) == 0 {
					t.Skipf("golden has no %s run (%v)", tc.run, err)
				}
				if tc.ga > 1 { // training_step returns each micro-batch's share; the logged loss is the window's
					want.Loss = want.LogLoss
				}
				m, err := llama.New(b, cfg, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, np := range m.NamedParameters() {
					if err := b.Upload(np.Value, detweights.DecoderValues(20261201, np.Name, np.Value.Shape)); err != nil {
						t.Fatal(err)
					}
				}
				m.WeightsUpdated()
				args := trainer.DefaultTrainingArguments()
				args.OutputDir = t.TempDir()
				args.PerDeviceTrainBatchSize, args.GradientAccumulationSteps = 4, tc.ga
				args.MaxSteps, args.LearningRate, args.LRSchedulerType = 30, 1e-3, trainer.ScheduleConstant
				args.WeightDecay, args.MaxGradNorm, args.LoggingSteps = 0, 1, 1
				args.SaveStrategy, args.Shuffle, args.FP16, args.BF16 = trainer.IntervalNo, false, tc.fp16, tc.bf16
				tr, err := trainer.New(m, args, tokenRows{&g}, nil, trainer.WithOutput(io.Discard))
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				if _, err := tr.Train(context.Background()); err != nil {
					t.Fatal(err)
				}
				var got []trainer.LogEntry
				for _, l := range tr.State().LogHistory {
					if _, ok := l["loss"]; ok {
						got = append(got, l)
					}
				}
				if len(got) != len(want.Loss) {
					t.Fatalf("%d logged steps, transformers %d", len(got), len(want.Loss))
				}
				worst, at := 0.0, 1
				for i, w := range want.Loss {
					if d := math.Abs(got[i]["loss"] - w); d > worst {
						worst, at = d, i+1
					}
					if want.LossScale != nil && got[i]["loss_scale"] != want.LossScale[i] {
						t.Errorf("step %d: loss scale %v, transformers %v", i+1, got[i]["loss_scale"], want.LossScale[i])
					}
				}
				t.Logf("%s: worst loss difference %.3g at step %d (tune %.6f, transformers %.6f); step 30 %.5f vs %.5f",
					tc.run, worst, at, got[at-1]["loss"], want.Loss[at-1], got[29]["loss"], want.Loss[29])
				if worst > tc.tol {
					for i, w := range want.Loss {
						t.Logf("step %2d: tune %.6f transformers %.6f grad_norm %.4f / %.4f", i+1, got[i]["loss"], w,
							got[i]["grad_norm"], want.GradNorm[i])
					}
					t.Errorf("%s losses differ from transformers' by up to %.3g (tolerance %g)", tc.run, worst, tc.tol)
				}
			})
		}
	})
}
