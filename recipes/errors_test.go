package recipes

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// TestErrorsNameEachLayerOnce checks that errors from the layers below (loaders, lora, transformer) read with
// one package prefix and each layer's context once, not "recipes: data.train: loaders: ..." or
// "recipes: lora: lora: ...", while errors.Is still reaches the cause.
func TestErrorsNameEachLayerOnce(t *testing.T) {
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0")
	badTrain := filepath.Join(dir, "bad.tsv")
	if err := os.WriteFile(badTrain, []byte("sentence\tlabel\nx\t1\ny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := trainLabelRecipe(t, labelRecipe(t, dir, ""))
	tests := []struct {
		name   string
		run    func() error
		prefix string   // the message starts so
		is     error    // errors.Is target, when set
		not    []string // stutters the message must not hold
	}{
		{"a malformed training file", func() error {
			r := labelRecipe(t, dir, "")
			r.Data.Train = badTrain
			_, err := Build(r, cpu.New(), trainer.WithOutput(nil))
			return err
		}, "recipes: data.train: " + badTrain + ":3: 1 columns", nil, []string{"loaders:"}},
		{"a LoRA config that targets nothing", func() error {
			// Set in code, past Load's check (TestTargetModulesTypoBeforeLoad), as a Go caller may.
			r := labelRecipe(t, dir, "lora:\n  r: 4\n")
			r.LoRA.TargetModules = lora.TargetModules{Names: []string{"foo"}}
			_, err := Build(r, cpu.New(), trainer.WithOutput(nil))
			return err
		}, "recipes: lora: no modules were targeted", lora.ErrNoTargets, []string{"lora: lora:"}},
		{"a missing data file for eval", func() error {
			run, err := OpenModel(model, "", filepath.Join("data", "tiny"), cpu.New())
			if err != nil {
				return err
			}
			_, err = run.LoadDataset("--data", filepath.Join(dir, "nope.tsv"), Data{}, nil)
			return err
		}, "recipes: --data: dataset: stat ", fs.ErrNotExist, []string{"loaders:"}},
		{"a model directory without weights", func() error {
			_, err := OpenModel(filepath.Join("data", "tiny"), "", "", cpu.New())
			return err
		}, "recipes: load ", nil, []string{"transformer:", "loaders:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error %q, want it to start %q", err, tt.prefix)
			}
			for _, s := range tt.not {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds %q", err, s)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.is)
			}
		})
	}
}
