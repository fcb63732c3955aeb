package loaders

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// corruptCase is a corrupt safetensors file, the sentinel its error must wrap and words its message must contain.
type corruptCase struct {
	name  string
	file  []byte
	want  error
	words []string
}

// corruptCases returns every kind of corrupt file; TestCorruptSafetensors and FuzzReadHeader's seed corpus use it.
func corruptCases() []corruptCase {
	f32x2 := `{"dtype":"F32","shape":[2],"data_offsets":`
	return []corruptCase{
		{"empty file is too small for the length prefix", nil, ErrHeaderTooSmall, []string{"0 bytes"}},
		{"7-byte file (B18)", make([]byte, 7), ErrHeaderTooSmall, []string{"header too small", "7 bytes"}},
		{"prefix 2^64-1 then {} (B18)", stPrefix(math.MaxUint64, "{}"), ErrHeaderTooLarge,
			[]string{"header too large", "18446744073709551615", "100000000"}},
		{"prefix 100,000,001 (B18)", stPrefix(100_000_001, "{}"), ErrHeaderTooLarge, []string{"100000001"}},
		{"prefix 1000 in a 100-byte file (B18)", stPrefix(1000, strings.Repeat(" ", 92)), ErrInvalidHeaderLength,
			[]string{"invalid header length", "1000", "92"}},
		{"zero-length header", stPrefix(0, ""), ErrInvalidHeader, []string{"ends early"}},
		{"not JSON", stFile("{nope", nil), ErrInvalidHeader, []string{"invalid header: invalid JSON: ", "offset"}},
		{"JSON array, not an object", stFile("[]      ", nil), ErrInvalidHeader, []string{"must be an object"}},
		{"NUL padding after the JSON (B22)", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`+"\x00\x00\x00", le32(0x3fc00000)),
			ErrInvalidHeader, []string{"trailing characters", "0x00", "offset 54"}},
		{"second JSON value after the object", stFile(`{} {}`, nil), ErrInvalidHeader, []string{"trailing characters"}},
		{"header not UTF-8", stFile("{\"\xff\":1}", nil), ErrInvalidHeader, []string{"UTF-8"}},
		{"duplicate tensor name", stFile(`{"a":`+f32x2+`[0,8]},"a":`+f32x2+`[0,8]}}`, make([]byte, 8)), ErrInvalidHeader, []string{`"a" appears twice`}},
		{"unknown dtype", stFile(`{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrInvalidHeader, []string{`invalid header: tensor "a" has the unknown dtype "F128"; safetensors dtypes are BF16, BOOL, C64, F16, F32, F4, F64, F6_E2M3`, "(tune computes with BF16, F16, F32, I32, I64)"}},
		{"entry without shape", stFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), ErrInvalidHeader, []string{`no "shape"`}},
		{"entry with an extra key", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, make([]byte, 4)), ErrInvalidHeader, []string{`unexpected key "x"`}},
		{"negative dimension", stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrInvalidHeader, []string{"-1", "non-negative"}},
		{"fractional dimension", stFile(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrInvalidHeader, []string{"1.5"}},
		{"three data offsets", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, make([]byte, 8)), ErrInvalidHeader, []string{"exactly 2"}},
		{"metadata value not a string", stFile(`{"__metadata__":{"format":1}}`, nil), ErrInvalidHeader, []string{`"format" must be a string`}},
		{"offsets end before begin", stFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4)), ErrInvalidOffset, []string{"[4, 0]"}},
		{"dtype/shape do not match the byte count", stFile(`{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`, make([]byte, 12)),
			ErrTensorInvalidInfo, []string{`"a"`, "F32 [2 2] needs 16 bytes", "span 12"}},
		{"sub-byte dtype not filling whole bytes", stFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, make([]byte, 2)), ErrTensorInvalidInfo, []string{"whole number of bytes"}},
		{"shape product overflows", stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrTensorInvalidInfo, []string{"overflows"}},
		{"overlapping tensors", stFile(`{"a":`+f32x2+`[0,8]},"b":`+f32x2+`[4,12]}}`, make([]byte, 12)), ErrInvalidOffset, []string{"overlaps", `"a"`, `"b"`}},
		{"hole between tensors", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)),
			ErrInvalidOffset, []string{"[4, 8)", "belong to no tensor"}},
		{"first tensor not at offset 0", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), ErrInvalidOffset, []string{"begins at 4"}},
		{"offsets past the end of the file", stFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 8)),
			ErrIncompleteMetadata, []string{"past the end of the file", `"a"`}},
		{"truncated: last 4 bytes cut off (B19)", b22File()[:84], ErrIncompleteMetadata,
			[]string{"incomplete metadata, file not fully covered", "need 88 bytes", "has 84"}},
		{"8 trailing zero bytes (B19)", append(b22File(), make([]byte, 8)...), ErrIncompleteMetadata,
			[]string{"incomplete metadata, file not fully covered", "need 88 bytes", "has 96", "trailing bytes"}},
	}
}

