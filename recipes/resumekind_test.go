package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/trainer"
)

// TestCheckFilesResumeOfAnotherKind: resuming the tiny BERT recipe from a tiny-chat run's checkpoint failed
// after the model and data had loaded, listing the 21 Llama tensors "this model does not have"; a full-model
// checkpoint resumed by a LoRA recipe said "lora: reading the adapter config: open .../adapter_config.json: no
// such file or directory". CheckFiles now says what the checkpoint holds and what the recipe trains.
func TestCheckFilesResumeOfAnotherKind(t *testing.T) {
	ckpt := func(files map[string]string) string {
		dir := filepath.Join(t.TempDir(), "checkpoint-10")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files["trainer_state.json"] = "{}"
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := trainer.WriteCheckpointManifest(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	llama := ckpt(map[string]string{"config.json": `{"model_type": "llama"}`})
	bertFull := ckpt(map[string]string{"config.json": `{"model_type": "bert"}`})
	adapter := ckpt(map[string]string{"adapter_config.json": `{"peft_type": "LORA"}`})
	withLoRA := func() *lora.Config { c := lora.DefaultConfig(); return &c }
	for _, c := range []struct {
		name   string
		resume string
		lora   *lora.Config
		want   string // "" = accepted
	}{
		{"a BERT run's full checkpoint", bertFull, nil, ""},
		{"a LoRA run's checkpoint", adapter, withLoRA(), ""},
		{"a Llama checkpoint for a BERT recipe", llama, nil, "holds a llama model (its config.json), but the recipe trains a bert"},
		{"an adapter for a full fine-tuning recipe", adapter, nil, "holds a LoRA adapter, but the recipe has no lora section"},
		{"a full model for a LoRA recipe", bertFull, withLoRA(), "holds a full model, not a LoRA adapter, but the recipe has a lora section"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Default()
			r.Source = "r.yaml"
			r.Training.OutputDir, r.Training.ResumeFromCheckpoint, r.LoRA = t.TempDir(), c.resume, c.lora
			err := r.CheckFiles()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), "training.resume_from_checkpoint: ") || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
