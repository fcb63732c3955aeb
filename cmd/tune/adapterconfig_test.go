package main

import (
	"encoding/json"
	"fmt"
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

// TestAdapterRankMismatchIsBadInput: an adapter_config.json whose r disagrees with the rank of the adapter's
// weights is bad input (exit 2) in eval, predict and merge, like a broken adapter_config.json, and the message
// says which r the weights have; inspect shows it as a warning. An r of 1e9 beside rank-4 weights gets the same
// message (tester4: merge said the adapters would need 8 TB of training memory, inspect said nothing): the
// rank is compared from the header before any adapter is sized.
func TestAdapterRankMismatchIsBadInput(t *testing.T) {
	for _, scale := range []int{2, 250_000_000} {
		t.Run(fmt.Sprintf("r×%d", scale), func(t *testing.T) { adapterRankMismatch(t, scale) })
	}
}

func adapterRankMismatch(t *testing.T, scale int) {
	model, adapter, _, _ := mergeFixture(t)
	cfgPath := filepath.Join(adapter, "adapter_config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	r := int(cfg["r"].(float64))
	cfg["r"] = r * scale
	b, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, b, 0o644)
	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	vocab := filepath.Join(t.TempDir(), "vocab.txt") // fits the fixture's 60 embeddings
	os.WriteFile(vocab, []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"+strings.Join(strings.Split("abcdefghijklmnopqrstuvwxyz", ""), "\n")+"\n"), 0o644)
	for _, args := range [][]string{
		{"eval", "--device", "cpu", "--model", model, "--adapter", adapter, "--tokenizer", vocab, "--data", dev},
		{"predict", "--device", "cpu", "--model", model, "--adapter", adapter, "--tokenizer", vocab, "--input", dev},
		{"merge", "--model", model, "--adapter", adapter, "--output", filepath.Join(t.TempDir(), "merged")},
	} {
		code, _, stderr := runTune(t, args...)
		if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("says r = %d but", scale*r)) ||
			!strings.Contains(stderr, fmt.Sprintf(`set "r": %d in`, r)) {
			t.Errorf("tune %s: exit %d (want %d), stderr %q", args[0], code, exitUsage, stderr)
		}
	}
	code, stdout, stderr := runTune(t, "inspect", adapter)
	if code != exitOK || !strings.Contains(stdout, fmt.Sprintf("warning: %s says r = %d but", cfgPath, scale*r)) {
		t.Errorf("tune inspect: exit %d, stdout %q, stderr %q; want the mismatch as a warning", code, stdout, stderr)
	}
}
