package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setSafetensorsDType rewrites the header of the safetensors file path so that tensor name is stored as dtype
// (of the same element size: the data is left as it is).
func setSafetensorsDType(t *testing.T, path, name, dtype string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	var h map[string]map[string]any
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	if h[name] == nil {
		t.Fatalf("%s holds no tensor %s", path, name)
	}
	h[name]["dtype"] = dtype
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	hb = append(hb, bytes.Repeat([]byte(" "), (8-len(hb)%8)%8)...)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(out, hb...), b[8+n:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWrongDTypeWeight: a weight stored as I32 (same bytes, another dtype in the header) is bad input for eval
// (exit 2, naming the file, the tensor and the dtypes the model takes, no Go API names), and inspect, which
// reads only the headers, flags it and exits 2 as it does for a mis-shaped tensor.
func TestWrongDTypeWeight(t *testing.T) {
	model, _ := tinyModelDir(t)
	const name = "bert.embeddings.LayerNorm.bias"
	setSafetensorsDType(t, filepath.Join(model, "model.safetensors"), name, "I32")
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	want := name + " is I32, but the model needs a floating-point tensor (F32, F16 or BF16) here"
	code, _, stderr := runCLI("eval", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--data", filepath.Join(tiny, "dev.tsv"))
	if code != exitUsage || !strings.Contains(stderr, filepath.Join(model, "model.safetensors")) || !strings.Contains(stderr, want) ||
		strings.Contains(stderr, "Int64") || strings.Count(stderr, name) != 1 {
		t.Errorf("eval: exit %d, %s; want %d and %q once", code, stderr, exitUsage, want)
	}
	code, stdout, stderr := runCLI("inspect", model)
	if code != exitUsage || !strings.Contains(stdout, "1 of another dtype") || !strings.Contains(stdout, "wrong dtype: "+want) ||
		!strings.Contains(stderr, want) {
		t.Errorf("inspect: exit %d, stdout %s, stderr %s; want %d and %q", code, stdout, stderr, exitUsage, want)
	}
}
