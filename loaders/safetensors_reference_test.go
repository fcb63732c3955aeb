package loaders

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor"
)

// referenceManifest is testdata/safetensors/reference/manifest.json, written by
// tools/reference/make_safetensors_fixtures.py with torch, transformers and safetensors.
type referenceManifest struct {
	Versions map[string]string `json:"versions"`
	Mixed    struct {
		HeaderLength uint64               `json:"header_length"`
		Offsets      map[string][2]uint64 `json:"offsets"`
		Values       map[string][]float64 `json:"values"`
	} `json:"mixed"`
	SharedMemoryError string `json:"shared_memory_error"`
	Seqcls            map[string]struct {
		DType string    `json:"dtype"`
		Shape []int     `json:"shape"`
		First []float64 `json:"first"`
		Sum   float64   `json:"sum"`
	} `json:"seqcls"`
	MLM struct {
		StateDictKeys   []string `json:"state_dict_keys"`
		TiedSameStorage bool     `json:"tied_same_storage"`
	} `json:"mlm"`
}

// referenceDir returns testdata/safetensors/reference and its manifest, or skips naming the script to run.
func referenceDir(t *testing.T) (string, *referenceManifest) {
	t.Helper()
	dir := testutil.Testdata(t, "safetensors", "reference")
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Skipf("no reference fixtures (%v): run python3 tools/reference/make_safetensors_fixtures.py testdata/safetensors/reference on a machine with torch, transformers and safetensors", err)
	}
	var m referenceManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	t.Logf("reference fixtures from %v", m.Versions)
	return dir, &m
}

