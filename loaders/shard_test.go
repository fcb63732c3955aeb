package loaders

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// writeShardedCheckpoint writes tensors a.0 .. a.11 (F32 [2], value i) into two shards of dir plus an index that
// lists weightMap (built from the shards when nil), and returns the index path.
func writeShardedCheckpoint(t *testing.T, dir string, weightMap map[string]string) string {
	t.Helper()
	shards := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
	built := map[string]string{}
	for s, shard := range shards {
		var ts []HostTensor
		for i := 6 * s; i < 6*s+6; i++ {
			name := fmt.Sprintf("a.%d", i)
			ht, err := NewHostTensor(name, tensor.F32, []int{2}, []float32{float32(i), float32(i)})
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, ht)
			built[name] = shard
		}
		if err := WriteSafetensors(filepath.Join(dir, shard), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	if weightMap == nil {
		weightMap = built
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 96, "total_parameters": 24}, "weight_map": weightMap})
	p := filepath.Join(dir, SafetensorsIndexName)
	if err := os.WriteFile(p, idx, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShardedCheckpoint opens a two-shard checkpoint by directory and by index path and reads tensors from both.
func TestShardedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	index := writeShardedCheckpoint(t, dir, nil)
	for _, path := range []string{dir, index} {
		c, err := OpenCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		wantNames := []string{"a.0", "a.1", "a.2", "a.3", "a.4", "a.5", "a.6", "a.7", "a.8", "a.9", "a.10", "a.11"}
		if got := c.Names(); !reflect.DeepEqual(got, wantNames) {
			t.Errorf("Names = %v, want %v (natural order)", got, wantNames)
		}
		if c.Index == nil || c.Index.TotalSize != 96 || c.Index.TotalParameters != 24 || len(c.Files()) != 2 {
			t.Errorf("Index = %+v, Files = %v", c.Index, c.Files())
		}
		for _, name := range []string{"a.2", "a.11"} {
			ht, err := c.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := ht.Float32()
			ti, _ := c.Info(name)
			if want := float32(map[string]int{"a.2": 2, "a.11": 11}[name]); v[0] != want {
				t.Errorf("%s = %v, want %v (from %s)", name, v, want, ti.File)
			}
		}
		c.Close()
	}
}

// TestShardedCheckpointErrors checks the errors of a broken sharded checkpoint: each names the index and the
// shard or tensor at fault.
func TestShardedCheckpointErrors(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		words  []string
		target error
	}{
		{"a shard file is missing", func(t *testing.T, dir string) {
			writeShardedCheckpoint(t, dir, nil)
			os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		}, []string{"shard model-00002-of-00002.safetensors", "6 tensors", `"a.6"`, "missing"}, os.ErrNotExist},
		{"the index places a tensor in the wrong shard", func(t *testing.T, dir string) {
			writeShardedCheckpoint(t, dir, map[string]string{"a.0": "model-00002-of-00002.safetensors"})
		}, []string{`tensor "a.0"`, "does not hold it"}, nil},
		{"the index names a file outside its directory", func(t *testing.T, dir string) {
			writeShardedCheckpoint(t, dir, map[string]string{"a.0": "../model-00001-of-00002.safetensors"})
		}, []string{"not a file name in the index's directory"}, nil},
		{"no weight_map", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsIndexName), []byte(`{"metadata":{}}`), 0o644)
		}, []string{`no "weight_map"`}, nil},
		{"total_size not a number", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, SafetensorsIndexName), []byte(`{"metadata":{"total_size":"big"},"weight_map":{"a":"b.safetensors"}}`), 0o644)
		}, []string{"metadata.total_size"}, nil},
		{"a corrupt shard", func(t *testing.T, dir string) {
			writeShardedCheckpoint(t, dir, nil)
			os.WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), make([]byte, 5), 0o644)
		}, []string{"model-00001-of-00002.safetensors", "header too small"}, ErrHeaderTooSmall},
		{"a directory without weights", func(t *testing.T, dir string) {}, []string{"neither model.safetensors nor model.safetensors.index.json"}, ErrNoWeights},
		{"a directory with only pytorch_model.bin", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("pickle"), 0o644)
		}, []string{"found pytorch_model.bin", "which tune does not read", "safe_serialization=True"}, ErrNoWeights},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			c, err := OpenCheckpoint(dir)
			if err == nil {
				c.Close()
				t.Fatal("OpenCheckpoint succeeded")
			}
			for _, w := range tt.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("error %q does not wrap %v", err, tt.target)
			}
		})
	}
}

// TestNaturalLess checks the order Names uses.
func TestNaturalLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"layer.2.x", "layer.10.x", true},
		{"layer.10.x", "layer.2.x", false},
		{"layer.02", "layer.2", false},
		{"a", "b", true},
		{"a.1", "a.1.b", true},
		{"a", "a", false},
	}
	for _, tt := range tests {
		if got := naturalLess(tt.a, tt.b); got != tt.want {
			t.Errorf("naturalLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestShardIndexNamesTheSameTensor (tester): an index placing several tensors outside its directory named one
// of them at random (Go's map order); the first in sorted order is named on every run.
func TestShardIndexNamesTheSameTensor(t *testing.T) {
	dir := t.TempDir()
	writeShardedCheckpoint(t, dir, map[string]string{"a.0": "../x.safetensors", "a.1": "../x.safetensors", "a.2": "../y.safetensors"})
	for range 20 {
		_, err := OpenCheckpoint(dir)
		if err == nil || !strings.Contains(err.Error(), `tensor "a.0" maps to "../x.safetensors"`) {
			t.Fatalf("error %v, want it to name a.0, the first in sorted order", err)
		}
	}
}
