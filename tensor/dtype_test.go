package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// f32b builds a float32 from its bits; p2 returns 2^e exactly.
func f32b(u uint32) float32 { return math.Float32frombits(u) }

func p2(e int) float32 { return float32(math.Ldexp(1, e)) }

func TestF32ToF16Bits(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"+0", 0, 0x0000},
		{"-0 keeps its sign", float32(math.Copysign(0, -1)), 0x8000},
		{"1", 1, 0x3C00},
		{"-2", -2, 0xC000},
		{"65504, the largest finite", 65504, 0x7BFF},
		{"65519.99 rounds down to 65504", 65519.99, 0x7BFF},
		{"65520 (the midpoint to 2^16) overflows to +Inf", 65520, 0x7C00},
		{"-65520 overflows to -Inf", -65520, 0xFC00},
		{"1e10 overflows", 1e10, 0x7C00},
		{"+Inf", float32(math.Inf(1)), 0x7C00},
		{"-Inf", float32(math.Inf(-1)), 0xFC00},
		{"tie 1+2^-11 rounds down to even 1", 1 + p2(-11), 0x3C00},
		{"tie 1+3·2^-11 rounds up to even 1+2^-9", 1 + 3*p2(-11), 0x3C02},
		{"just above the tie 1+2^-11 rounds up", 1 + p2(-11) + p2(-23), 0x3C01},
		{"negative tie rounds to even", -(1 + p2(-11)), 0xBC00},
		{"smallest subnormal 2^-24", p2(-24), 0x0001},
		{"-2^-24", -p2(-24), 0x8001},
		{"largest subnormal 1023·2^-24", 1023 * p2(-24), 0x03FF},
		{"smallest normal 2^-14", p2(-14), 0x0400},
		{"2^-25 (half the smallest subnormal) ties to even 0", p2(-25), 0x0000},
		{"-2^-25 ties to -0", -p2(-25), 0x8000},
		{"just above 2^-25 rounds up into the subnormals", p2(-25) + p2(-40), 0x0001},
		{"2^-26 underflows to 0", p2(-26), 0x0000},
		{"subnormal tie 3·2^-25 rounds up to even 2·2^-24", 3 * p2(-25), 0x0002},
		{"subnormal tie 5·2^-25 rounds down to even 2·2^-24", 5 * p2(-25), 0x0002},
		{"1023.5·2^-24 rounds out of the subnormals to 2^-14", 1023.5 * p2(-24), 0x0400},
	}
	for _, c := range cases {
		if got := F32ToF16(c.in); got != c.want {
			t.Errorf("%s: F32ToF16(%g) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
	for _, nan := range []uint32{0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000} {
		if h := F32ToF16(f32b(nan)); h&0x7C00 != 0x7C00 || h&0x03FF == 0 {
			t.Errorf("NaN %#08x became %#04x, which is not an F16 NaN", nan, h)
		}
	}
}

func TestF16ToF32Bits(t *testing.T) {
	cases := []struct {
		in   uint16
		want float32
	}{
		{0x0001, p2(-24)}, {0x03FF, 1023 * p2(-24)}, {0x0400, p2(-14)}, {0x3C00, 1}, {0x7BFF, 65504},
		{0x7C00, float32(math.Inf(1))}, {0xFC00, float32(math.Inf(-1))}, {0xC000, -2},
	}
	for _, c := range cases {
		if got := F16ToF32(c.in); got != c.want {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", c.in, got, c.want)
		}
	}
	if z := F16ToF32(0x8000); z != 0 || !math.Signbit(float64(z)) {
		t.Errorf("F16ToF32(0x8000) = %g, want -0", z)
	}
	if v := F16ToF32(0x7E00); !math.IsNaN(float64(v)) {
		t.Errorf("F16ToF32(0x7E00) = %g, want NaN", v)
	}
}

func TestF32ToBF16Bits(t *testing.T) {
	cases := []struct {
		name string
		in   uint32
		want uint16
	}{
		{"+0", 0x00000000, 0x0000},
		{"-0", 0x80000000, 0x8000},
		{"1", 0x3F800000, 0x3F80},
		{"+Inf", 0x7F800000, 0x7F80},
		{"-Inf", 0xFF800000, 0xFF80},
		{"quiet NaN → canonical 0x7FC0", 0x7FC00000, 0x7FC0},
		{"negative NaN → canonical 0x7FC0", 0xFFC00000, 0x7FC0},
		{"signalling NaN with a low payload stays NaN (0x7FC0), not Inf", 0x7F800001, 0x7FC0},
		{"tie 1+2^-8 rounds down to even 1", 0x3F808000, 0x3F80},
		{"tie 1+3·2^-8 rounds up to even", 0x3F818000, 0x3F82},
		{"just above a tie rounds up", 0x3F808001, 0x3F81},
		{"just below a tie rounds down", 0x3F807FFF, 0x3F80},
		{"mantissa carry into the exponent: 1.99609375+ → 2", 0x3FFF8000, 0x4000},
		{"carry from 0.998… to 1", 0x3F7F8000, 0x3F80},
		{"largest finite bf16 3.3895314e38 is exact", 0x7F7F0000, 0x7F7F},
		{"below the last midpoint stays finite", 0x7F7F7FFF, 0x7F7F},
		{"the midpoint above the largest finite rounds to +Inf", 0x7F7F8000, 0x7F80},
		{"float32 max rounds to +Inf", 0x7F7FFFFF, 0x7F80},
		{"-float32 max rounds to -Inf", 0xFF7FFFFF, 0xFF80},
		{"smallest f32 subnormal rounds to 0", 0x00000001, 0x0000},
		{"subnormal tie rounds down to even 0", 0x00008000, 0x0000},
		{"subnormal tie rounds up to even 2", 0x00018000, 0x0002},
		{"above a subnormal tie rounds up", 0x00008001, 0x0001},
		{"largest bf16 subnormal tie rounds out to the smallest normal", 0x007FC000, 0x0080},
		{"negative tiny subnormal rounds to -0", 0x80000001, 0x8000},
	}
	for _, c := range cases {
		if got := F32ToBF16(f32b(c.in)); got != c.want {
			t.Errorf("%s: F32ToBF16(%#08x) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
}

func TestBF16ToF32Bits(t *testing.T) {
	cases := []struct {
		in   uint16
		want float32
	}{
		{0x0001, p2(-133)}, {0x0080, p2(-126)}, {0x3F80, 1}, {0x7F7F, 3.3895314e38}, {0x7F80, float32(math.Inf(1))}, {0xC000, -2},
	}
	for _, c := range cases {
		if got := BF16ToF32(c.in); got != c.want {
			t.Errorf("BF16ToF32(%#04x) = %g, want %g", c.in, got, c.want)
		}
	}
	if v := BF16ToF32(0x7FC0); !math.IsNaN(float64(v)) {
		t.Errorf("BF16ToF32(0x7FC0) = %g, want NaN", v)
	}
}

// TestHalfRoundTripsEveryValue widens all 65536 bit patterns and narrows them back: every non-NaN pattern
// returns unchanged (so widening is exact), NaN stays NaN.
func TestHalfRoundTripsEveryValue(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		u := uint16(h)
		if f := F16ToF32(u); f == f {
			if back := F32ToF16(f); back != u {
				t.Fatalf("F16 %#04x → %g → %#04x", u, f, back)
			}
		} else if back := F32ToF16(f); back&0x7C00 != 0x7C00 || back&0x03FF == 0 {
			t.Fatalf("F16 NaN %#04x → %#04x is not NaN", u, back)
		}
		if f := BF16ToF32(u); f == f {
			if back := F32ToBF16(f); back != u {
				t.Fatalf("BF16 %#04x → %g → %#04x", u, f, back)
			}
		} else if back := F32ToBF16(f); back != 0x7FC0 {
			t.Fatalf("BF16 NaN %#04x → %#04x, want 0x7FC0", u, back)
		}
	}
}

// TestHalfRoundingIsNearestEven checks random float32 bit patterns against the definition: the result is at
// least as close as either neighbour, a tie goes to the even mantissa, and a result of ±Inf only happens at
// or beyond the midpoint between the largest finite value and the next power of two.
func TestHalfRoundingIsNearestEven(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	formats := []struct {
		name     string
		narrow   func(float32) uint16
		widen    func(uint16) float32
		maxBits  uint16  // largest finite magnitude
		overflow float64 // the midpoint above it
	}{
		{"F16", F32ToF16, F16ToF32, 0x7BFF, 65520},
		{"BF16", F32ToBF16, BF16ToF32, 0x7F7F, float64(BF16ToF32(0x7F7F)) + math.Ldexp(1, 127-8)},
	}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			for range 200000 {
				x := math.Float32frombits(rng.Uint32())
				if x != x {
					continue
				}
				// Random bits are mostly far outside F16's range; also sample its range densely.
				if f.name == "F16" && rng.IntN(2) == 0 {
					x = float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(45)-28))
				}
				h := f.narrow(x)
				sign, mag := h&0x8000, h&0x7FFF
				ax := math.Abs(float64(x))
				if mag > f.maxBits { // ±Inf
					if ax < f.overflow {
						t.Fatalf("%g became Inf below the overflow midpoint %g", x, f.overflow)
					}
					continue
				}
				d := math.Abs(float64(x) - float64(f.widen(h)))
				for _, nb := range []int{int(mag) - 1, int(mag) + 1} {
					if nb < 0 || nb > int(f.maxBits) {
						continue
					}
					dn := math.Abs(float64(x) - float64(f.widen(sign|uint16(nb))))
					if dn < d || dn == d && h&1 == 1 {
						t.Fatalf("%g (%#08x) → %#04x, but neighbour %#04x is nearer or an equally near even",
							x, math.Float32bits(x), h, sign|uint16(nb))
					}
				}
			}
		})
	}
}

