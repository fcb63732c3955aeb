package opcheck

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tune-ml/tune/tensor"
)

// Floats are the float dtypes, Indices the dtypes of index tensors.
var (
	Floats  = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16}
	Indices = []tensor.DType{tensor.I32, tensor.I64}
)

// Errorf returns an error wrapping sentinel with the message format (fmt.Errorf("%w: "+format, sentinel, a...)).
func Errorf(sentinel error, format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, a...)...)
}

// Buffer is what View needs to know of a backend's buffer: its element dtype, its capacity in elements of that
// dtype, and whether it was freed.
type Buffer struct {
	DType tensor.DType // the dtype the buffer was allocated with
	Len   int          // capacity in elements of DType
	Freed bool         // Free was called on it; any further use is ErrArgument
}

// Owner describes a backend to View. Buffer returns the state of b and true when b belongs to the backend
// (false for any other buffer); Foreign completes the message "x holds a *T, not ..." for a buffer that does
// not, saying what to do ("a cpu buffer (upload it to the cpu backend)").
type Owner struct {
	Buffer  func(b tensor.Buffer) (Buffer, bool) // b's state, and whether b is this backend's
	Foreign string                               // ends "x holds a *T, not ..." for another backend's buffer
}

// View requires t to be a live view of a buffer of the backend own describes whose dtype is one of dts (any
// dtype when dts is empty): t non-nil with a buffer (ErrArgument), the backend's own (ErrBackend), not freed
// (ErrArgument), of the dtype t claims (ErrDType), with no negative extent and its elements
// [Offset, Offset+Numel) inside the buffer (ErrShape), and of an accepted dtype (ErrDType).
func View(name string, t *tensor.Tensor, own Owner, dts ...tensor.DType) error {
	if t == nil {
		return Errorf(tensor.ErrArgument, "%s is nil", name)
	}
	if t.Buf == nil {
		return Errorf(tensor.ErrArgument, "%s %v has no buffer (allocate it with Alloc)", name, t)
	}
	bf, ok := own.Buffer(t.Buf)
	if !ok {
		return Errorf(tensor.ErrBackend, "%s %v holds a %T, not %s", name, t, t.Buf, own.Foreign)
	}
	if bf.Freed {
		return Errorf(tensor.ErrArgument, "%s %v uses a buffer that was freed", name, t)
	}
	if t.DType != bf.DType {
		return Errorf(tensor.ErrDType, "%s claims dtype %v but its buffer holds %v", name, t.DType, bf.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return Errorf(tensor.ErrShape, "%s has a negative extent in shape %v", name, t.Shape)
		}
	}
	if t.Offset < 0 || t.Offset+t.Numel() > bf.Len {
		return Errorf(tensor.ErrShape, "%s views elements [%d, %d) of a %d-element buffer", name, t.Offset,
			t.Offset+t.Numel(), bf.Len)
	}
	if len(dts) > 0 && !slices.Contains(dts, t.DType) {
		return Errorf(tensor.ErrDType, "%s is %v, want %s", name, t.DType, dtypeList(dts))
	}
	return nil
}

// dtypeList writes dts as "F32 or F16 or BF16".
func dtypeList(dts []tensor.DType) string {
	s := make([]string, len(dts))
	for i, d := range dts {
		s[i] = d.String()
	}
	return strings.Join(s, " or ")
}

// Numel requires t (already checked with View) to hold n elements (ErrShape).
func Numel(name string, t *tensor.Tensor, n int) error {
	if t.Numel() != n {
		return Errorf(tensor.ErrShape, "%s has %d elements, want %d", name, t.Numel(), n)
	}
	return nil
}

// Rows requires t (already checked with View) to have rank ≥ 1 (ErrShape) and returns its row count n and
// last-axis extent ch, t seen as (n, ch); an empty last axis gives 0, 0.
func Rows(name string, t *tensor.Tensor) (n, ch int, err error) {
	if len(t.Shape) == 0 {
		return 0, 0, Errorf(tensor.ErrShape, "%s is a scalar; want at least one axis (…, C)", name)
	}
	ch = t.Shape[len(t.Shape)-1]
	if ch == 0 {
		return 0, 0, nil
	}
	return t.Numel() / ch, ch, nil
}

// IDs requires every index in ids (the values of index tensor name) to lie in [0, v), except ignore when it is
// non-nil (CrossEntropy's ignore_index); the first one outside is an ErrArgument naming its position.
func IDs(name string, ids []int, v int, ignore *int) error {
	for i, id := range ids {
		if ignore != nil && id == *ignore {
			continue
		}
		if id < 0 || id >= v {
			return Errorf(tensor.ErrArgument, "%s[%d] = %d is outside [0, %d)", name, i, id, v)
		}
	}
	return nil
}

