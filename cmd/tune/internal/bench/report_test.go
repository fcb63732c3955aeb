package bench

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fake returns a result of impl for bert-base b×t in mode, with a median step time and a peak in GiB.
func fake(impl string, b, t int, mode string, lora bool, ms, peakGiB float64) Result {
	r := Result{Impl: impl, Model: "bert-base", Batch: b, Seq: t, Mode: mode, LoRA: lora, MedianMS: ms,
		P10MS: ms * 0.99, P90MS: ms * 1.02, TokensPerS: float64(b*t) / (ms / 1e3), TFLOPS: 100,
		PeakBytes: int64(peakGiB * gib), StepMS: []float64{ms}}
	if impl != ImplTune {
		r.Attention = "sdpa"
	}
	if lora {
		r.LoRARank = 8
	}
	return r
}

func sampleResults() []Result {
	return []Result{
		fake(ImplTune, 64, 512, "bf16", false, 60, 15),
		fake(ImplTune, 32, 128, "bf16", true, 20, 1.5),
		fake(ImplPyTorchEager, 64, 512, "bf16", false, 69.4, 13.9),
		fake(ImplPyTorchCompile, 64, 512, "bf16", false, 60.4, 12.6),
		fake(ImplPyTorchEager, 32, 128, "bf16", true, 34.9, 1.86),
	}
}

func TestCompare(t *testing.T) {
	rows := Compare(sampleResults())
	if len(rows) != 2 || rows[0].Key != "bert-base 64×512 bf16" || rows[1].Key != "bert-base 32×128 bf16 LoRA r=8" {
		t.Fatalf("rows %+v: want the two configurations in order of appearance", rows)
	}
	if rows[0].Tune == nil || len(rows[0].Others) != 2 || rows[0].Others[0].Impl != ImplPyTorchCompile {
		t.Errorf("row 0: tune %v, others %v: want tune and [compile, eager]", rows[0].Tune, rows[0].Others)
	}
}

func TestTargets(t *testing.T) {
	ts := Targets(sampleResults())
	for i, tc := range []struct {
		name string
		met  bool
		got  float64
	}{
		{"64×512 throughput: 69.4 ms against 60 ms is 1.16×, met", true, 69.4 / 60},
		{"64×512 memory: 15 GiB against 13.9 GiB is 1.08×, missed", false, 15 / 13.9},
		{"32×128 LoRA throughput: 34.9 ms against 20 ms is 1.745×, met", true, 34.9 / 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !ts[i].Measured || ts[i].Met != tc.met || math.Abs(ts[i].Got-tc.got) > 1e-9 {
				t.Errorf("%+v: want measured, met %v, ratio %v", ts[i], tc.met, tc.got)
			}
		})
	}
	t.Run("a configuration without PyTorch eager is not measured", func(t *testing.T) {
		ts := Targets(sampleResults()[:2])
		var buf bytes.Buffer
		if err := WriteTargets(&buf, ts); err != nil {
			t.Fatal(err)
		}
		if ts[0].Measured || strings.Count(buf.String(), "not measured") != 3 {
			t.Errorf("targets without PyTorch results:\n%s", buf.String())
		}
	})
}

func TestWriteComparison(t *testing.T) {
	for _, tc := range []struct {
		name     string
		markdown bool
		want     []string
	}{
		{"text table with tune/x ratios", false, []string{"time tune/x", "bert-base 64×512 bf16", "0.86", "1.08", "pytorch-compile"}},
		{"markdown table", true, []string{"| configuration | implementation |", "|---|", "| bert-base 32×128 bf16 LoRA r=8 | tune | 20.00 |", "| 0.57 | 0.81 |"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteComparison(&buf, sampleResults(), tc.markdown); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, buf.String())
				}
			}
		})
	}
}

func TestWriteTableAndBreakdown(t *testing.T) {
	r := fake(ImplTune, 32, 128, "fp16", false, 25, 3)
	r.SkippedSteps, r.LossFirst, r.LossLast = 2, 0.7, 0.69
	r.Breakdown = &Breakdown{Steps: 2, StepMS: 25, LaunchMS: 0.004, Timing: "CUDA events",
		Ops:   []OpStat{{Op: "Gemm forward (f16)", Calls: 148, MS: 20, FLOPs: 2e12, Bytes: 1e9}, {Op: "AdamW", Calls: 2, MS: 4, Bytes: 4e9}},
		Gemms: []OpStat{{Op: "f16 4096×2304×768 NT →f16", Calls: 24, MS: 6, FLOPs: 1e12}}}
	var buf bytes.Buffer
	if err := WriteTable(&buf, []Result{r}); err != nil {
		t.Fatal(err)
	}
	if err := WriteBreakdown(&buf, &r); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"fp16", "full", "25.00", "163,840", "3.00", "0.7000→0.6900",
		"12.0 ms/step in ops", "74", "10.000", "83.3%", "100.0", "f16 4096×2304×768 NT"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, buf.String())
		}
	}
	if strings.Contains(buf.String(), "host ms/step") {
		t.Errorf("a breakdown without host times shows a host column:\n%s", buf.String())
	}
	// With a gated timer's host times (and a call that waited), the host column appears.
	r.Breakdown.Ops[1].HostMS, r.Breakdown.Ops[1].Waits = 0.9, 1
	buf.Reset()
	if err := WriteBreakdown(&buf, &r); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"host ms/step", "0.450", "(1 waited for the device)"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, buf.String())
		}
	}
}

