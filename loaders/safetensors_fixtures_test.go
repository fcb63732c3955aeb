package loaders

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor"
)

var updateSafetensorsFixtures = flag.Bool("update-safetensors-fixtures", false,
	"regenerate testdata/safetensors/ (go test ./loaders -run TestSafetensorsFixtures -update-safetensors-fixtures)")

// fixtureTensors makes deterministic F32 values for specs (a splitmix64 hash of tensor and element index mapped to
// multiples of 1/20000 in [-0.05, 0.05], exact on every platform),
// renaming each name with rename (nil keeps it; "" drops it).
func fixtureTensors(t testing.TB, specs []TensorSpec, rename func(string) string) []HostTensor {
	t.Helper()
	var out []HostTensor
	for k, s := range specs {
		name := s.Name
		if rename != nil {
			name = rename(name)
		}
		if name == "" {
			continue
		}
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			h := splitmix64(uint64(k)<<32 | uint64(i))
			v[i] = float32(int(h%2001)-1000) / 20000
		}
		ht, err := NewHostTensor(name, tensor.F32, s.Shape, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ht)
	}
	return out
}

// splitmix64 is Steele, Lea and Flood's 64-bit mixing function (SplittableRandom).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// writeFixtures writes the fixture checkpoints into dir:
//   - bert-tiny: a BertForSequenceClassification (tinyConfig: 3 labels) as save_pretrained writes it;
//   - bert-tiny-sharded: the same tensors in two shards plus model.safetensors.index.json;
//   - bert-legacy: hub-style pretraining names (LayerNorm.gamma/beta, position_ids buffer, cls.* heads);
//   - bert-mlm-tied: a BertForMaskedLM saved without the tied cls.predictions.decoder.weight.
func writeFixtures(t testing.TB, dir string) {
	t.Helper()
	cfg := tinyConfig(t)
	seq := fixtureTensors(t, BertSequenceClassificationTensors(cfg), nil)
	write := func(sub string, c *BertConfig, tensors []HostTensor) {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFile(filepath.Join(d, ConfigName)); err != nil {
			t.Fatal(err)
		}
		if tensors != nil {
			if err := WriteSafetensors(filepath.Join(d, SafetensorsWeightsName), tensors, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("bert-tiny", cfg, seq)

	write("bert-tiny-sharded", cfg, nil)
	shards := [][]HostTensor{seq[:20], seq[20:]}
	weightMap := map[string]string{}
	var totalSize, totalParams int
	for i, ts := range shards {
		name := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i]
		for _, ht := range ts {
			weightMap[ht.Name] = name
			totalSize += len(ht.Data)
			totalParams += ht.NumElements()
		}
		if err := WriteSafetensors(filepath.Join(dir, "bert-tiny-sharded", name), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	index, _ := json.MarshalIndent(map[string]any{
		"metadata":   map[string]int{"total_parameters": totalParams, "total_size": totalSize},
		"weight_map": weightMap,
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "bert-tiny-sharded", SafetensorsIndexName), append(index, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}

	pre := *cfg
	pre.Architectures = []string{"BertForPreTraining"}
	pre.ID2Label, pre.Label2ID = defaultLabels(2), invertLabels(defaultLabels(2))
	mlm := BertMaskedLMTensors(&pre)
	legacy := fixtureTensors(t, append(BertSequenceClassificationTensors(&pre)[:37+2], mlm[37:]...), legacyName)
	ids := make([]int64, pre.MaxPositionEmbeddings)
	for i := range ids {
		ids[i] = int64(i)
	}
	posIDs, err := NewHostTensorInt64("bert.embeddings.position_ids", []int{1, len(ids)}, ids)
	if err != nil {
		t.Fatal(err)
	}
	legacy = append(legacy, posIDs)
	legacy = append(legacy, fixtureTensors(t, []TensorSpec{
		{"cls.seq_relationship.weight", []int{2, pre.HiddenSize}}, {"cls.seq_relationship.bias", []int{2}},
	}, nil)...)
	write("bert-legacy", &pre, legacy)

	mlmCfg := pre
	mlmCfg.Architectures = []string{"BertForMaskedLM"}
	write("bert-mlm-tied", &mlmCfg, fixtureTensors(t, mlm, func(n string) string {
		if n == "cls.predictions.decoder.weight" {
			return ""
		}
		return n
	}))
}

// TestSafetensorsFixtures checks that testdata/safetensors/ is what writeFixtures produces now, byte for byte (the
// writer is deterministic), and regenerates it with -update-safetensors-fixtures.
func TestSafetensorsFixtures(t *testing.T) {
	committed := testutil.Testdata(t, "safetensors")
	if *updateSafetensorsFixtures {
		for _, sub := range []string{"bert-tiny", "bert-tiny-sharded", "bert-legacy", "bert-mlm-tied"} {
			os.RemoveAll(filepath.Join(committed, sub))
		}
		writeFixtures(t, committed)
	}
	fresh := t.TempDir()
	writeFixtures(t, fresh)
	err := filepath.WalkDir(fresh, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fresh, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(committed, rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("testdata/safetensors/%s is stale or missing (%v); regenerate with go test ./loaders -run TestSafetensorsFixtures -update-safetensors-fixtures", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFixtureCheckpoints opens each fixture and matches it against the model its config describes.
func TestFixtureCheckpoints(t *testing.T) {
	tests := []struct {
		dir     string
		mlm     bool
		matched int
		missing []string
		renamed int
		ignored int
		tied    int
		files   int
	}{
		{"bert-tiny", false, 41, nil, 0, 0, 0, 1},
		{"bert-tiny-sharded", false, 41, nil, 0, 0, 0, 2},
		{"bert-legacy", false, 39, []string{"classifier.weight", "classifier.bias"}, 10, 10, 0, 1},
		{"bert-mlm-tied", true, 43, nil, 0, 0, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			dir := testutil.Testdata(t, "safetensors", tt.dir)
			cfg, err := ReadBertConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			expected := BertSequenceClassificationTensors(cfg)
			if tt.mlm {
				expected = BertMaskedLMTensors(cfg)
			}
			mapping, r := MapBertCheckpoint(expected, ck.Infos(), cfg)
			if r.Matched != tt.matched || strings.Join(r.Missing, ",") != strings.Join(tt.missing, ",") ||
				len(r.Renamed) != tt.renamed || len(r.Ignored) != tt.ignored || len(r.Tied) != tt.tied ||
				len(r.Unexpected) != 0 || len(ck.Files()) != tt.files {
				t.Errorf("%d files, report:\n%s", len(ck.Files()), r)
			}
			for name, key := range mapping {
				ht, err := ck.Get(key)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ht.Float32(); err != nil {
					t.Errorf("%s (%s): %v", name, key, err)
				}
			}
		})
	}
}