// AdamW checks the arguments of Backend.AdamW after View has checked the four buffers as F32: Grads, ExpAvg and
// ExpAvgSq hold as many elements as Params (ErrShape); as torch.optim.AdamW requires, lr ≥ 0, eps ≥ 0,
// 0 ≤ β1, β2 < 1, weight decay ≥ 0 (none NaN), Step ≥ 1 and MaxGradNorm finite and ≥ 0 (ErrArgument); segments lie inside the buffers and
// do not overlap (ErrShape). It returns the segments to update: a.Segments, or the whole buffer decaying when
// a.Segments is nil.
func AdamW(a tensor.AdamWArgs) ([]tensor.Segment, error) {
	n := a.Params.Numel()
	for _, b := range []struct {
		name string
		t    *tensor.Tensor
	}{{"Grads", a.Grads}, {"ExpAvg", a.ExpAvg}, {"ExpAvgSq", a.ExpAvgSq}} {
		if err := Numel(b.name, b.t, n); err != nil {
			return nil, err
		}
	}
	ok := func(x float32) bool { return !math.IsNaN(float64(x)) }
	for _, r := range []struct {
		ok     bool
		format string
		v      any
	}{
		{ok(a.LR) && a.LR >= 0, "LR = %v, want ≥ 0", a.LR},
		{ok(a.Eps) && a.Eps >= 0, "Eps = %v, want ≥ 0", a.Eps},
		{ok(a.Beta1) && a.Beta1 >= 0 && a.Beta1 < 1, "Beta1 = %v, want 0 ≤ β1 < 1", a.Beta1},
		{ok(a.Beta2) && a.Beta2 >= 0 && a.Beta2 < 1, "Beta2 = %v, want 0 ≤ β2 < 1", a.Beta2},
		{ok(a.WeightDecay) && a.WeightDecay >= 0, "WeightDecay = %v, want ≥ 0", a.WeightDecay},
		{a.Step >= 1, "Step = %d, want ≥ 1 (the step count after incrementing)", a.Step},
		{ok(a.MaxGradNorm) && a.MaxGradNorm >= 0 && !math.IsInf(float64(a.MaxGradNorm), 0), "MaxGradNorm = %v, want finite and ≥ 0", a.MaxGradNorm},
	} {
		if !r.ok {
			return nil, Errorf(tensor.ErrArgument, r.format, r.v)
		}
	}
	segs := a.Segments
	if segs == nil {
		segs = []tensor.Segment{{Offset: 0, Len: n, Decay: true}}
	}
	sorted := slices.Clone(segs)
	slices.SortFunc(sorted, func(x, y tensor.Segment) int { return x.Offset - y.Offset })
	end := 0
	for _, s := range sorted {
		if !(s.Offset >= 0 && s.Len >= 0 && s.Offset+s.Len <= n) {
			return nil, Errorf(tensor.ErrShape, "segment [%d, %d) is outside the %d-element buffer", s.Offset,
				s.Offset+s.Len, n)
		}
		if s.Offset < end {
			return nil, Errorf(tensor.ErrShape, "segment [%d, %d) overlaps the previous one ending at %d",
				s.Offset, s.Offset+s.Len, end)
		}
		end = max(end, s.Offset+s.Len)
	}
	return segs, nil
}

// UpdateScale checks the GradScaler options of Backend.UpdateScale (ErrArgument), as torch/amp/grad_scaler.py
// requires them: MaxSkipped ≥ 0, GrowthFactor finite and > 1, BackoffFactor in (0, 1), GrowthInterval ≥ 1,
// MinScale ≥ 0. The backends check the tensors themselves.
func UpdateScale(a tensor.UpdateScaleArgs) error {
	for _, r := range []struct {
		ok     bool
		format string
		v      any
	}{
		{a.MaxSkipped >= 0, "MaxSkipped %d must be ≥ 0", a.MaxSkipped},
		{a.GrowthFactor > 1 && !math.IsInf(a.GrowthFactor, 0), "GrowthFactor %v must be finite and > 1", a.GrowthFactor},
		{a.BackoffFactor > 0 && a.BackoffFactor < 1, "BackoffFactor %v must be in (0, 1)", a.BackoffFactor},
		{a.GrowthInterval >= 1, "GrowthInterval %d must be ≥ 1", a.GrowthInterval},
		{a.MinScale >= 0, "MinScale %v must be ≥ 0", a.MinScale},
	} {
		if !r.ok {
			return Errorf(tensor.ErrArgument, r.format, r.v)
		}
	}
	return nil
}
