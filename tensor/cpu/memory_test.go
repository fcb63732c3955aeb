package cpu

import (
	"errors"
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// foreignBuf is a tensor.Buffer that no CPU backend made.
type foreignBuf struct{}

func (foreignBuf) Len() int { return 1 << 20 }

func mustAlloc(t *testing.T, b *Backend, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := b.Alloc(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestAllocIsZeroAndTyped(t *testing.T) {
	b := New()
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.I32, tensor.I64} {
		t.Run(dt.String(), func(t *testing.T) {
			x := mustAlloc(t, b, dt, 2, 3)
			if x.DType != dt || !x.Shape.Equal(tensor.Shape{2, 3}) || x.Buf.Len() != 6 {
				t.Fatalf("Alloc(%v, 2, 3) = %v with buffer length %d", dt, x, x.Buf.Len())
			}
			if dt.IsFloat() {
				got := make([]float32, 6)
				if err := b.Download(got, x); err != nil {
					t.Fatal(err)
				}
				for i, v := range got {
					if v != 0 || math.Signbit(float64(v)) {
						t.Fatalf("element %d = %v, want +0", i, v)
					}
				}
			}
		})
	}
}

func TestUploadDownloadRoundTrip(t *testing.T) {
	b := New()
	vals := []float32{1, -2.5, 3.14159, 65504, 1e-8, float32(math.Inf(-1))}
	cases := []struct {
		name string
		dt   tensor.DType
	}{
		{"F32 keeps every value", tensor.F32},
		{"F16 rounds each value to nearest even", tensor.F16},
		{"BF16 rounds each value to nearest even", tensor.BF16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := mustAlloc(t, b, c.dt, len(vals))
			if err := b.Upload(x, vals); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(vals))
			if err := b.Download(got, x); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if want := tensor.RoundTo(c.dt, v); got[i] != want {
					t.Errorf("element %d: got %v, want %v", i, got[i], want)
				}
			}
			if c.dt.IsHalf() {
				bits := make([]uint16, len(vals))
				if err := b.Download(bits, x); err != nil {
					t.Fatal(err)
				}
				y := mustAlloc(t, b, c.dt, len(vals))
				if err := b.Upload(y, bits); err != nil {
					t.Fatal(err)
				}
				again := make([]uint16, len(vals))
				_ = b.Download(again, y)
				for i := range bits {
					if bits[i] != again[i] {
						t.Errorf("raw bits %d: %#04x became %#04x", i, bits[i], again[i])
					}
				}
			}
		})
	}
	t.Run("I32 and I64 copy exactly", func(t *testing.T) {
		x32, x64 := mustAlloc(t, b, tensor.I32, 3), mustAlloc(t, b, tensor.I64, 3)
		if err := b.Upload(x32, []int32{-100, 0, math.MaxInt32}); err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(x64, []int64{-100, 0, math.MaxInt64}); err != nil {
			t.Fatal(err)
		}
		g32, g64 := make([]int32, 3), make([]int64, 3)
		_ = b.Download(g32, x32)
		_ = b.Download(g64, x64)
		if g32[2] != math.MaxInt32 || g64[2] != math.MaxInt64 || g32[0] != -100 || g64[0] != -100 {
			t.Fatalf("got %v and %v", g32, g64)
		}
	})
}

func TestViewsShareTheBuffer(t *testing.T) {
	b := New()
	x := mustAlloc(t, b, tensor.BF16, 4, 3)
	row, err := x.View(3, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Fill(row, 2); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 12)
	_ = b.Download(got, x)
	for i, v := range got {
		want := float32(0)
		if i >= 3 && i < 6 {
			want = 2
		}
		if v != want {
			t.Errorf("element %d = %v, want %v (only the view's row is filled)", i, v, want)
		}
	}
	b.Free(row) // a view: no effect
	if err := b.Fill(x, 1); err != nil {
		t.Fatalf("after freeing a view, the owner must stay usable: %v", err)
	}
}

func TestFillIntegers(t *testing.T) {
	b := New()
	x := mustAlloc(t, b, tensor.I64, 3)
	if err := b.Fill(x, -100); err != nil {
		t.Fatal(err)
	}
	got := make([]int64, 3)
	_ = b.Download(got, x)
	if got[0] != -100 || got[2] != -100 {
		t.Fatalf("got %v", got)
	}
	if err := b.Fill(x, 0.5); !errors.Is(err, tensor.ErrArgument) {
		t.Fatalf("Fill(I64, 0.5) = %v, want ErrArgument", err)
	}
}

