package bert

import (
	"github.com/tune-ml/tune/transformer"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestSaveLoadRoundTrip: Save writes every parameter under its HF name with {"format":"pt"} and a config.json
// transformers reads as BertForSequenceClassification; LoadPretrained and Load read it back bit for bit.
func TestSaveLoadRoundTrip(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	cfg.ID2Label = []string{"negative", "neutral", "positive"}
	m := newTestModel(t, b, cfg, 8)
	batch := testBatch(2, 5, cfg.VocabSize, 3, []int{5, 3})
	want, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range m.NamedParameters() {
		names = append(names, p.Name)
		if info, ok := ck.Info(p.Name); !ok || info.DType != "F32" || !slices.Equal(info.Shape, []int(p.Value.Shape)) {
			t.Errorf("%s: saved as %+v (present %v), want F32 %v", p.Name, info, ok, p.Value.Shape)
		}
	}
	if ck.Len() != len(names) {
		t.Errorf("checkpoint holds %d tensors, model %d", ck.Len(), len(names))
	}
	if md := ck.Metadata(); md["format"] != "pt" {
		t.Errorf("metadata %v, want format pt", md)
	}
	ck.Close()
	hf, err := loaders.ReadBertConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hf.Architectures, []string{"BertForSequenceClassification"}) || hf.ModelType != "bert" ||
		hf.NumLabels() != 3 || hf.ID2Label[2] != "positive" || hf.HiddenSize != cfg.HiddenSize {
		t.Errorf("config.json read back as %+v", hf)
	}

	loaded, report, err := LoadPretrained(dir, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || len(report.Initialized) > 0 || len(report.Unexpected) > 0 {
		t.Errorf("report: %v; initialized %v", report, report.Initialized)
	}
	got, err := loaded.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Logits, want.Logits) {
		t.Errorf("logits after LoadPretrained %v, before %v", got.Logits, want.Logits)
	}

	other := newTestModel(t, b, cfg, 9)
	if err := other.Load(dir); err != nil {
		t.Fatal(err)
	}
	if got, err = other.Forward(batch, transformer.ForwardOptions{HostLogits: true}); err != nil || !slices.Equal(got.Logits, want.Logits) {
		t.Errorf("logits after Load %v (err %v), want %v", got.Logits, err, want.Logits)
	}
	if err := newTestModel(t, b, tinyConfig(), 1).Load(t.TempDir()); err == nil {
		t.Error("Load from an empty directory succeeded")
	}
}

// writeCheckpoint saves m's parameters renamed by rename (dropped when it returns "") with m's config.
func writeCheckpoint(t *testing.T, m *BertForSequenceClassification, rename func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	var hosts []loaders.HostTensor
	for _, p := range m.NamedParameters() {
		name := rename(p.Name)
		if name == "" {
			continue
		}
		ht, err := loaders.NewHostTensor(name, tensor.F32, p.Value.Shape, tensortest.Download(t, m.Backend(), p.Value))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, ht)
	}
	if err := loaders.WriteSafetensors(filepath.Join(dir, loaders.SafetensorsWeightsName), hosts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadPretrainedOtherHeads loads checkpoints of other BERT heads and naming eras.
func TestLoadPretrainedOtherHeads(t *testing.T) {
	b := cpuBackend()
	src := newTestModel(t, b, tinyConfig(), 8)
	batch := testBatch(2, 5, 50, 3, []int{5, 3})
	for _, c := range []struct {
		why         string
		rename      func(string) string
		opts        transformer.LoadOptions
		initialized []string
		wantErr     string
	}{
		{"BertModel checkpoint: no prefix, no classifier", func(n string) string {
			if strings.HasPrefix(n, "classifier.") {
				return ""
			}
			return strings.TrimPrefix(n, "bert.")
		}, transformer.LoadOptions{}, []string{"classifier.weight", "classifier.bias"}, ""},
		{"legacy transformer.LayerNorm gamma/beta names", func(n string) string {
			n = strings.Replace(n, "LayerNorm.weight", "LayerNorm.gamma", 1)
			return strings.Replace(n, "LayerNorm.bias", "LayerNorm.beta", 1)
		}, transformer.LoadOptions{}, nil, ""},
		{"BertForMaskedLM-like: no pooler, no classifier", func(n string) string {
			if strings.HasPrefix(n, "classifier.") || strings.HasPrefix(n, "bert.pooler.") {
				return ""
			}
			return n
		}, transformer.LoadOptions{}, []string{"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"}, ""},
		{"num_labels override re-initialises the classifier", func(n string) string { return n },
			transformer.LoadOptions{NumLabels: 5}, []string{"classifier.weight", "classifier.bias"}, ""},
		{"missing encoder tensor is an error", func(n string) string {
			if n == "bert.encoder.layer.1.output.dense.weight" {
				return ""
			}
			return n
		}, transformer.LoadOptions{}, nil, "bert.encoder.layer.1.output.dense.weight"},
	} {
		t.Run(c.why, func(t *testing.T) {
			dir := writeCheckpoint(t, src, c.rename)
			m, report, err := LoadPretrained(dir, b, c.opts)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(report.Initialized, c.initialized) {
				t.Errorf("initialized %v, want %v", report.Initialized, c.initialized)
			}
			if (report.Notice() != "") != (len(c.initialized) > 0) {
				t.Errorf("notice %q for initialized %v", report.Notice(), c.initialized)
			}
			// Every parameter that was loaded equals the source's.
			srcParams := map[string][]float32{}
			for _, p := range src.NamedParameters() {
				srcParams[p.Name] = tensortest.Download(t, b, p.Value)
			}
			for _, p := range m.NamedParameters() {
				if slices.Contains(report.Initialized, p.Name) {
					continue
				}
				if !slices.Equal(tensortest.Download(t, b, p.Value), srcParams[p.Name]) {
					t.Errorf("%s differs from the checkpoint", p.Name)
				}
			}
			out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Logits) != 2*m.Config.NumLabels() {
				t.Errorf("%d logits for num_labels %d", len(out.Logits), m.Config.NumLabels())
			}
		})
	}
}

// TestTinyBertRandomLoadsAndRuns loads ../shared/data/tiny-bert-random (saved by transformers 5.17) and runs a
// training step on it.
func TestTinyBertRandomLoadsAndRuns(t *testing.T) {
	dir := testutil.SharedData(t, "tiny-bert-random")
	m, report, err := LoadPretrained(dir, cpuBackend(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || len(report.Initialized) > 0 || len(report.Unexpected) > 0 {
		t.Fatalf("report: %v", report)
	}
	batch := testBatch(2, 9, m.Config.VocabSize, m.Config.NumLabels(), []int{9, 4})
	out := transformertest.Step(t, m, batch, 1)
	for _, v := range append(out.Logits, out.Loss) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("non-finite output %v loss %v", out.Logits, out.Loss)
		}
	}
	t.Logf("%s; loss %.4f", report.LoadReport, out.Loss)
}
