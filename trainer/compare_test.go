package trainer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/trainer"
)

// compareMode is one precision's run in testdata/trainer/compare_golden.json, written by
// tools/reference/trainer_compare.py.
type compareMode struct {
	Loss         []float64 `json:"loss"`
	LogLoss      []float64 `json:"log_loss"`
	GradNorm     []float64 `json:"grad_norm"`
	LearningRate []float64 `json:"learning_rate"`
	LossScale    []float64 `json:"loss_scale"`
}

// compareRecipe is the configuration of trainer_compare.py as a tune recipe (see the script's docstring).
const compareRecipe = `
model:
  path: %s
data:
  train: %s
  max_length: 64
training:
  output_dir: %s
  per_device_train_batch_size: 16
  gradient_accumulation_steps: 1
  max_steps: 30
  learning_rate: 5e-4
  lr_scheduler_type: constant
  warmup_steps: 0
  weight_decay: 0
  max_grad_norm: 1.0
  logging_steps: 1
  save_strategy: "no"
  shuffle: false
  seed: 42
  fp16: %t
  bf16: %t
device: cpu
`

// TestCompareWithTransformers runs tune's Trainer on the CPU with trainer_compare.py's configuration (the first
// 30×16 rows of SST-2 train in file order, tiny-bert-random, constant LR, dropout 0) in FP32, BF16 and FP16 and
// compares every step's loss with transformers' (1e-3 absolute in FP32, 2e-2 in BF16/FP16) and the FP16 loss
// scales exactly.
func TestCompareWithTransformers(t *testing.T) {
	goldenPath := testutil.Testdata(t, "trainer", "compare_golden.json")
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Skipf("%s not present: run tools/reference/trainer_compare.py testdata/trainer on the GPU machine (%v)", goldenPath, err)
	}
	if testing.Short() {
		t.Skip("90 training steps of tiny-bert-random on the CPU; skipped in -short mode")
	}
	var modes map[string]json.RawMessage
	if err := json.Unmarshal(raw, &modes); err != nil {
		t.Fatal(err)
	}
	model := testutil.SharedData(t, "tiny-bert-random")
	train := firstRows(t, testutil.SharedData(t, "sst2", "train.tsv"), 30*16)
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) { compareWithTransformers(t, b, modes, model, train) })
}

// compareWithTransformers is TestCompareWithTransformers on backend b.
func compareWithTransformers(t *testing.T, b tensor.Backend, modes map[string]json.RawMessage, model, train string) {
	for _, tc := range []struct {
		mode       string
		fp16, bf16 bool
		tol        float64
	}{
		{"fp32", false, false, 1e-3},
		{"bf16", false, true, 2e-2},
		{"fp16", true, false, 2e-2},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			var want compareMode
			if err := json.Unmarshal(modes[tc.mode], &want); err != nil || len(want.Loss) == 0 {
				t.Skipf("golden has no %s run (%v)", tc.mode, err)
			}
			text := fmt.Sprintf(compareRecipe, model, train, t.TempDir(), tc.fp16, tc.bf16)
			r, err := recipes.Decode([]byte(text), "compare", ".", nil)
			if err != nil {
				t.Fatal(err)
			}
			run, err := recipes.Build(r, b, trainer.WithOutput(io.Discard))
			if err != nil {
				t.Fatal(err)
			}
			defer run.Trainer.Close()
			if _, err := run.Trainer.Train(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got []trainer.LogEntry
			for _, l := range run.Trainer.State().LogHistory {
				if _, ok := l["loss"]; ok {
					got = append(got, l)
				}
			}
			worst, at := 0.0, 0
			for i, w := range want.Loss {
				if d := math.Abs(got[i]["loss"] - w); d > worst {
					worst, at = d, i+1
				}
				if want.LossScale != nil && got[i]["loss_scale"] != want.LossScale[i] {
					t.Errorf("step %d: loss scale %v, transformers %v", i+1, got[i]["loss_scale"], want.LossScale[i])
				}
			}
			t.Logf("%s: worst loss difference %.3g at step %d (tune %.6f, transformers %.6f)", tc.mode, worst, at,
				got[at-1]["loss"], want.Loss[at-1])
			if worst > tc.tol {
				for i, w := range want.Loss {
					t.Logf("step %2d: tune %.6f transformers %.6f grad_norm %.4f / %.4f", i+1, got[i]["loss"], w,
						got[i]["grad_norm"], want.GradNorm[i])
				}
				t.Errorf("%s losses differ from transformers' by up to %.3g (tolerance %g)", tc.mode, worst, tc.tol)
			}
		})
	}
}

// firstRows writes the header and the first n rows of a TSV file to a temporary file and returns its path.
func firstRows(t *testing.T, path string, n int) string {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := filepath.Join(t.TempDir(), "train.tsv")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(in)
	for i := 0; i <= n && sc.Scan(); i++ {
		fmt.Fprintln(f, sc.Text())
	}
	return out
}
