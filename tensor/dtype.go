package tensor

import (
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DType is the element type of a Tensor.
type DType uint8

// The element types a Backend stores. Floating-point ops compute in FP32 whatever the storage type and round
// to the output's type on store (round-to-nearest-even for F16 and BF16).
const (
	// Invalid is the zero DType; no tensor has it.
	Invalid DType = iota
	// F32 is IEEE-754 binary32.
	F32
	// F16 is IEEE-754 binary16 (half), converted with github.com/x448/float16.
	F16
	// BF16 is bfloat16: the top 16 bits of a binary32, rounded to nearest even (PyTorch's c10::BFloat16).
	BF16
	// I32 is a signed 32-bit integer (token ids, labels).
	I32
	// I64 is a signed 64-bit integer (token ids and labels as PyTorch stores them).
	I64
)

var dtypeNames = [...]string{Invalid: "invalid", F32: "F32", F16: "F16", BF16: "BF16", I32: "I32", I64: "I64"}

// String returns the safetensors spelling of d ("F32", "BF16", ...).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the size of one element in bytes (0 for Invalid).
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case I64:
		return 8
	}
	return 0
}

// IsFloat reports whether d is a floating-point type (F32, F16 or BF16).
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 }

// IsHalf reports whether d is a 16-bit floating-point type (F16 or BF16).
func (d DType) IsHalf() bool { return d == F16 || d == BF16 }

// ParseDType parses a safetensors / PyTorch dtype name ("F32", "float32", "bf16", ...).
func ParseDType(s string) (DType, error) {
	switch s {
	case "F32", "f32", "float32", "fp32", "float":
		return F32, nil
	case "F16", "f16", "float16", "fp16", "half":
		return F16, nil
	case "BF16", "bf16", "bfloat16":
		return BF16, nil
	case "I32", "i32", "int32":
		return I32, nil
	case "I64", "i64", "int64", "long":
		return I64, nil
	}
	return Invalid, fmt.Errorf("tensor: unknown dtype %q (want one of F32, F16, BF16, I32, I64)", s)
}

// F32ToF16 rounds f to IEEE binary16 (round-to-nearest-even; values past 65504 after rounding become ±Inf;
// below 2^-25 they flush to signed zero; NaN stays a quiet NaN) and returns its bits.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// F16ToF32 widens binary16 bits to float32 exactly (subnormals included).
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// F32ToBF16 rounds f to bfloat16 bits with round-to-nearest-even, as PyTorch's c10::BFloat16
// round_to_nearest_even: any NaN becomes the canonical quiet NaN 0x7FC0; otherwise
// bits = (u + 0x7FFF + ((u>>16)&1)) >> 16, so values that round past the largest finite bf16 become ±Inf.
func F32ToBF16(f float32) uint16 {
	if f != f {
		return 0x7FC0
	}
	u := math.Float32bits(f)
	return uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)
}

// BF16ToF32 widens bfloat16 bits to float32 exactly (a 16-bit left shift).
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// RoundTo returns f rounded to dtype d and widened back to float32 (identity for F32). It is what storing f into a
// tensor of type d and reading it back gives.
func RoundTo(d DType, f float32) float32 {
	switch d {
	case F16:
		return F16ToF32(F32ToF16(f))
	case BF16:
		return BF16ToF32(F32ToBF16(f))
	}
	return f
}

// WidenHalf widens the F16 or BF16 bit patterns src (dtype d) to float32 exactly into dst[:len(src)], as
// F16ToF32 or BF16ToF32 do element by element. d must be F16 or BF16 (any other value is read as BF16); dst must
// be at least as long as src.
func WidenHalf(dst []float32, src []uint16, d DType) {
	if d == F16 {
		for i, h := range src {
			dst[i] = F16ToF32(h)
		}
		return
	}
	for i, h := range src {
		dst[i] = BF16ToF32(h)
	}
}

// NarrowHalf rounds the float32 values src to F16 or BF16 bits (dtype d) into dst[:len(src)], round-to-nearest-
// even, as F32ToF16 or F32ToBF16 do element by element. d must be F16 or BF16 (any other value writes BF16);
// dst must be at least as long as src.
func NarrowHalf(dst []uint16, src []float32, d DType) {
	if d == F16 {
		for i, f := range src {
			dst[i] = F32ToF16(f)
		}
		return
	}
	for i, f := range src {
		dst[i] = F32ToBF16(f)
	}
}
