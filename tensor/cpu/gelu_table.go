package cpu

import "math"

// The standard normal CDF Φ and density φ for the FP32 GELU kernels, by cubic Hermite interpolation of a table
// of exact values. GELU(x) = x·Φ(x) and its derivative Φ(x) + x·φ(x) are dominated by math.Erf and math.Exp
// (float64, two Exp calls on part of the range) when computed directly; the table gives both at a few
// multiply-adds. Knots x_i = i·h on [−normTableMax, normTableMax] hold Φ(x_i) and φ(x_i) in float64; between
// knots, Hermite interpolation uses the exact derivatives Φ' = φ and φ' = −x·φ, so its error is at most
// h⁴/384·max|f⁗| (de Boor, "A Practical Guide to Splines", ch. IV): with h = 1/128 about 1e-11 for Φ and φ
// for φ, far below FP32's half ulp (6e-8 relative). Outside the table (|x| > 8, where Φ is 0 or 1 to 15 digits)
// the exact formula is used. The float64 kernels (the FP64 gradcheck) keep the exact formula throughout.
const (
	normTableInvH = 128 // 1/h
	normTableMax  = 8
	normTableN    = 2*normTableMax*normTableInvH + 1
)

// normTable holds (Φ(x_i), φ(x_i)) for x_i = −normTableMax + i·h.
var normTable = func() (t [normTableN][2]float64) {
	for i := range t {
		x := -normTableMax + float64(i)/normTableInvH
		t[i] = [2]float64{0.5 * math.Erfc(-x/math.Sqrt2), invSqrt2Pi * math.Exp(-0.5*x*x)}
	}
	return t
}()

// normCDFPDF returns Φ(x) and φ(x).
func normCDFPDF(x float64) (cdf, pdf float64) {
	u := (x + normTableMax) * normTableInvH
	if !(u >= 0 && u < normTableN-1) { // also NaN
		return 0.5 * math.Erfc(-x/math.Sqrt2), invSqrt2Pi * math.Exp(-0.5*x*x)
	}
	i := int(u)
	t := u - float64(i)
	const h = 1.0 / normTableInvH
	x0 := -normTableMax + float64(i)*h
	a, b := normTable[i], normTable[i+1]
	s := 1 - t
	h00, h01 := (1+2*t)*s*s, t*t*(3-2*t)
	h10, h11 := t*s*s*h, -t*t*s*h
	cdf = h00*a[0] + h10*a[1] + h01*b[0] + h11*b[1]
	pdf = h00*a[1] - h10*x0*a[1] + h01*b[1] - h11*(x0+h)*b[1]
	return cdf, pdf
}

// normCDF returns Φ(x) alone (the forward needs no density): normCDFPDF's first result.
func normCDF(x float64) float64 {
	u := (x + normTableMax) * normTableInvH
	if !(u >= 0 && u < normTableN-1) {
		return 0.5 * math.Erfc(-x/math.Sqrt2)
	}
	i := int(u)
	t := u - float64(i)
	const h = 1.0 / normTableInvH
	a, b := normTable[i], normTable[i+1]
	s := 1 - t
	return (1+2*t)*s*s*a[0] + t*s*s*h*a[1] + t*t*(3-2*t)*b[0] - t*t*s*h*b[1]
}

// geluF32 and geluBackwardF32 are geluKernel and geluBackwardKernel for float32 through the table. With AVX-512
// (hasSIMD) the table is interpolated eight elements at a time by the same float64 operations in the same order
// (simd_amd64.s), which gives the same bits; elements outside the table then go through the scalar code.
func geluF32(out, x []float32) {
	out = out[:len(x)]
	if hasSIMD && len(x) > 0 && !geluTableAVX512(&out[0], &x[0], len(x), &normTable[0][0]) {
		return
	}
	for i, v := range x {
		f := float64(v)
		if hasSIMD && inNormTable(f) {
			continue
		}
		out[i] = float32(f * normCDF(f))
	}
}

func geluBackwardF32(dx, dout, x []float32) {
	dx, dout = dx[:len(x)], dout[:len(x)]
	if hasSIMD && len(x) > 0 && !geluBackwardTableAVX512(&dx[0], &dout[0], &x[0], len(x), &normTable[0][0]) {
		return
	}
	for i, v := range x {
		f := float64(v)
		if hasSIMD && inNormTable(f) {
			continue
		}
		c, p := normCDFPDF(f)
		dx[i] = dout[i] * float32(c+f*p)
	}
}

// inNormTable reports whether normCDF interpolates x from the table (the range the SIMD kernels compute).
func inNormTable(x float64) bool {
	u := (x + normTableMax) * normTableInvH
	return u >= 0 && u < normTableN-1
}