func TestCastRoundsOnce(t *testing.T) {
	b := New()
	// v = 1 + 2^-8 + 2^-12 lies just above a BF16 midpoint: F32→BF16 rounds it up to 1 + 2^-7, while F16 holds
	// 1 + 2^-8 exactly, a BF16 tie that rounds to even (1). Each cast must round its exact source value once.
	v := float32(1 + 1.0/256 + 1.0/4096)
	if tensor.RoundTo(tensor.BF16, v) != 1+1.0/128 || tensor.RoundTo(tensor.BF16, tensor.RoundTo(tensor.F16, v)) != 1 {
		t.Fatal("test value no longer separates single from double rounding")
	}
	src := mustAlloc(t, b, tensor.F32, 1)
	_ = b.Upload(src, []float32{v})
	cases := []struct {
		name     string
		from, to tensor.DType
		want     float32
	}{
		{"F32→BF16 rounds to nearest", tensor.F32, tensor.BF16, tensor.RoundTo(tensor.BF16, v)},
		{"F32→F16 rounds to nearest", tensor.F32, tensor.F16, tensor.RoundTo(tensor.F16, v)},
		{"F16→BF16 rounds the exact F16 value once", tensor.F16, tensor.BF16, tensor.RoundTo(tensor.BF16, tensor.RoundTo(tensor.F16, v))},
		{"BF16→F32 widens exactly", tensor.BF16, tensor.F32, tensor.RoundTo(tensor.BF16, v)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from, to := mustAlloc(t, b, c.from, 1), mustAlloc(t, b, c.to, 1)
			if err := b.Cast(from, src); err != nil {
				t.Fatal(err)
			}
			if err := b.Cast(to, from); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, 1)
			_ = b.Download(got, to)
			if got[0] != c.want {
				t.Fatalf("got %v, want %v", got[0], c.want)
			}
		})
	}
}

func TestMemoryErrors(t *testing.T) {
	b := New()
	f32 := mustAlloc(t, b, tensor.F32, 2, 3)
	bf := mustAlloc(t, b, tensor.BF16, 6)
	i32 := mustAlloc(t, b, tensor.I32, 6)
	freed := mustAlloc(t, b, tensor.F32, 6)
	b.Free(freed)
	foreign := &tensor.Tensor{Shape: tensor.Shape{6}, DType: tensor.F32, Buf: foreignBuf{}}
	liar := &tensor.Tensor{Shape: tensor.Shape{6}, DType: tensor.F16, Buf: f32.Buf}
	past := &tensor.Tensor{Shape: tensor.Shape{6}, DType: tensor.F32, Buf: f32.Buf, Offset: 1}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"upload with the wrong length", b.Upload(f32, []float32{1}), tensor.ErrShape},
		{"upload []float32 into I32", b.Upload(i32, make([]float32, 6)), tensor.ErrDType},
		{"upload []uint16 into F32", b.Upload(f32, make([]uint16, 6)), tensor.ErrDType},
		{"upload []int64 into I32", b.Upload(i32, make([]int64, 6)), tensor.ErrDType},
		{"upload an unsupported host type", b.Upload(f32, []float64{1, 2, 3, 4, 5, 6}), tensor.ErrDType},
		{"download []int32 from BF16", b.Download(make([]int32, 6), bf), tensor.ErrDType},
		{"download with the wrong length", b.Download(make([]float32, 5), bf), tensor.ErrShape},
		{"copy between dtypes", b.Copy(bf, f32), tensor.ErrDType},
		{"copy between element counts", b.Copy(f32, mustAlloc(t, b, tensor.F32, 5)), tensor.ErrShape},
		{"cast an integer tensor", b.Cast(f32, i32), tensor.ErrDType},
		{"a freed buffer", b.Fill(freed, 1), tensor.ErrArgument},
		{"a nil tensor", b.Fill(nil, 1), tensor.ErrArgument},
		{"another backend's buffer", b.Fill(foreign, 1), tensor.ErrBackend},
		{"a dtype that contradicts the buffer", b.Fill(liar, 1), tensor.ErrDType},
		{"a view past the buffer's end", b.Fill(past, 1), tensor.ErrShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.want) {
				t.Fatalf("err = %v, want %v", c.err, c.want)
			}
			var oe *tensor.OpError
			if !errors.As(c.err, &oe) {
				t.Fatalf("err %T is not a *tensor.OpError", c.err)
			}
		})
	}
	if _, err := b.Alloc(tensor.Invalid, 3); !errors.Is(err, tensor.ErrDType) {
		t.Errorf("Alloc(Invalid) = %v, want ErrDType", err)
	}
	if _, err := b.Alloc(tensor.F32, 3, -1); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("Alloc with a negative extent = %v, want ErrShape", err)
	}
}
