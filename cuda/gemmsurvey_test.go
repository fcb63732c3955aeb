//go:build cuda

package cuda_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestGemmSurveyReportsABestConfig surveys one BF16 GEMM with a fused bias (512×768×256 NT → BF16), among the
// shapes earlier tests planned, and checks that the survey emits a TABLE row for it whose configuration is no
// slower than heuristic #0.
func TestGemmSurveyReportsABestConfig(t *testing.T) {
	gpu := openOrSkip(t)
	const m, n, k = 512, 768, 256
	alloc := func(d tensor.DType, size int) *tensor.Tensor {
		x, err := gpu.Alloc(d, size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gpu.Free(x) })
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(i%17-8) / 8
		}
		if err := gpu.Upload(x, v); err != nil {
			t.Fatal(err)
		}
		return x
	}
	A, B, C, bias := alloc(tensor.BF16, m*k), alloc(tensor.BF16, n*k), alloc(tensor.BF16, m*n), alloc(tensor.BF16, n)
	if err := gpu.Gemm(tensor.GemmArgs{TransB: true, M: m, N: n, K: k, A: A, B: B, C: C, Bias: bias, Alpha: 1, Batch: 1}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := cuda.SurveyGemms(gpu, &out, cuda.GemmSurveyOptions{Heuristics: 4, Enumerate: true, Budget: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	var row struct {
		M, N, K int
		Bias    string
		Us      float64 `json:"us"`
		H0      float64 `json:"h0_us"`
	}
	found := false
	for _, l := range strings.Split(out.String(), "\n") {
		if js, ok := strings.CutPrefix(l, "TABLE "); ok {
			if err := json.Unmarshal([]byte(js), &row); err != nil {
				t.Fatalf("TABLE row %q: %v", js, err)
			}
			if row.M == m && row.N == n && row.K == k {
				found = true
				break
			}
		}
	}
	if !found {
		t.Fatalf("no TABLE row for %d×%d×%d", m, n, k)
	}
	if row.Bias != "BF16" || row.Us <= 0 || row.Us > row.H0 {
		t.Errorf("row: bias %q, best %.2f µs, heuristic #0 %.2f µs: want the BF16 bias and best ≤ #0", row.Bias, row.Us, row.H0)
	}
}
