package opcheck

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// fakeBuffer is a buffer of the test's pretend backend.
type fakeBuffer struct {
	dt    tensor.DType
	n     int
	freed bool
}

func (b *fakeBuffer) Len() int { return b.n }

// otherBuffer belongs to another backend.
type otherBuffer struct{}

func (otherBuffer) Len() int { return 1 << 10 }

var fakeOwner = Owner{
	Buffer: func(b tensor.Buffer) (Buffer, bool) {
		fb, ok := b.(*fakeBuffer)
		if !ok {
			return Buffer{}, false
		}
		return Buffer{DType: fb.dt, Len: fb.n, Freed: fb.freed}, true
	},
	Foreign: "a fake buffer (upload it to the fake backend)",
}

// view returns a tensor of shape on a fresh fake buffer of n elements of dt, starting at off.
func view(dt tensor.DType, n, off int, shape ...int) *tensor.Tensor {
	return &tensor.Tensor{Shape: shape, DType: dt, Buf: &fakeBuffer{dt: dt, n: n}, Offset: off}
}

// checkErr fails unless err wraps sentinel and contains words (err nil when sentinel is nil).
func checkErr(t *testing.T, err, sentinel error, words string) {
	t.Helper()
	if sentinel == nil {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), words) {
		t.Fatalf("err = %v, want one wrapping %v and containing %q", err, sentinel, words)
	}
}

// TestView checks each rule of View in order, with the message each failure gives.
func TestView(t *testing.T) {
	freed := view(tensor.F32, 4, 0, 4)
	freed.Buf.(*fakeBuffer).freed = true
	liar := view(tensor.F32, 4, 0, 4)
	liar.DType = tensor.F16
	tests := []struct {
		name     string
		t        *tensor.Tensor
		dts      []tensor.DType
		sentinel error
		words    string
	}{
		{"a good F32 view with no dtype constraint", view(tensor.F32, 8, 2, 2, 3), nil, nil, ""},
		{"a good view of an accepted dtype", view(tensor.BF16, 6, 0, 6), Floats, nil, ""},
		{"an empty view at the end of the buffer", view(tensor.F32, 4, 4, 0), nil, nil, ""},
		{"nil", nil, nil, tensor.ErrArgument, "x is nil"},
		{"no buffer", &tensor.Tensor{Shape: tensor.Shape{2}, DType: tensor.F32}, nil, tensor.ErrArgument, "has no buffer"},
		{"another backend's buffer", &tensor.Tensor{Shape: tensor.Shape{2}, DType: tensor.F32, Buf: otherBuffer{}},
			nil, tensor.ErrBackend, "holds a opcheck.otherBuffer, not a fake buffer (upload it to the fake backend)"},
		{"a freed buffer", freed, nil, tensor.ErrArgument, "freed"},
		{"a dtype the buffer does not hold", liar, nil, tensor.ErrDType, "claims dtype F16 but its buffer holds F32"},
		{"a negative extent", view(tensor.F32, 4, 0, 2, -1), nil, tensor.ErrShape, "negative extent"},
		{"a view past the end", view(tensor.F32, 4, 2, 3), nil, tensor.ErrShape, "views elements [2, 5) of a 4-element buffer"},
		{"a negative offset", view(tensor.F32, 4, -1, 2), nil, tensor.ErrShape, "views elements [-1, 1)"},
		{"a dtype not accepted", view(tensor.I32, 4, 0, 4), Floats, tensor.ErrDType, "x is I32, want F32 or F16 or BF16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, View("x", tt.t, fakeOwner, tt.dts...), tt.sentinel, tt.words)
		})
	}
}

// TestNumelRows checks Numel and the (n, ch) view Rows gives of tensors of every rank.
func TestNumelRows(t *testing.T) {
	checkErr(t, Numel("out", view(tensor.F32, 6, 0, 2, 3), 6), nil, "")
	checkErr(t, Numel("out", view(tensor.F32, 6, 0, 2, 3), 5), tensor.ErrShape, "out has 6 elements, want 5")
	tests := []struct {
		name     string
		shape    []int
		n, ch    int
		sentinel error
	}{
		{"a matrix", []int{4, 3}, 4, 3, nil},
		{"rank 3 folds the leading axes", []int{2, 5, 3}, 10, 3, nil},
		{"a vector is one row", []int{7}, 1, 7, nil},
		{"an empty last axis", []int{4, 0}, 0, 0, nil},
		{"a scalar has no rows", []int{}, 0, 0, tensor.ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ch, err := Rows("x", view(tensor.F32, 64, 0, tt.shape...))
			checkErr(t, err, tt.sentinel, "scalar")
			if n != tt.n || ch != tt.ch {
				t.Errorf("Rows = %d, %d; want %d, %d", n, ch, tt.n, tt.ch)
			}
		})
	}
}

