package cuda

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tune-ml/tune/tensor"
)

// GemmSurveyOptions configures SurveyGemms.
type GemmSurveyOptions struct {
	Heuristics int           // heuristic results requested per GEMM (default 32)
	Enumerate  bool          // also try every algorithm ID × tile × stages × swizzle × split-K the library offers
	Budget     time.Duration // time spent timing enumerated candidates per GEMM (default 0.8 s; half as long again goes to collecting them)
	MinDim     int           // skip GEMMs with M, N or K at most this (default 64: the thin LoRA products)
	Top        int           // candidates listed per GEMM (default 6)
}

// The GEMM algorithm table (gemmtable.json) names, for GEMM shapes where cuBLASLt's first heuristic result is
// measurably slower than another algorithm the library offers, the configuration to use instead: keyed by the
// GPU (compute capability and a substring of its name), the cuBLASLt version (major.minor), the dtypes, the
// layout (transposes, M, N, K, leading dimensions) and the epilogue (bias dtype). A plan whose key matches builds
// that algorithm (cublasLtMatmulAlgoInit + cublasLtMatmulAlgoConfigSetAttribute) and keeps it when
// cublasLtMatmulAlgoCheck accepts it, the workspace fits and the pointers are aligned as it needs; otherwise
// (and for every other shape) it takes heuristic result #0 as before. The rule is fixed by shape, GPU and library
// (nothing is timed at run time), so runs and resumed runs are bit-identical. TUNE_GEMM_TABLE=off ignores the
// table. The table is regenerated from `tune bench --gemm-algos all` output by tools/gemmtable (docs/CUDA.md).
//
//go:embed gemmtable.json
var gemmTableJSON []byte

// gemmTableOff is TUNE_GEMM_TABLE=off: every plan takes heuristic result #0.
var gemmTableOff = os.Getenv("TUNE_GEMM_TABLE") == "off"

// algoConfig is a cuBLASLt algorithm as its configuration attributes describe it: cublasLtMatmulAlgoInit(ID)
// followed by setting the others rebuilds it (algoConfig.build in gemmalgo.go).
type algoConfig struct {
	ID         int `json:"algo"`
	Tile       int `json:"tile"`
	Stages     int `json:"stages"`
	SplitK     int `json:"splitk"`
	Reduction  int `json:"reduction"`
	Swizzle    int `json:"swizzle"`
	Custom     int `json:"custom"`
	InnerShape int `json:"inner"`
	Cluster    int `json:"cluster"`
}

// String is the configuration in the survey's and the table's words.
func (c algoConfig) String() string {
	return fmt.Sprintf("algo=%d tile=%d stages=%d splitK=%d reduction=%d swizzle=%d custom=%d inner=%d cluster=%d",
		c.ID, c.Tile, c.Stages, c.SplitK, c.Reduction, c.Swizzle, c.Custom, c.InnerShape, c.Cluster)
}

// gemmShape is what the table is keyed by besides the GPU's name: compute capability (10·major + minor),
// cuBLASLt major.minor, A/B and C dtypes, layout and the bias dtype (Invalid: no bias epilogue).
type gemmShape struct {
	sm, ltMajor, ltMinor int
	ab, c, bias          tensor.DType
	transA, transB       bool
	m, n, k              int
	lda, ldb, ldc        int
}

// gemmTableRow is one entry of gemmtable.json.
type gemmTableRow struct {
	SM       int        `json:"sm"`
	GPU      string     `json:"gpu"`      // a substring of the device name ("H200")
	CuBLASLt string     `json:"cublaslt"` // "13.1"
	AB       string     `json:"ab"`
	C        string     `json:"c"`
	Bias     string     `json:"bias"` // "" for none
	TransA   bool       `json:"transA"`
	TransB   bool       `json:"transB"`
	M        int        `json:"m"`
	N        int        `json:"n"`
	K        int        `json:"k"`
	LDA      int        `json:"lda"`
	LDB      int        `json:"ldb"`
	LDC      int        `json:"ldc"`
	Config   algoConfig `json:"config"`
	US       float64    `json:"us"`    // measured time of Config, µs (documentation)
	H0US     float64    `json:"h0_us"` // measured time of heuristic result #0, µs (documentation)
}

