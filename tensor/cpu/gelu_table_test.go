package cpu

import (
	"math"
	"testing"
)

// TestNormTable checks the interpolated Φ and φ of the FP32 GELU against the exact formulas over the table's
// range, between knots and at them, and beyond it: the error must stay below 1e-9 absolute and, for Φ in the
// lower tail, 1e-6 relative.
func TestNormTable(t *testing.T) {
	worstAbs, worstRel := 0.0, 0.0
	for x := -9.0; x <= 9.0; x += 1.0 / 1000 {
		c, p := normCDFPDF(x)
		if c2 := normCDF(x); c2 != c {
			t.Fatalf("normCDF(%v) = %v, normCDFPDF gives %v", x, c2, c)
		}
		wc, wp := 0.5*math.Erfc(-x/math.Sqrt2), invSqrt2Pi*math.Exp(-0.5*x*x)
		worstAbs = max(worstAbs, math.Abs(c-wc), math.Abs(p-wp))
		if wc > 0 {
			worstRel = max(worstRel, math.Abs(c-wc)/wc)
		}
	}
	if worstAbs > 1e-9 || worstRel > 1e-6 {
		t.Fatalf("worst error of the table: %.3g absolute, %.3g relative", worstAbs, worstRel)
	}
	t.Logf("worst error of the table: %.3g absolute, %.3g relative", worstAbs, worstRel)
	if c, p := normCDFPDF(math.NaN()); !math.IsNaN(c) || !math.IsNaN(p) {
		t.Fatalf("NaN gives %v, %v", c, p)
	}
	if c, _ := normCDFPDF(math.Inf(-1)); c != 0 {
		t.Fatalf("Φ(−Inf) = %v", c)
	}
}
