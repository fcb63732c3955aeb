package trainer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// ckptRecipe trains tiny-bert-random (with dropout 0.1 written into a copy of its config) for 4 steps of 8
// rows, saving at steps 2 and 4.
const ckptRecipe = `
model:
  path: %s
data:
  train: %s
  max_length: 32
training:
  output_dir: %s
  per_device_train_batch_size: 8
  max_steps: 4
  learning_rate: 5e-4
  warmup_steps: 1
  weight_decay: 0.01
  logging_steps: 1
  save_strategy: steps
  save_steps: 2
  shuffle: true
  seed: 7
  fp16: %t
  bf16: %t
  gradient_checkpointing: %t
  resume_from_checkpoint: %q
device: cpu
`

// cancelAfterSave cancels the run once the checkpoint at step is written (a run killed after its save).
type cancelAfterSave struct {
	trainer.CallbackBase
	step   int
	cancel context.CancelFunc
}

func (c *cancelAfterSave) OnSave(e *trainer.Event, _ string) error {
	if e.State.GlobalStep == c.step {
		c.cancel()
	}
	return nil
}

// TestGradientCheckpointingTrainsBitIdentically trains tiny-bert-random with hidden and attention dropout 0.1
// in FP32, BF16 and FP16 three ways — without gradient_checkpointing, with it, and with it interrupted after
// the step-2 checkpoint and resumed — and requires the same bits: every step's loss and grad_norm and the
// saved model.safetensors at step 4.
func TestGradientCheckpointingTrainsBitIdentically(t *testing.T) {
	model := dropoutCopy(t, testutil.SharedData(t, "tiny-bert-random"))
	train := firstRows(t, testutil.SharedData(t, "sst2", "train.tsv"), 64)
	for _, mode := range []struct {
		name       string
		fp16, bf16 bool
	}{{"fp32", false, false}, {"bf16", false, true}, {"fp16", true, false}} {
		t.Run(mode.name, func(t *testing.T) {
			run := func(dir string, ckpt bool, resume string, cancelAt int) (*recipes.Run, error) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				opts := []trainer.Option{trainer.WithOutput(io.Discard)}
				if cancelAt > 0 {
					opts = append(opts, trainer.WithCallbacks(&cancelAfterSave{step: cancelAt, cancel: cancel}))
				}
				text := fmt.Sprintf(ckptRecipe, model, train, dir, mode.fp16, mode.bf16, ckpt, resume)
				r, err := recipes.Decode([]byte(text), "ckpt", ".", nil)
				if err != nil {
					t.Fatal(err)
				}
				run, err := recipes.Build(r, cpu.New(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer run.Trainer.Close()
				if gc, ok := run.Model.(transformer.GradientCheckpointer); !ok || gc.GradientCheckpointing() != ckpt {
					t.Fatalf("gradient_checkpointing: %v did not reach the model (%T)", ckpt, run.Model)
				}
				_, err = run.Trainer.Train(ctx)
				return run, err
			}
			plainDir, ckptDir, resDir := t.TempDir(), t.TempDir(), t.TempDir()
			plain, err := run(plainDir, false, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := run(ckptDir, true, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := run(resDir, true, "", 2); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run returned %v, want context.Canceled", err)
			}
			res, err := run(resDir, true, "true", 0)
			if err != nil {
				t.Fatal(err)
			}
			want := stepLogs(plain)
			if len(want) != 4 {
				t.Fatalf("%d training logs, want 4", len(want))
			}
			for name, got := range map[string][]trainer.LogEntry{"checkpointed": stepLogs(ck), "checkpointed and resumed": stepLogs(res)} {
				if len(got) != len(want) {
					t.Fatalf("%s: %d training logs, want %d", name, len(got), len(want))
				}
				for i := range want {
					for _, k := range []string{"loss", "grad_norm", "learning_rate"} {
						if got[i][k] != want[i][k] {
							t.Errorf("%s step %d %s: %v, without checkpointing %v", name, i+1, k, got[i][k], want[i][k])
						}
					}
				}
			}
			ref := readFile(t, filepath.Join(plainDir, "checkpoint-4", "model.safetensors"))
			for _, dir := range []string{ckptDir, resDir} {
				if !bytes.Equal(readFile(t, filepath.Join(dir, "checkpoint-4", "model.safetensors")), ref) {
					t.Errorf("%s: checkpoint-4/model.safetensors differs from the run without gradient checkpointing", dir)
				}
			}
			t.Logf("%s: step losses %v", mode.name, lossList(want))
		})
	}
}

// stepLogs returns the run's per-step training log entries (those with a loss).
func stepLogs(run *recipes.Run) []trainer.LogEntry {
	var out []trainer.LogEntry
	for _, l := range run.Trainer.State().LogHistory {
		if _, ok := l["loss"]; ok {
			out = append(out, l)
		}
	}
	return out
}

func lossList(logs []trainer.LogEntry) []float64 {
	var out []float64
	for _, l := range logs {
		out = append(out, l["loss"])
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dropoutCopy copies the model directory dir into a temporary one whose config.json has hidden and attention
// dropout 0.1 (tiny-bert-random has 0), so the recomputation's dropout masks are exercised.
func dropoutCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		b := readFile(t, filepath.Join(dir, name))
		if name == "config.json" {
			s := strings.Replace(string(b), `"attention_probs_dropout_prob": 0.0`, `"attention_probs_dropout_prob": 0.1`, 1)
			s = strings.Replace(s, `"hidden_dropout_prob": 0.0`, `"hidden_dropout_prob": 0.1`, 1)
			if s == string(b) {
				t.Fatalf("%s: no dropout keys to set", name)
			}
			b = []byte(s)
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
