package loaders

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestWriteB22ExactBytes checks safetensors' header padding (safetensors/src/tensor.rs): {"test": I32 [2,2] zeros} is written as the 88-byte reference file
// (prefix 64, the 60-byte JSON plus 4 spaces, data at byte 72).
func TestWriteB22ExactBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b22.safetensors")
	err := WriteSafetensors(path, []HostTensor{{Name: "test", DType: tensor.I32, Shape: []int{2, 2}, Data: make([]byte, 16)}}, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b22File()) {
		t.Fatalf("wrote %d bytes %q, want the 88-byte reference %q", len(got), got, b22File())
	}
	if n := binary.LittleEndian.Uint64(got); n != 64 || (8+n)%8 != 0 {
		t.Errorf("header length %d, want 64 (data 8-byte aligned)", n)
	}
}

// TestWriteDefaultMetadata checks that nil metadata writes {"format":"pt"}, which transformers requires, with the
// header still padded to a multiple of 8.
func TestWriteDefaultMetadata(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	a, _ := NewHostTensor("a", tensor.F32, []int{3}, []float32{1, 2, 3})
	if err := WriteSafetensors(path, []HostTensor{a}, nil); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 || !strings.Contains(string(raw[8:8+n]), `"__metadata__":{"format":"pt"}`) {
		t.Errorf("header %q (n=%d) lacks format pt or is not padded to 8", raw[8:8+n], n)
	}
	c, err := OpenCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Metadata()["format"] != "pt" {
		t.Errorf("Metadata = %v", c.Metadata())
	}
}

// TestWriteOrderAndRoundTrip checks the reference writer's layout (prepare in safetensors/src/tensor.rs: dtype widest first, then name; no
// padding between tensors) and that every value reads back bit for bit after rounding to its dtype.
func TestWriteOrderAndRoundTrip(t *testing.T) {
	// src holds the float32 values each floating-point tensor was made from.
	src := map[string][]float32{
		"d_half": {1.5, -2.25}, "c_bf16": {3.0e-8}, "b_empty": {}, "a_f32": {-2.25, 3.0e-8}, "s_scalar": {65520},
	}
	in := []HostTensor{}
	for _, tt := range []struct {
		name  string
		dtype tensor.DType
		shape []int
	}{
		{"d_half", tensor.F16, []int{2}}, {"c_bf16", tensor.BF16, []int{1}}, {"b_empty", tensor.F32, []int{0, 4}},
		{"a_f32", tensor.F32, []int{2}}, {"s_scalar", tensor.F32, []int{}},
	} {
		ht, err := NewHostTensor(tt.name, tt.dtype, tt.shape, src[tt.name])
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, ht)
	}
	ids, err := NewHostTensorInt64("w_ids", []int{3}, []int64{-1, 0, 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	in = append(in, ids)
	path := filepath.Join(t.TempDir(), "mixed.safetensors")
	if err := WriteSafetensors(path, in, nil); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// I64 (24 bytes) first, then F32 by name (a_f32 8, b_empty 0, s_scalar 4), then BF16 (2), then F16 (4).
	wantOrder := []string{"w_ids", "a_f32", "b_empty", "s_scalar", "c_bf16", "d_half"}
	wantBegin := []uint64{0, 24, 32, 32, 36, 38}
	for i, e := range c.files[0].hdr.entries {
		if e.name != wantOrder[i] || e.begin != wantBegin[i] {
			t.Errorf("entry %d = %s at %d, want %s at %d", i, e.name, e.begin, wantOrder[i], wantBegin[i])
		}
	}
	for _, want := range in {
		got, err := c.Get(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.DType != want.DType || !bytes.Equal(got.Data, want.Data) || len(got.Shape) != len(want.Shape) {
			t.Errorf("%s: read %v %v %x, wrote %v %v %x", want.Name, got.DType, got.Shape, got.Data, want.DType, want.Shape, want.Data)
		}
		if !want.DType.IsFloat() {
			continue
		}
		fs, err := got.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range fs {
			if w := tensor.RoundTo(want.DType, src[want.Name][i]); v != w {
				t.Errorf("%s[%d] = %v, want %v (%v rounded to %v)", want.Name, i, v, w, src[want.Name][i], want.DType)
			}
		}
	}
	got, _ := c.Get("w_ids")
	if v, err := got.Int64(); err != nil || v[0] != -1 || v[1] != 0 || v[2] != 1<<40 {
		t.Errorf("w_ids = %v, %v; want [-1 0 2^40]", v, err)
	}
}

// TestWriteRefusesSharedMemory checks the writer half of tied weights in safetensors (shared tensors in safetensors/torch.py): two names backed by the same memory, or by
// partly overlapping views, are refused like the reference's "Some tensors share memory" and nothing is written;
// adjacent views of one buffer are fine.
func TestWriteRefusesSharedMemory(t *testing.T) {
	buf := make([]byte, 32)
	view := func(name string, lo, hi int) HostTensor {
		return HostTensor{Name: name, DType: tensor.F32, Shape: []int{(hi - lo) / 4}, Data: buf[lo:hi]}
	}
	tests := []struct {
		name    string
		tensors []HostTensor
		shared  bool
	}{
		{"tied: the same slice under two names", []HostTensor{view("cls.predictions.decoder.weight", 0, 16), view("bert.embeddings.word_embeddings.weight", 0, 16)}, true},
		{"partly overlapping views", []HostTensor{view("a", 0, 16), view("b", 8, 24)}, true},
		{"one view inside another", []HostTensor{view("a", 0, 32), view("b", 12, 16)}, true},
		{"adjacent views do not share memory", []HostTensor{view("a", 0, 16), view("b", 16, 32)}, false},
		{"an empty view at the end of another is fine", []HostTensor{view("a", 0, 16), {Name: "e", DType: tensor.F32, Shape: []int{0}, Data: buf[8:8]}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "model.safetensors")
			err := WriteSafetensors(path, tt.tensors, nil)
			if !tt.shared {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrSharedMemory) || !strings.Contains(err.Error(), "some tensors share memory") {
				t.Fatalf("err = %v, want ErrSharedMemory", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused write left %d files in %s", len(entries), dir)
			}
		})
	}
}

// TestWriteRejectsBadInput checks the writer's argument errors, and that a failed write leaves an existing file
// untouched and no temporary file behind.
func TestWriteRejectsBadInput(t *testing.T) {
	good := HostTensor{Name: "a", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}
	tests := []struct {
		name    string
		tensors []HostTensor
		words   string
	}{
		{"duplicate name", []HostTensor{good, {Name: "a", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}}, `"a" given twice`},
		{"data shorter than the shape", []HostTensor{{Name: "x", DType: tensor.F32, Shape: []int{2}, Data: make([]byte, 4)}}, "needs 8 bytes but Data has 4"},
		{"negative dimension", []HostTensor{{Name: "x", DType: tensor.F32, Shape: []int{-1}}}, "negative dimension"},
		{"invalid dtype", []HostTensor{{Name: "x", Shape: []int{1}, Data: make([]byte, 4)}}, "unsupported dtype"},
		{"reserved name", []HostTensor{{Name: "__metadata__", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}}, "invalid tensor name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "model.safetensors")
			if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteSafetensors(path, tt.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), tt.words) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, path, tt.words)
			}
			if b, _ := os.ReadFile(path); string(b) != "previous" {
				t.Errorf("the existing file was changed to %q", b)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%d files in %s after a failed write, want 1", len(entries), dir)
			}
		})
	}
}