func TestChart(t *testing.T) {
	data, err := Chart(sampleResults())
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 500 {
		t.Errorf("image %v, want a readable size", b)
	}
	if _, err := Chart(nil); err == nil {
		t.Error("Chart(nil) succeeded, want an error")
	}
	path := filepath.Join(t.TempDir(), "bench.png")
	if err := WriteChart(path, sampleResults()); err != nil {
		t.Fatal(err)
	}
	if err := WriteChart(path, sampleResults()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second WriteChart: %v, want a refusal to overwrite", err)
	}
}

func TestResultFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	f := &File{Tool: "tune bench", Date: "2026-01-01T00:00:00Z", Results: sampleResults()}
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 5 || back.Results[1].Key() != "bert-base 32×128 bf16 LoRA r=8" || back.Results[0].PeakBytes != 15*gib {
		t.Errorf("read back %+v", back.Results)
	}
	if err := WriteFile(path, f); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("overwrite: %v, want a refusal", err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", "{", "not a results file: invalid JSON: line 1 column 1"},
		// Said "json: cannot unmarshal array into Go value of type bench.File".
		{"a JSON array", "[]", "not a results file: line 1 column 1: want an object, got a list"},
		{"a wrong type", `{"results": [{"batch": "8"}]}`, `"results.batch": want an integer, got a string`},
		{"no results", `{"tool":"x","results":[]}`, "holds no results"},
		{"a result without a median", `{"results":[{"impl":"tune","batch":1,"seq":1,"mode":"fp32"}]}`, "lacks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestWriteNewErrors checks the errors of WriteFile and WriteChart, which write through atomicfile.WriteNew: a
// missing directory is reported against the destination (not a temporary file's name), an existing file is
// refused and left as it was, and no temporary file is left behind either way.
func TestWriteNewErrors(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.json")
	if err := os.WriteFile(existing, []byte("the user's"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent", "r.json")
	f := &File{Tool: "tune bench", Date: "2026-01-01T00:00:00Z", Results: sampleResults()}
	tests := []struct {
		name, path string
		write      func(string) error
		want       string // a fragment of the error
	}{
		{"WriteFile into a missing directory names the destination", missing,
			func(p string) error { return WriteFile(p, f) }, "bench: writing " + missing + ": "},
		{"WriteChart into a missing directory names the destination", missing,
			func(p string) error { return WriteChart(p, sampleResults()) }, "bench: writing " + missing + ": "},
		{"WriteFile refuses an existing file", existing,
			func(p string) error { return WriteFile(p, f) }, "bench: " + existing + " already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.write(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), ".tmp") {
				t.Errorf("err = %v, want one holding %q and no temporary name", err, tt.want)
			}
			if data, _ := os.ReadFile(existing); string(data) != "the user's" {
				t.Errorf("%s now holds %.40q", existing, data)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("directory holds %d entries, want only existing.json", len(ents))
			}
		})
	}
}

// TestDecoderTargets: the decoder goals appear once a decoder configuration is measured, and are judged against
// PyTorch eager: 100 ms against 130 ms is 1.3× (met), 12 GiB against 20 GiB is 0.6× (missed).
func TestDecoderTargets(t *testing.T) {
	tune := Result{Impl: ImplTune, Model: "smollm2-135m", Batch: 8, Seq: 2048, Mode: "bf16", MedianMS: 100, PeakBytes: 12 << 30}
	torch := tune
	torch.Impl, torch.Attention, torch.MedianMS, torch.PeakBytes = ImplPyTorchEager, "sdpa", 130, 20<<30
	if n := len(Targets(sampleResults())); n != 3 {
		t.Errorf("%d targets without a decoder result, want BERT's 3", n)
	}
	ts := Targets([]Result{tune, torch})
	if len(ts) != 5 || !ts[3].Measured || !ts[3].Met || math.Abs(ts[3].Got-1.3) > 1e-9 || !ts[4].Measured || ts[4].Met || math.Abs(ts[4].Got-0.6) > 1e-9 {
		t.Errorf("decoder targets %+v", ts)
	}
}
