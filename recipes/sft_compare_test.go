package recipes

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/sft"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// sftCompareOverrides is the configuration tools/reference/sft_trainer_compare.py reproduces with
// transformers' Trainer: the tiny-chat recipe's model and data in file order, 10 steps, constant LR 1e-3.
func sftCompareOverrides(out string, packed bool) []string {
	bs := "4"
	if packed {
		bs = "2"
	}
	return []string{"training.output_dir=" + out, "training.max_steps=10", "training.per_device_train_batch_size=" + bs,
		"training.learning_rate=1e-3", "training.lr_scheduler_type=constant", "training.warmup_steps=0",
		"training.weight_decay=0", "training.max_grad_norm=1.0", "training.logging_steps=1", "training.shuffle=false",
		"training.eval_strategy=no", "data.eval=null", "training.save_strategy=no", "training.seed=42",
		"data.packing=" + map[bool]string{true: "true", false: "false"}[packed]}
}

// TestWriteSFTCompareInputs writes the tokenized examples and the packed steps' example groups that
// sft_trainer_compare.py trains on, when TUNE_WRITE_SFT_COMPARE names the output file.
func TestWriteSFTCompareInputs(t *testing.T) {
	path := os.Getenv("TUNE_WRITE_SFT_COMPARE")
	if path == "" {
		t.Skip("set TUNE_WRITE_SFT_COMPARE=FILE to write the inputs of tools/reference/sft_trainer_compare.py")
	}
	r, err := Load("tiny-chat", sftCompareOverrides(t.TempDir(), true))
	if err != nil {
		t.Fatal(err)
	}
	run, err := Build(r, cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Trainer.Close()
	type ex struct {
		InputIDs []int32 `json:"input_ids"`
		Labels   []int32 `json:"labels"`
	}
	var out struct {
		Examples []ex    `json:"examples"`
		Packed   [][]int `json:"packed_steps"` // per step, the 0-based example indices of its 2 rows
	}
	byLine := map[int]int{}
	for i, e := range run.SFTTrain.Examples {
		out.Examples = append(out.Examples, ex{e.InputIDs, e.Labels})
		byLine[e.Line] = i
	}
	for s := 0; s < 10; s++ {
		var group []int
		for _, row := range run.SFTTrain.Rows[2*s : 2*s+2] {
			for _, l := range row.Lines {
				group = append(group, byLine[l])
			}
		}
		out.Packed = append(out.Packed, group)
	}
	data, _ := json.Marshal(out)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSFTCompareWithTransformers trains the tiny Llama with tune's Trainer, unpacked (4 examples a step) and
// packed (2 rows a step), and compares every step's loss with transformers' Trainer on the same examples,
// init and masks (testdata/sft/trainer_compare.json from tools/reference/sft_trainer_compare.py; the packed
// steps there are padded batches of the same examples, which packing must equal): losses within 1e-3
// absolute and the gradient norms (before clipping) within 1e-3 relative, FP32.
func TestSFTCompareWithTransformers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "sft", "trainer_compare.json"))
	if err != nil {
		t.Skipf("testdata/sft/trainer_compare.json absent: run tools/reference/sft_trainer_compare.py on the GPU machine (%v)", err)
	}
	var g map[string]struct {
		Loss     []float64 `json:"loss"`
		GradNorm []float64 `json:"grad_norm"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	for _, packed := range []bool{false, true} {
		name := map[bool]string{false: "unpacked", true: "packed"}[packed]
		r, err := Load("tiny-chat", sftCompareOverrides(t.TempDir(), packed))
		if err != nil {
			t.Fatal(err)
		}
		run, err := Build(r, cpu.New())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Trainer.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		var losses, norms []float64
		for _, l := range run.Trainer.State().LogHistory {
			if v, ok := l["loss"]; ok {
				losses = append(losses, v)
				norms = append(norms, l["grad_norm"])
			}
		}
		run.Trainer.Close()
		want := g[name].Loss
		if len(losses) != len(want) || len(want) != 10 {
			t.Fatalf("%s: %d losses, transformers %d", name, len(losses), len(want))
		}
		wantNorm := g[name].GradNorm
		if len(wantNorm) != len(want) {
			t.Fatalf("%s: %d grad norms in the reference, %d losses", name, len(wantNorm), len(want))
		}
		worst, worstNorm := 0.0, 0.0
		for i := range want {
			worst = math.Max(worst, math.Abs(losses[i]-want[i]))
			worstNorm = math.Max(worstNorm, math.Abs(norms[i]-wantNorm[i])/wantNorm[i])
		}
		if worst > 1e-3 {
			t.Errorf("%s: losses %v, transformers %v (max |Δ| %.2g)", name, losses, want, worst)
		}
		if worstNorm > 1e-3 {
			t.Errorf("%s: grad norms %v, transformers %v (max relative Δ %.2g)", name, norms, wantNorm, worstNorm)
		}
		t.Logf("%s: max |Δ| %.2g over 10 steps (first %.6f vs %.6f), grad_norm max relative Δ %.2g",
			name, worst, losses[0], want[0], worstNorm)
	}
}

// groupDataset yields, as item k, one padded batch of the examples tune packs into step k's rows.
type groupDataset struct {
	ds     *sft.Dataset
	groups [][]int
	pad    int32
}

func (g *groupDataset) Len() int { return len(g.groups) }

func (g *groupDataset) Batch(idx []int) (*loaders.Batch, error) {
	all := g.ds.Rows(false)
	var rows []sft.Row
	for _, k := range idx {
		for _, i := range g.groups[k] {
			rows = append(rows, all[i])
		}
	}
	return sft.Collate(rows, g.pad)
}

// TestPackedTrainingEqualsPadded trains the tiny Llama 10 steps on packed rows (2 a step) and, from the same
// init, on padded batches of the same examples: every step's loss and gradient norm agree (packing changes
// only the layout: restarting positions and per-example attention).
func TestPackedTrainingEqualsPadded(t *testing.T) {
	var logs [2][][2]float64
	for v, packed := range []bool{true, false} {
		r, err := Load("tiny-chat", sftCompareOverrides(t.TempDir(), true))
		if err != nil {
			t.Fatal(err)
		}
		if !packed {
			r.Training.PerDeviceTrainBatchSize = 1
		}
		run, err := Build(r, cpu.New())
		if err != nil {
			t.Fatal(err)
		}
		if !packed {
			byLine := map[int]int{}
			for i, e := range run.SFTTrain.Examples {
				byLine[e.Line] = i
			}
			g := &groupDataset{ds: run.SFTTrain.Dataset, pad: run.SFTTrain.PadID}
			for s := 0; s < 10; s++ {
				var group []int
				for _, row := range run.SFTTrain.Rows[2*s : 2*s+2] {
					for _, l := range row.Lines {
						group = append(group, byLine[l])
					}
				}
				g.groups = append(g.groups, group)
			}
			run.Trainer.Close()
			if run.Trainer, err = trainer.New(run.Model, r.Training, g, nil, trainer.WithComputeMetrics(nil)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := run.Trainer.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, l := range run.Trainer.State().LogHistory {
			if v2, ok := l["loss"]; ok {
				logs[v] = append(logs[v], [2]float64{v2, l["grad_norm"]})
			}
		}
		run.Trainer.Close()
	}
	if len(logs[0]) != 10 || len(logs[1]) != 10 {
		t.Fatalf("steps logged: %d packed, %d padded", len(logs[0]), len(logs[1]))
	}
	for s := range logs[0] {
		p, q := logs[0][s], logs[1][s]
		if math.Abs(p[0]-q[0]) > 1e-4 || math.Abs(p[1]-q[1]) > 1e-3*math.Max(1, q[1]) {
			t.Errorf("step %d: packed loss %.6f grad_norm %.5f, padded %.6f %.5f", s+1, p[0], p[1], q[0], q[1])
		}
	}
	if logs[0][0][1] == 0 {
		t.Fatal("no grad_norm logged")
	}
	t.Logf("step 1: %.6f vs %.6f (grad_norm %.4f vs %.4f); step 10: %.6f vs %.6f", logs[0][0][0], logs[1][0][0], logs[0][0][1], logs[1][0][1], logs[0][9][0], logs[1][9][0])
}