// TestIDs checks the index range rule and ignore_index.
func TestIDs(t *testing.T) {
	ignore := -100
	tests := []struct {
		name     string
		ids      []int
		ignore   *int
		sentinel error
		words    string
	}{
		{"all in range", []int{0, 4, 2}, nil, nil, ""},
		{"ignore_index is allowed", []int{0, -100, 4}, &ignore, nil, ""},
		{"one past the end", []int{0, 5}, nil, tensor.ErrArgument, "labels[1] = 5 is outside [0, 5)"},
		{"negative without ignore_index", []int{-100}, nil, tensor.ErrArgument, "labels[0] = -100"},
		{"another negative with ignore_index", []int{-100, -1}, &ignore, tensor.ErrArgument, "labels[1] = -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, IDs("labels", tt.ids, 5, tt.ignore), tt.sentinel, tt.words)
		})
	}
}

// TestAdamW checks each AdamW rule and the default segment.
func TestAdamW(t *testing.T) {
	good := func() tensor.AdamWArgs {
		return tensor.AdamWArgs{Params: view(tensor.F32, 10, 0, 10), Grads: view(tensor.F32, 10, 0, 10),
			ExpAvg: view(tensor.F32, 10, 0, 10), ExpAvgSq: view(tensor.F32, 10, 0, 10),
			LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1}
	}
	nan := float32(math.NaN())
	tests := []struct {
		name     string
		edit     func(a *tensor.AdamWArgs)
		sentinel error
		words    string
	}{
		{"good arguments", func(*tensor.AdamWArgs) {}, nil, ""},
		{"segments with a frozen gap", func(a *tensor.AdamWArgs) {
			a.Segments = []tensor.Segment{{Offset: 6, Len: 4}, {Offset: 0, Len: 4, Decay: true}}
		}, nil, ""},
		{"short gradients", func(a *tensor.AdamWArgs) { a.Grads = view(tensor.F32, 9, 0, 9) }, tensor.ErrShape, "Grads has 9 elements, want 10"},
		{"short second moment", func(a *tensor.AdamWArgs) { a.ExpAvgSq = view(tensor.F32, 11, 0, 11) }, tensor.ErrShape, "ExpAvgSq"},
		{"negative lr", func(a *tensor.AdamWArgs) { a.LR = -1 }, tensor.ErrArgument, "LR = -1, want ≥ 0"},
		{"NaN eps", func(a *tensor.AdamWArgs) { a.Eps = nan }, tensor.ErrArgument, "Eps = NaN"},
		{"beta1 of 1", func(a *tensor.AdamWArgs) { a.Beta1 = 1 }, tensor.ErrArgument, "Beta1 = 1, want 0 ≤ β1 < 1"},
		{"negative beta2", func(a *tensor.AdamWArgs) { a.Beta2 = -0.5 }, tensor.ErrArgument, "Beta2"},
		{"negative weight decay", func(a *tensor.AdamWArgs) { a.WeightDecay = -0.1 }, tensor.ErrArgument, "WeightDecay"},
		{"step 0", func(a *tensor.AdamWArgs) { a.Step = 0 }, tensor.ErrArgument, "Step = 0, want ≥ 1"},
		{"a segment past the end", func(a *tensor.AdamWArgs) { a.Segments = []tensor.Segment{{Offset: 8, Len: 3}} },
			tensor.ErrShape, "segment [8, 11) is outside the 10-element buffer"},
		{"overlapping segments", func(a *tensor.AdamWArgs) {
			a.Segments = []tensor.Segment{{Offset: 4, Len: 4}, {Offset: 0, Len: 5}}
		}, tensor.ErrShape, "segment [4, 8) overlaps the previous one ending at 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good()
			tt.edit(&a)
			segs, err := AdamW(a)
			checkErr(t, err, tt.sentinel, tt.words)
			if err == nil && a.Segments == nil && (len(segs) != 1 || segs[0] != (tensor.Segment{Len: 10, Decay: true})) {
				t.Errorf("nil Segments gave %v, want the whole buffer decaying", segs)
			}
		})
	}
}

