package recipes

import (
	"errors"
	"strings"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// TestBuildNamesALoRARankTooLargeForMemory: `tune finetune tiny lora.r=1000000000` ended in the Go runtime's
// "fatal error: runtime: out of memory" and a goroutine dump while lora.Apply allocated a 256 GB adapter. With
// device cpu, Load (Validate, so tune validate too) refuses it naming lora.r at the key's position; with device
// auto, which Validate cannot resolve, Build refuses it when the backend is the CPU, naming the recipe key
// lora.r and wrapping lora.ErrInvalidConfig (the CLI's exit 2).
func TestBuildNamesALoRARankTooLargeForMemory(t *testing.T) {
	_, err := Load("tiny", []string{"lora.r=1000000000", "training.output_dir=" + t.TempDir()})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lora.r: 1000000000 makes 4 adapters") {
		t.Fatalf("Load: %v, want an ErrInvalid naming lora.r", err)
	}
	r, err := Load("tiny", []string{"lora.r=1000000000", "device=auto", "training.output_dir=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(r, cpu.New(), trainer.WithOutput(nil))
	if !errors.Is(err, lora.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "embedded:tiny: lora.r: 1000000000 ") {
		t.Fatalf("error %v, want one naming lora.r that wraps lora.ErrInvalidConfig", err)
	}
	t.Log(err)
}
