package main

import (
	"strconv"
	"strings"
	"testing"
)

func line(from string, m int, us, h0 float64, align, rebuilt, bias string) string {
	return `TABLE {"sm":90,"gpu":"NVIDIA H200","cublaslt":130100,"ab":"BF16","c":"F32","bias":"` + bias + `","transA":true,"transB":false,` +
		`"m":` + itoa(m) + `,"n":768,"k":4096,"lda":768,"ldb":768,"ldc":768,"align":[` + align + `],"config":{"algo":66,"tile":20},` +
		`"from":"` + from + `","us":` + ftoa(us) + `,"h0_us":` + ftoa(h0) + `,"rebuilt":"` + rebuilt + `"}`
}

func itoa(v int) string { return strconv.Itoa(v) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// TestChoose checks which survey rows become table rows and how they are converted.
func TestChoose(t *testing.T) {
	in := strings.Join([]string{
		"bf16 768×768×4096 TN →f32  [..]",
		line("h3", 768, 20, 25, "256,256,256", "same bytes", "Invalid"),                          // kept (25% faster)
		line("e", 768, 18, 25, "16,256,256", "differs in bytes, same bits, 18.00 µs", "Invalid"), // same key, less aligned: wins
		line("h1", 1536, 24.5, 25, "256,256,256", "same bytes", "Invalid"),                       // 2% gain: below -min-gain
		line("h0", 2304, 25, 25, "256,256,256", "same bytes", "Invalid"),                         // heuristic #0 itself
		line("e", 3072, 10, 25, "256,256,256", "differs", "Invalid"),                             // not rebuilt: no row
		line("h2", 4096, 10, 25, "256,256,256", "same bytes", "BF16"),                            // kept, with its bias
	}, "\n")
	rows, err := readSurvey(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("read %d TABLE rows, want 6", len(rows))
	}
	out := choose(rows, 0.03)
	if len(out) != 2 {
		t.Fatalf("chose %d rows, want 2: %+v", len(out), out)
	}
	a, b := out[0], out[1]
	if a.M != 4096 || b.M != 768 { // sorted by fmt.Sprint of M…: "4096 …" < "768 …"
		t.Fatalf("rows M = %d, %d; want 4096, 768", a.M, b.M)
	}
	if b.US != 18 || b.GPU != "H200" || b.CuBLASLt != "13.1" || b.Bias != "" || !b.TransA || string(b.Config) != `{"algo":66,"tile":20}` {
		t.Errorf("768 row = %+v; want the less aligned survey row, GPU H200, cuBLASLt 13.1, no bias", b)
	}
	if a.Bias != "BF16" {
		t.Errorf("4096 row bias %q, want BF16", a.Bias)
	}
}

// TestMerge checks that -keep's old rows stay unless a new row has their key, and that the result is sorted.
func TestMerge(t *testing.T) {
	row := func(m int, us float64) tableRow {
		return tableRow{SM: 90, GPU: "H200", CuBLASLt: "13.1", gemmDims: gemmDims{AB: "BF16", C: "F32", M: m, N: 8, K: 768}, US: us}
	}
	out := merge([]tableRow{row(4096, 9), row(768, 30)}, []tableRow{row(4096, 5), row(2304, 7)})
	if len(out) != 3 {
		t.Fatalf("merged %d rows, want 3: %+v", len(out), out)
	}
	got := map[int]float64{}
	for _, r := range out {
		got[r.M] = r.US
	}
	if got[4096] != 5 || got[768] != 30 || got[2304] != 7 {
		t.Errorf("merged rows %v; want the new 4096 row (5 µs), the old 768 row and the new 2304 row", got)
	}
	if out[0].M != 2304 || out[1].M != 4096 || out[2].M != 768 {
		t.Errorf("order %d, %d, %d; want 2304, 4096, 768 (as text)", out[0].M, out[1].M, out[2].M)
	}
}