// TestCorruptSafetensors opens every kind of corrupt file and checks that the error wraps the right sentinel,
// names the file and says what is wrong.
func TestCorruptSafetensors(t *testing.T) {
	for _, tt := range corruptCases() {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "bad.safetensors", tt.file)
			c, err := OpenCheckpoint(path)
			if err == nil {
				c.Close()
				t.Fatalf("OpenCheckpoint accepted the file")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %q does not wrap %q", err, tt.want)
			}
			msg := err.Error()
			for _, w := range append([]string{"loaders: ", path}, tt.words...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestHeaderTooLargeAllocatesNothing checks B18's "no large allocation": rejecting a header length of 2^64-1
// allocates far less than a megabyte.
func TestHeaderTooLargeAllocatesNothing(t *testing.T) {
	path := writeTemp(t, "huge.safetensors", stPrefix(math.MaxUint64, "{}"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := OpenCheckpoint(path)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("err = %v, want ErrHeaderTooLarge", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("rejecting the header allocated %d bytes", got)
	}
}

// TestValidSafetensorsEdgeCases opens files that look odd but are valid.
func TestValidSafetensorsEdgeCases(t *testing.T) {
	a15 := `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	tests := []struct {
		name   string
		file   []byte
		tensor string
		want   []float32
	}{
		{"space padding after the JSON (B22)", stFile(a15+"   ", le32(0x3fc00000)), "a", []float32{1.5}},
		{"leading space before the JSON (B22)", stFile(" "+a15, le32(0x3fc00000)), "a", []float32{1.5}},
		{"0-dim tensor", stFile(`{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, le32(0x40000000)), "s", []float32{2}},
		{"empty tensor beside a full one", stFile(`{"e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, le32(0x3f800000)), "e", []float32{}},
		{"header with only metadata", stFile(padSpaces(`{"__metadata__":{"format":"pt"}}`), nil), "", nil},
		{"null metadata", stFile(padSpaces(`{"__metadata__":null,`+a15[1:]), le32(0x3fc00000)), "a", []float32{1.5}},
		{"F16 and BF16 widen exactly", stFile(`{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}`,
			[]byte{0x00, 0x3c, 0x01, 0x00, 0xc0, 0x3f, 0x80, 0xff}), "h", []float32{1, 5.9604645e-08}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := OpenCheckpoint(writeTemp(t, "ok.safetensors", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tt.tensor == "" {
				if c.Len() != 0 {
					t.Errorf("Len = %d, want 0", c.Len())
				}
				return
			}
			ht, err := c.Get(tt.tensor)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ht.Float32()
			if err != nil {
				t.Fatal(err)
			}
			if !equalF32(got, tt.want) {
				t.Errorf("%s = %v, want %v", tt.tensor, got, tt.want)
			}
		})
	}
}

// TestBF16Widening checks the BF16 tensor of the mixed file separately: 0x3fc0 = 1.5, 0xff80 = -Inf.
func TestBF16Widening(t *testing.T) {
	file := stFile(`{"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, []byte{0xc0, 0x3f, 0x80, 0xff})
	c, err := OpenCheckpoint(writeTemp(t, "bf16.safetensors", file))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ht, err := c.Get("b")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ht.Float32()
	if got[0] != 1.5 || !math.IsInf(float64(got[1]), -1) {
		t.Errorf("b = %v, want [1.5 -Inf]", got)
	}
}

// TestUnsupportedDTypes opens files with dtypes tune does not compute with: opening and listing work, reading the
// tensor gives the "unsupported dtype" error, and other tensors of the same file still read.
func TestUnsupportedDTypes(t *testing.T) {
	for _, dt := range []struct {
		name  string
		bytes int
	}{{"F64", 8}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"C64", 8}} {
		t.Run(dt.name, func(t *testing.T) {
			hdr := fmt.Sprintf(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":%q,"shape":[2],"data_offsets":[4,%d]}}`, dt.name, 4+2*dt.bytes)
			c, err := OpenCheckpoint(writeTemp(t, "x.safetensors", stFile(hdr, make([]byte, 4+2*dt.bytes))))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if ti, _ := c.Info("x"); ti.DType != dt.name || ti.Bytes != int64(2*dt.bytes) {
				t.Errorf("Info(x) = %+v", ti)
			}
			_, err = c.Get("x")
			want := "unsupported dtype " + dt.name + ` for tensor "x"; tune reads F32, F16, BF16, I64 (and I32)`
			if !errors.Is(err, ErrUnsupportedDType) || !strings.Contains(err.Error(), want) {
				t.Errorf("Get(x) error = %v, want one containing %q", err, want)
			}
			if _, err := c.Get("w"); err != nil {
				t.Errorf("Get(w) = %v", err)
			}
		})
	}
}

// TestB19ValidFileLoads checks that the valid 88-byte file (safetensors/src/tensor.rs) reads as [[0,0],[0,0]] (I32).
func TestB19ValidFileLoads(t *testing.T) {
	c, err := OpenCheckpoint(writeTemp(t, "b19.safetensors", b22File()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ht, err := c.Get("test")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ht.Int64()
	if err != nil {
		t.Fatal(err)
	}
	if ht.DType != tensor.I32 || len(ht.Shape) != 2 || ht.Shape[0] != 2 || ht.Shape[1] != 2 || len(got) != 4 || got[0]|got[1]|got[2]|got[3] != 0 {
		t.Errorf("test = %v %v %v, want I32 [2 2] zeros", ht.DType, ht.Shape, got)
	}
}

// TestGetAfterClose checks that a closed checkpoint refuses Get instead of touching unmapped memory.
func TestGetAfterClose(t *testing.T) {
	c, err := OpenCheckpoint(writeTemp(t, "b.safetensors", b22File()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("test"); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Get after Close: err = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
