package bench

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestPyTorchScriptAgrees runs the torch-free helpers of tools/reference/bench_pytorch.py (flops_per_step and
// percentile) and checks they compute what this package does, so TFLOP/s and percentiles of the two
// implementations compare like for like. It skips without python3.
func TestPyTorchScriptAgrees(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found; the formula check of tools/reference/bench_pytorch.py needs it")
	}
	script := filepath.Join(testutil.RepoRoot(t), "tools", "reference", "bench_pytorch.py")
	const prog = `
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bp", sys.argv[1])
bp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bp)
f = bp.BERT_BASE
out = {"flops": [bp.flops_per_step(f["layers"], f["hidden"], f["intermediate"], f["labels"], b, t, r)
                 for b, t, r in [(32, 128, 0), (64, 512, 0), (32, 128, 8), (64, 512, 8), (3, 5, 4)]],
       "small": bp.flops_per_step(2, 32, 64, 2, 3, 5, 4),
       "pct": [bp.percentile([4, 1, 3, 2], q) for q in (10, 50, 90)] + [bp.percentile([7.5, 1.25, 3.0], 37)]}
print(json.dumps(out))
`
	raw, err := exec.Command(py, "-c", prog, script).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, raw)
	}
	var got struct {
		FLOPs []float64 `json:"flops"`
		Small float64   `json:"small"`
		Pct   []float64 `json:"pct"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	base, err := ModelConfig("bert-base")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name    string
		b, t, r int
	}{
		{"bert-base 32×128 full", 32, 128, 0},
		{"bert-base 64×512 full", 64, 512, 0},
		{"bert-base 32×128 LoRA r=8", 32, 128, 8},
		{"bert-base 64×512 LoRA r=8", 64, 512, 8},
		{"bert-base 3×5 LoRA r=4", 3, 5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := closedForm(base, tc.b, tc.t, tc.r); got.FLOPs[i] != want {
				t.Errorf("bench_pytorch.py counts %v FLOPs, tune %v", got.FLOPs[i], want)
			}
		})
	}
	t.Run("the small test model with LoRA, as CountFLOPs counts it", func(t *testing.T) {
		if want := closedForm(smallConfig(), 3, 5, 4); got.Small != want {
			t.Errorf("bench_pytorch.py counts %v, tune %v", got.Small, want)
		}
	})
	t.Run("percentiles", func(t *testing.T) {
		want := []float64{Percentile([]float64{4, 1, 3, 2}, 10), Percentile([]float64{4, 1, 3, 2}, 50),
			Percentile([]float64{4, 1, 3, 2}, 90), Percentile([]float64{7.5, 1.25, 3.0}, 37)}
		for i := range want {
			if d := got.Pct[i] - want[i]; d > 1e-12 || d < -1e-12 {
				t.Errorf("percentile %d: python %v, Go %v", i, got.Pct[i], want[i])
			}
		}
	})
}
