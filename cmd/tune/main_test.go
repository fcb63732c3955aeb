package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileRefusesAnExistingFile: TUNE_CPUPROFILE=FILE truncated FILE with os.Create before the command ran,
// so pointing it at a finished run's model.safetensors (or the recipe being read) destroyed it (tester4). An
// existing file is now refused with its contents intact, as TUNE_BENCH_CPUPROFILE refuses one; a new file gets
// the profile, and a path that cannot be created is refused too.
func TestCPUProfileRefusesAnExistingFile(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(model, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := startCPUProfile(model); err == nil || !strings.Contains(err.Error(), "the file exists and tune does not replace it") {
		t.Errorf("an existing file: %v", err)
	}
	if b, err := os.ReadFile(model); err != nil || string(b) != "weights" {
		t.Errorf("the existing file now holds %q (%v)", b, err)
	}
	prof := filepath.Join(dir, "cpu.prof")
	stop, err := startCPUProfile(prof)
	if err != nil {
		t.Fatalf("a new file: %v", err)
	}
	stop()
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		t.Errorf("the profile: %v, %v", st, err)
	}
	if _, err := startCPUProfile(filepath.Join(dir, "missing", "cpu.prof")); err == nil || !strings.Contains(err.Error(), "the command did not run") {
		t.Errorf("a path that cannot be created: %v", err)
	}
	if stop, err := startCPUProfile(""); err != nil || stop == nil {
		t.Errorf("no profile: %v", err)
	}
}