// TestGemmGeometry checks the defaults GemmGeometry fills in and each of its rules.
func TestGemmGeometry(t *testing.T) {
	f32 := func(n int) *tensor.Tensor { return view(tensor.F32, n, 0, n) }
	// good: C (2, 3) = A (2, 4) · B (4, 3), dense, one member.
	good := func() tensor.GemmArgs {
		return tensor.GemmArgs{M: 2, N: 3, K: 4, A: f32(8), B: f32(12), C: f32(6), Alpha: 1}
	}
	tests := []struct {
		name     string
		edit     func(a *tensor.GemmArgs)
		want     Gemm // checked when sentinel is nil
		sentinel error
		words    string
	}{
		{"dense defaults", func(*tensor.GemmArgs) {}, Gemm{M: 2, N: 3, K: 4, Batch: 1, LDA: 4, LDB: 3, LDC: 3}, nil, ""},
		{"transposed operands store K×M and N×K", func(a *tensor.GemmArgs) { a.TransA, a.TransB = true, true },
			Gemm{TransA: true, TransB: true, M: 2, N: 3, K: 4, Batch: 1, LDA: 2, LDB: 4, LDC: 3}, nil, ""},
		{"a batch with broadcast B and padded C", func(a *tensor.GemmArgs) {
			a.Batch, a.StrideA, a.StrideC, a.LDC, a.A, a.C = 2, 8, 10, 4, f32(16), f32(20)
		}, Gemm{M: 2, N: 3, K: 4, Batch: 2, LDA: 4, LDB: 3, LDC: 4, StrideA: 8, StrideC: 10}, nil, ""},
		{"K 0 reads nothing", func(a *tensor.GemmArgs) { a.K, a.A, a.B = 0, f32(0), f32(0) },
			Gemm{M: 2, N: 3, Batch: 1, LDA: 1, LDB: 3, LDC: 3}, nil, ""},
		{"mixed input dtypes", func(a *tensor.GemmArgs) { a.B = view(tensor.F16, 12, 0, 12) }, Gemm{}, tensor.ErrDType, "A is F32 but B is F16"},
		{"a negative size", func(a *tensor.GemmArgs) { a.K = -1 }, Gemm{}, tensor.ErrArgument, "M, N, K = 2, 3, -1"},
		{"a negative batch", func(a *tensor.GemmArgs) { a.Batch = -2 }, Gemm{}, tensor.ErrArgument, "Batch = -2"},
		{"a negative stride", func(a *tensor.GemmArgs) { a.StrideB = -1 }, Gemm{}, tensor.ErrArgument, "strides 0, -1, 0"},
		{"LDA below the stored columns", func(a *tensor.GemmArgs) { a.LDA = 3 }, Gemm{}, tensor.ErrArgument, "LDA = 3 is less than the 4 stored columns"},
		{"overlapping C members", func(a *tensor.GemmArgs) { a.Batch, a.StrideC, a.A, a.C = 2, 5, f32(16), f32(11) },
			Gemm{}, tensor.ErrArgument, "StrideC = 5 overlaps batch members' C (each spans 6 elements)"},
		{"A too short", func(a *tensor.GemmArgs) { a.A = f32(7) }, Gemm{}, tensor.ErrShape, "A has 7 elements; the product reads 8"},
		{"C too short", func(a *tensor.GemmArgs) { a.C = f32(5) }, Gemm{}, tensor.ErrShape, "C has 5 elements; the product writes 6"},
		{"a bias of the wrong length", func(a *tensor.GemmArgs) { a.Bias = f32(2) }, Gemm{}, tensor.ErrShape, "Bias has 2 elements, want 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good()
			tt.edit(&a)
			g, err := GemmGeometry(a)
			checkErr(t, err, tt.sentinel, tt.words)
			if tt.sentinel == nil && g != tt.want {
				t.Errorf("geometry %v, want %v", g, tt.want)
			}
		})
	}
}

// TestExtent checks the element span of a batch of strided matrices.
func TestExtent(t *testing.T) {
	tests := []struct {
		name                          string
		batch, stride, rows, cols, ld int
		want                          int
	}{
		{"one dense matrix", 1, 0, 2, 3, 3, 6},
		{"padded rows end at the last column", 1, 0, 2, 3, 5, 8},
		{"a batch counts the last member's start", 3, 10, 2, 3, 3, 26},
		{"a broadcast batch spans one matrix", 4, 0, 2, 3, 3, 6},
		{"no rows", 2, 6, 0, 3, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Extent(tt.batch, tt.stride, tt.rows, tt.cols, tt.ld); got != tt.want {
				t.Errorf("Extent = %d, want %d", got, tt.want)
			}
		})
	}
}
