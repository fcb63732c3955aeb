package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCorruptAdapterConfig: an adapter_config.json that is not valid JSON is bad usage (exit 2) in eval,
// predict, merge and inspect, and the message names the file, the line and the column, as for a config.json.
func TestCorruptAdapterConfig(t *testing.T) {
	model, adapter, _, _ := mergeFixture(t)
	if err := os.WriteFile(filepath.Join(adapter, "adapter_config.json"), []byte("{\n  \"r\": 4,\n  oops\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	for _, args := range [][]string{
		{"eval", "--device", "cpu", "--model", model, "--adapter", adapter, "--data", dev},
		{"predict", "--device", "cpu", "--model", model, "--adapter", adapter, "--input", dev},
		{"merge", "--model", model, "--adapter", adapter, "--output", filepath.Join(t.TempDir(), "merged")},
		{"inspect", adapter},
	} {
		code, _, stderr := runTune(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "adapter_config.json: invalid JSON: line 3 column 3: invalid character 'o'") ||
			!strings.Contains(stderr, adapter) {
			t.Errorf("tune %s: exit %d (want %d), stderr %q", args[0], code, exitUsage, stderr)
		}
	}
}
