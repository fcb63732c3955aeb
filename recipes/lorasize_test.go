package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// TestBuildNamesALoRARankTooLargeForMemory: `tune finetune tiny lora.r=1000000000` ended in the Go runtime's
// "fatal error: runtime: out of memory" and a goroutine dump while lora.Apply allocated a 256 GB adapter (LoRA
// now needs a checkpoint: here a 1-layer BERT's, whose query and value make 2 adapters). With
// device cpu, or auto where no GPU is (tester 12: validate passed it under auto), Load (Validate, so tune
// validate too) refuses it naming lora.r at the key's position; with device cuda, which keeps the adapters on
// the GPU, Build refuses it when the backend is the CPU after all, naming the recipe key lora.r and wrapping
// lora.ErrInvalidConfig (the CLI's exit 2).
func TestBuildNamesALoRARankTooLargeForMemory(t *testing.T) {
	dir := t.TempDir()
	writeTSV(t, dir, "train.tsv", "1", "0")
	recipe := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(recipe, []byte(labelRecipeText(t, dir, "lora:\n  r: 8\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(recipe, []string{"lora.r=1000000000"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lora.r: 1000000000 makes 2 adapters") {
		t.Fatalf("Load: %v, want an ErrInvalid naming lora.r", err)
	}
	_, err = Load(recipe, []string{"lora.r=1000000000", "device=auto"})
	if cuda.Available() != (err == nil) {
		t.Fatalf("Load with device auto (a GPU: %v): %v", cuda.Available(), err)
	}
	r, err := Load(recipe, []string{"lora.r=1000000000", "device=cuda"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(r, cpu.New(), trainer.WithOutput(nil))
	if !errors.Is(err, lora.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), recipe+": lora.r: 1000000000 ") {
		t.Fatalf("error %v, want one naming lora.r that wraps lora.ErrInvalidConfig", err)
	}
	t.Log(err)
}

// TestLayerCountsBoundedBeforeTheSkeleton: a LoRA recipe is checked on the model's skeleton before anything
// loads (lora.CheckRank), so a layer count that only the recipe or a config.json without weights bounds is
// refused first, naming the key: model.config.num_hidden_layers 50,000,000 of hidden_size 4 (inside BERT's
// parameter limit) and a weightless config.json of 10,000,000 Llama layers each ran tune validate out of
// memory (4.4 GB under a 6 GB limit).
func TestLayerCountsBoundedBeforeTheSkeleton(t *testing.T) {
	weightless := t.TempDir()
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join("data", "tiny-chat", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			b = []byte(strings.Replace(string(b), `"num_hidden_layers": 2`, `"num_hidden_layers": 10000000`, 1))
		}
		if err := os.WriteFile(filepath.Join(weightless, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		recipe    string
		overrides []string
		want      string
	}{
		{"tiny", []string{"model.config.num_hidden_layers=50000000", "model.config.hidden_size=4", "model.config.num_attention_heads=1",
			"model.config.intermediate_size=4"}, "model.config.num_hidden_layers: 50000000 is more than 1000"},
		{"tiny-chat", []string{"model.path=" + weightless}, "num_hidden_layers 10000000 is more than 1000, and " + weightless + " holds no weights"},
	} {
		r, err := Load(c.recipe, append(c.overrides, "lora.r=2", "training.output_dir="+t.TempDir()))
		if err == nil {
			err = r.CheckFiles() // what tune validate runs after Load: the model.path files
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v\nwant an ErrInvalid with %q", c.recipe, c.overrides, err, c.want)
		}
	}
}

// TestValidateWarnsOfHostMemory (tester 12): validate passed a model.config that finetune could not build on the
// CPU (hidden_size 20000: 3.6e9 parameters, about 43 GB to build), which stops with exit status 1 before
// training. On a host-backed device Load now warns with bert's own message; the warning is there exactly when
// this machine's free memory falls short, so the test follows the machine it runs on.
func TestValidateWarnsOfHostMemory(t *testing.T) {
	r, err := Load("tiny", []string{"model.config.hidden_size=20000", "model.config.num_attention_heads=10", "device=cpu"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.Model.Config.bertConfig()
	if err != nil {
		t.Fatal(err)
	}
	short := cfg.HostMemoryError() != nil
	warned := slices.ContainsFunc(r.Warnings, func(w string) bool {
		return strings.Contains(w, "model.config: a model of 3.62e+09 parameters needs about") && strings.Contains(w, "tune finetune will stop")
	})
	if warned != short {
		t.Errorf("warned %v, memory short %v; warnings %q", warned, short, r.Warnings)
	}
	if r, err := Load("tiny", nil); err != nil || len(r.Warnings) != 0 {
		t.Errorf("the tiny recipe: %v, warnings %q", err, r.Warnings)
	}
}
