package cuda

import (
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestGemmTableParses checks the committed table: it parses, every key is unique, and each row's
// configuration is found again by lookup under its own key.
func TestGemmTableParses(t *testing.T) {
	tab, err := parseGemmTable(gemmTableJSON)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for s, es := range tab {
		for _, e := range es {
			n++
			if _, ok := tab.lookup(s, "NVIDIA "+e.gpu+" X"); !ok {
				t.Errorf("row %v on GPU %q is not found by lookup", s, e.gpu)
			}
		}
	}
	t.Logf("%d rows", n)
}

const tableRow = `{"sm": 90, "gpu": "H200", "cublaslt": "13.1", "ab": "BF16", "c": "BF16", "bias": "BF16", "transA": false,
 "transB": true, "m": 4096, "n": 768, "k": 768, "lda": 768, "ldb": 768, "ldc": 768,
 "config": {"algo": 66, "tile": 20, "stages": 8, "splitk": 1, "reduction": 0, "swizzle": 0, "custom": 0, "inner": 0, "cluster": 2},
 "us": 10.5, "h0_us": 12.5}`

func tableOf(rows ...string) []byte {
	return []byte(`{"about": ["test"], "rows": [` + strings.Join(rows, ",") + `]}`)
}

// TestGemmTableLookup checks that a row matches only its own key (GPU name by substring) and that every other
// shape, GPU, library version, layout or epilogue falls back (no entry: heuristic #0).
func TestGemmTableLookup(t *testing.T) {
	other := strings.Replace(strings.Replace(tableRow, `"H200"`, `"H100"`, 1), `"algo": 66`, `"algo": 31`, 1)
	tab, err := parseGemmTable(tableOf(tableRow, other))
	if err != nil {
		t.Fatal(err)
	}
	key := gemmShape{sm: 90, ltMajor: 13, ltMinor: 1, ab: tensor.BF16, c: tensor.BF16, bias: tensor.BF16, transB: true,
		m: 4096, n: 768, k: 768, lda: 768, ldb: 768, ldc: 768}
	if c, ok := tab.lookup(key, "NVIDIA H200"); !ok || c.ID != 66 || c.Tile != 20 || c.Stages != 8 || c.Cluster != 2 || c.SplitK != 1 {
		t.Fatalf("lookup on the H200 = %+v, %v; want the H200 row's config", c, ok)
	}
	if c, ok := tab.lookup(key, "NVIDIA H100 80GB HBM3"); !ok || c.ID != 31 {
		t.Fatalf("lookup on an H100 = %+v, %v; want the H100 row's config", c, ok)
	}
	miss := map[string]func(*gemmShape){
		"sm":       func(s *gemmShape) { s.sm = 89 },
		"cuBLASLt": func(s *gemmShape) { s.ltMinor = 2 },
		"major":    func(s *gemmShape) { s.ltMajor = 12 },
		"dtype":    func(s *gemmShape) { s.ab, s.c, s.bias = tensor.F16, tensor.F16, tensor.F16 },
		"C dtype":  func(s *gemmShape) { s.c = tensor.F32 },
		"no bias":  func(s *gemmShape) { s.bias = tensor.Invalid },
		"transA":   func(s *gemmShape) { s.transA = true },
		"M":        func(s *gemmShape) { s.m = 4095 },
		"ldc":      func(s *gemmShape) { s.ldc = 2304 },
	}
	for name, f := range miss {
		s := key
		f(&s)
		if c, ok := tab.lookup(s, "NVIDIA H200"); ok {
			t.Errorf("%s changed: lookup found %+v, want no entry", name, c)
		}
	}
	if c, ok := tab.lookup(key, "NVIDIA A100-SXM4-80GB"); ok {
		t.Errorf("an A100 found %+v, want no entry", c)
	}
}

// TestGemmTableRejects checks that a malformed table is an error naming the row.
func TestGemmTableRejects(t *testing.T) {
	cases := map[string][]byte{
		"duplicate":       tableOf(tableRow, tableRow),
		"atomic split-K":  tableOf(strings.Replace(tableRow, `"splitk": 1, "reduction": 0`, `"splitk": 4, "reduction": 1`, 1)),
		"output split-K":  tableOf(strings.Replace(tableRow, `"splitk": 1, "reduction": 0`, `"splitk": 2, "reduction": 4`, 1)),
		"unknown field":   tableOf(strings.Replace(tableRow, `"us"`, `"usec"`, 1)),
		"dtype":           tableOf(strings.Replace(tableRow, `"ab": "BF16"`, `"ab": "I32"`, 1)),
		"version":         tableOf(strings.Replace(tableRow, `"13.1"`, `"13"`, 1)),
		"version padding": tableOf(strings.Replace(tableRow, `"13.1"`, `"13.01"`, 1)),
		"ld":              tableOf(strings.Replace(tableRow, `"ldb": 768`, `"ldb": 700`, 1)),
		"size":            tableOf(strings.Replace(tableRow, `"k": 768`, `"k": 0`, 1)),
		"gpu":             tableOf(strings.Replace(tableRow, `"H200"`, `""`, 1)),
	}
	for name, data := range cases {
		if _, err := parseGemmTable(data); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	ok := strings.Replace(tableRow, `"splitk": 1, "reduction": 0`, `"splitk": 3, "reduction": 2`, 1)
	if _, err := parseGemmTable(tableOf(ok)); err != nil {
		t.Errorf("split-K with the compute-type reduction: %v", err)
	}
}

// TestLtMajorMinor checks the split of cublasLtGetVersion()'s number.
func TestLtMajorMinor(t *testing.T) {
	for v, want := range map[int][2]int{130100: {13, 1}, 120804: {12, 8}, 111103: {11, 11}} {
		if a, b := ltMajorMinor(v); a != want[0] || b != want[1] {
			t.Errorf("ltMajorMinor(%d) = %d.%d, want %d.%d", v, a, b, want[0], want[1])
		}
	}
}
