package lora

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdapterBinIsNamed: a folder with a pickle adapter_model.bin instead of adapter_model.safetensors is an
// error that says so and how to convert it, not a raw stat error (tester4), both where the head's size is
// read and where the weights are.
func TestAdapterBinIsNamed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "adapter_model.bin"), []byte("PK"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := SavedNumLabels(dir)
	if err == nil || !strings.Contains(err.Error(), "adapter_model.bin (a pickle)") || !strings.Contains(err.Error(), "safe_serialization=True") {
		t.Fatalf("SavedNumLabels: %v", err)
	}
	if _, err := adapterWeights(dir); err == nil || err.Error() != mustErr(SavedNumLabels(dir)) {
		t.Fatalf("adapterWeights: %v", err)
	}
}

func mustErr(_ int, err error) string { return err.Error() }
