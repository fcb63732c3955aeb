package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestOutputsNameWhatTheRunWrote: a full fine-tune resumed in an output_dir where the user had put a PEFT
// adapter (kept, never replaced) listed its output as "LoRA adapter in PEFT's format", judged by the folder's
// files. The list names the model the run saved, and the adapter as left as it was.
func TestOutputsNameWhatTheRunWrote(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"finetune", "--device", "cpu", tinyRecipe, "training.output_dir=" + out, "training.eval_strategy=no",
		"training.save_strategy=steps", "training.save_steps=2"}
	if code, stdout, stderr := runCLI(append(args, "training.max_steps=2")...); code != exitOK {
		t.Fatalf("first run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	peft := filepath.Join("..", "..", "testdata", "lora", "peft_adapter")
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(peft, f))
		if err != nil {
			t.Fatal(err)
		}
		mustWriteFile(t, filepath.Join(out, f), string(b))
	}
	code, stdout, stderr := runCLI(append(args, "training.max_steps=4", "training.resume_from_checkpoint=true")...)
	if code != exitOK {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"  model (config.json, model.safetensors) and tokenizer: " + out,
		"  not written by this run, left as they were: adapter_config.json, adapter_model.safetensors"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "LoRA adapter") {
		t.Errorf("the outputs name the user's adapter as the run's:\n%s", stdout)
	}
}