func TestRoundTo(t *testing.T) {
	x := 1 + p2(-8) + p2(-12)
	cases := []struct {
		dt   DType
		want float32
	}{{F32, x}, {F16, 1 + p2(-8)}, {BF16, 1 + p2(-7)}}
	for _, c := range cases {
		if got := RoundTo(c.dt, x); got != c.want {
			t.Errorf("RoundTo(%v, %g) = %g, want %g", c.dt, x, got, c.want)
		}
	}
}

// TestWidenNarrowHalf checks that the slice conversions agree bit for bit with the element conversions, over
// values that round up, round to even, overflow, underflow and are NaN.
func TestWidenNarrowHalf(t *testing.T) {
	src := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 1 + p2(-8) + p2(-12), 1 + p2(-11), 70000, -1e-30,
		float32(math.Inf(1)), float32(math.NaN()), 3.14159}
	for _, tt := range []struct {
		name   string
		d      DType
		narrow func(float32) uint16
		widen  func(uint16) float32
	}{
		{"F16", F16, F32ToF16, F16ToF32},
		{"BF16", BF16, F32ToBF16, BF16ToF32},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bits := make([]uint16, len(src)+1) // one spare element that must stay untouched
			bits[len(src)] = 0xBEEF
			NarrowHalf(bits, src, tt.d)
			wide := make([]float32, len(src))
			WidenHalf(wide, bits[:len(src)], tt.d)
			for i, f := range src {
				if want := tt.narrow(f); bits[i] != want {
					t.Errorf("NarrowHalf(%g) = %#04x, want %#04x", f, bits[i], want)
				}
				if want := tt.widen(bits[i]); math.Float32bits(wide[i]) != math.Float32bits(want) {
					t.Errorf("WidenHalf(%#04x) = %g, want %g", bits[i], wide[i], want)
				}
			}
			if bits[len(src)] != 0xBEEF {
				t.Errorf("NarrowHalf wrote past len(src)")
			}
		})
	}
}