// TestReferenceWriterBytes compares tune's writer with safetensors' save_file: B22's file byte for byte, and the
// mixed-dtype file's header length, offsets and data section.
func TestReferenceWriterBytes(t *testing.T) {
	dir, m := referenceDir(t)
	t.Run("B22 88 bytes", func(t *testing.T) {
		want, err := os.ReadFile(filepath.Join(dir, "b22.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "b22.safetensors")
		if err := WriteSafetensors(p, []HostTensor{{Name: "test", DType: tensor.I32, Shape: []int{2, 2}, Data: make([]byte, 16)}}, map[string]string{}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) || len(want) != 88 {
			t.Errorf("tune wrote %q, save_file wrote %q", got, want)
		}
	})
	t.Run("mixed dtypes", func(t *testing.T) {
		ref, err := OpenCheckpoint(filepath.Join(dir, "mixed.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		var ours []HostTensor
		for _, name := range ref.Names() {
			ht, err := ref.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			if ht.DType.IsFloat() {
				fs, _ := ht.Float32()
				for _, v := range fs {
					got = append(got, float64(v))
				}
			} else {
				is, _ := ht.Int64()
				for _, v := range is {
					got = append(got, float64(v))
				}
			}
			if want := m.Mixed.Values[name]; !equalF64(got, want) {
				t.Errorf("%s = %v, torch has %v", name, got, want)
			}
			ours = append(ours, HostTensor{Name: name, DType: ht.DType, Shape: ht.Shape, Data: bytes.Clone(ht.Data)})
		}
		p := filepath.Join(t.TempDir(), "mixed.safetensors")
		if err := WriteSafetensors(p, ours, nil); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		want, _ := os.ReadFile(filepath.Join(dir, "mixed.safetensors"))
		n := binary.LittleEndian.Uint64(got)
		if n != m.Mixed.HeaderLength || !bytes.Equal(got[8+n:], want[8+n:]) {
			t.Errorf("header length %d (save_file %d); data sections equal: %v", n, m.Mixed.HeaderLength, bytes.Equal(got[8+n:], want[8+n:]))
		}
		c, err := OpenCheckpoint(p)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, e := range c.files[0].hdr.entries {
			if off := m.Mixed.Offsets[e.name]; off != [2]uint64{e.begin, e.end} {
				t.Errorf("%s at [%d, %d), save_file put it at %v", e.name, e.begin, e.end, off)
			}
		}
	})
	t.Run("B23 shared memory refused by both", func(t *testing.T) {
		if !strings.HasPrefix(m.SharedMemoryError, "Some tensors share memory") {
			t.Errorf("save_file's error %q is not the expected one", m.SharedMemoryError)
		}
	})
}

// TestReferenceModels loads transformers' save_pretrained output: the config round-trips byte for byte, every
// tensor matches the name table and torch's values, the sharded copy equals the single file, the bf16 and fp16
// copies equal our rounding of the fp32 weights, and the masked-LM checkpoint is complete without the tied decoder.
func TestReferenceModels(t *testing.T) {
	dir, m := referenceDir(t)
	open := func(t *testing.T, sub string) (*BertConfig, *Checkpoint) {
		t.Helper()
		cfg, err := ReadBertConfig(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		ck, err := OpenCheckpoint(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ck.Close() })
		return cfg, ck
	}
	cfg, single := open(t, "seqcls")
	t.Run("config round trip", func(t *testing.T) {
		if cfg.NumLabels() != 3 || cfg.ID2Label[2] != "POS" || cfg.Label2ID["NEU"] != 1 || cfg.HiddenSize != 32 {
			t.Errorf("config = %+v", cfg)
		}
		p := filepath.Join(t.TempDir(), "config.json")
		if err := cfg.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		want, _ := os.ReadFile(filepath.Join(dir, "seqcls", ConfigName))
		if !bytes.Equal(got, want) {
			t.Errorf("config.json round trip differs:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("values and names", func(t *testing.T) {
		mapping, r := MapBertCheckpoint(BertSequenceClassificationTensors(cfg), single.Infos(), cfg)
		if !r.OK() || r.Matched != len(m.Seqcls) || len(r.Unexpected) != 0 {
			t.Fatalf("report:\n%s", r)
		}
		for name, want := range m.Seqcls {
			ht, err := single.Get(mapping[name])
			if err != nil {
				t.Fatal(err)
			}
			v, err := ht.Float32()
			if err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for _, x := range v {
				sum += float64(x)
			}
			first := make([]float64, min(8, len(v)))
			for i := range first {
				first[i] = float64(v[i])
			}
			if !equalF64(first, want.First) || math.Abs(sum-want.Sum) > 1e-9+1e-12*float64(len(v)) {
				t.Errorf("%s: first %v sum %v; torch %v sum %v", name, first, sum, want.First, want.Sum)
			}
		}
	})
	t.Run("sharded equals single", func(t *testing.T) {
		_, sharded := open(t, "seqcls-sharded")
		if len(sharded.Files()) < 2 || sharded.Len() != single.Len() {
			t.Fatalf("%d shards, %d tensors", len(sharded.Files()), sharded.Len())
		}
		for _, name := range single.Names() {
			a, _ := single.Get(name)
			b, err := sharded.Get(name)
			if err != nil || !bytes.Equal(a.Data, b.Data) {
				t.Errorf("%s differs between the single file and the shards (%v)", name, err)
			}
		}
	})
	for _, half := range []struct {
		sub   string
		dtype tensor.DType
	}{{"seqcls-bf16", tensor.BF16}, {"seqcls-fp16", tensor.F16}} {
		t.Run(half.sub+" equals our rounding", func(t *testing.T) {
			_, ck := open(t, half.sub)
			for _, name := range single.Names() {
				a, _ := single.Get(name)
				b, err := ck.Get(name)
				if err != nil || b.DType != half.dtype {
					t.Fatalf("%s: %v %v", name, b.DType, err)
				}
				full, _ := a.Float32()
				got, _ := b.Float32()
				for i := range full {
					if want := tensor.RoundTo(half.dtype, full[i]); math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("%s[%d]: torch rounded %v to %v, tune to %v", name, i, full[i], got[i], want)
					}
				}
			}
		})
	}
	t.Run("B23 masked LM without the tied decoder", func(t *testing.T) {
		mcfg, ck := open(t, "mlm")
		if _, ok := ck.Info("cls.predictions.decoder.weight"); ok || !m.MLM.TiedSameStorage {
			t.Errorf("transformers saved the tied decoder weight (tied in memory: %v)", m.MLM.TiedSameStorage)
		}
		_, r := MapBertCheckpoint(BertMaskedLMTensors(mcfg), ck.Infos(), mcfg)
		tiedDecoder := false
		for _, tt := range r.Tied {
			tiedDecoder = tiedDecoder || tt.Name == "cls.predictions.decoder.weight"
		}
		if !r.OK() || !tiedDecoder || len(r.Unexpected) != 0 {
			t.Errorf("report:\n%s", r)
		}
	})
}

func equalF64(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