// gemmTableFile is gemmtable.json.
type gemmTableFile struct {
	About []string       `json:"about"`
	Rows  []gemmTableRow `json:"rows"`
}

type gemmTableEntry struct {
	gpu string
	cfg algoConfig
}

// gemmTable is the parsed table: entries by shape, each with its GPU name pattern.
type gemmTable map[gemmShape][]gemmTableEntry

// parseGemmTable parses and checks a table: known dtypes, "major.minor" versions, positive sizes, leading
// dimensions at least the stored column counts, split-K only with the compute-type reduction, unique keys.
func parseGemmTable(data []byte) (gemmTable, error) {
	var f gemmTableFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("cuda: GEMM table: %w", err)
	}
	t := gemmTable{}
	for i, r := range f.Rows {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("cuda: GEMM table row %d (%d×%d×%d): %s", i, r.M, r.N, r.K, fmt.Sprintf(format, a...))
		}
		var s gemmShape
		var err error
		if s.ab, err = tensor.ParseDType(r.AB); err != nil || !s.ab.IsFloat() {
			return nil, bad("A/B dtype %q", r.AB)
		}
		if s.c, err = tensor.ParseDType(r.C); err != nil || !s.c.IsFloat() {
			return nil, bad("C dtype %q", r.C)
		}
		if r.Bias != "" {
			if s.bias, err = tensor.ParseDType(r.Bias); err != nil || !s.bias.IsFloat() {
				return nil, bad("bias dtype %q", r.Bias)
			}
		}
		if _, err := fmt.Sscanf(r.CuBLASLt, "%d.%d", &s.ltMajor, &s.ltMinor); err != nil || fmt.Sprintf("%d.%d", s.ltMajor, s.ltMinor) != r.CuBLASLt {
			return nil, bad("cuBLASLt version %q (want major.minor)", r.CuBLASLt)
		}
		if r.SM <= 0 || r.GPU == "" {
			return nil, bad("GPU sm %d name %q", r.SM, r.GPU)
		}
		if r.M <= 0 || r.N <= 0 || r.K <= 0 {
			return nil, bad("sizes must be positive")
		}
		ac, bc := r.K, r.N
		if r.TransA {
			ac = r.M
		}
		if r.TransB {
			bc = r.K
		}
		if r.LDA < ac || r.LDB < bc || r.LDC < r.N {
			return nil, bad("leading dimensions (%d,%d,%d) below the stored columns (%d,%d,%d)", r.LDA, r.LDB, r.LDC, ac, bc, r.N)
		}
		if c := r.Config; c.SplitK > 1 && c.Reduction != reduceComputeType {
			return nil, bad("split-K %d with reduction scheme %d: only the compute-type reduction (%d) is deterministic and rounds once", c.SplitK, c.Reduction, reduceComputeType)
		}
		s.sm, s.transA, s.transB = r.SM, r.TransA, r.TransB
		s.m, s.n, s.k, s.lda, s.ldb, s.ldc = r.M, r.N, r.K, r.LDA, r.LDB, r.LDC
		for _, e := range t[s] {
			if e.gpu == r.GPU {
				return nil, bad("duplicate key (GPU %q, cuBLASLt %s)", r.GPU, r.CuBLASLt)
			}
		}
		t[s] = append(t[s], gemmTableEntry{gpu: r.GPU, cfg: r.Config})
	}
	return t, nil
}

// lookup returns the configuration for shape s on the GPU named gpu: the first entry whose name pattern gpu
// contains.
func (t gemmTable) lookup(s gemmShape, gpu string) (algoConfig, bool) {
	for _, e := range t[s] {
		if strings.Contains(gpu, e.gpu) {
			return e.cfg, true
		}
	}
	return algoConfig{}, false
}

// reduceComputeType is CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: split-K partial sums in FP32 in the workspace,
// reduced in a separate, ordered step.
const reduceComputeType = 2

// ltMajorMinor splits cublasLtGetVersion()'s major·10000 + minor·100 + patch.
func ltMajorMinor(v int) (int, int) { return v / 10000, v / 100 % 100 }
