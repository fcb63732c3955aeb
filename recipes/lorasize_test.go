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
// "fatal error: runtime: out of memory" and a goroutine dump while lora.Apply allocated a 256 GB adapter. Build
// now returns an error that names the recipe key lora.r and wraps lora.ErrInvalidConfig (the CLI's exit 2).
func TestBuildNamesALoRARankTooLargeForMemory(t *testing.T) {
	r, err := Load("tiny", []string{"lora.r=1000000000", "training.output_dir=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(r, cpu.New(), trainer.WithOutput(nil))
	if !errors.Is(err, lora.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "embedded:tiny: lora.r: 1000000000 ") {
		t.Fatalf("error %v, want one naming lora.r that wraps lora.ErrInvalidConfig", err)
	}
	t.Log(err)
}
