package tensortest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// Tolerance returns the relative tolerance for comparing an output stored as dt with the CPU reference:
// about FP32 accumulation-order noise for F32, and about one unit in the last place for F16 (2⁻¹⁰) and BF16
// (2⁻⁷). An element passes when |got − want| ≤ Tolerance(dt)·(|want| + rms(want)).
func Tolerance(dt tensor.DType) float64 {
	switch dt {
	case tensor.F16:
		return 1e-3
	case tensor.BF16:
		return 1e-2
	}
	return 1e-5
}

// role says how an op uses a tensor argument, which decides how the harness initializes and checks it.
type role int

const (
	roleIn  role = iota // read only: must be unchanged after the op
	roleOut             // overwritten (=): poisoned with NaN on the backend under test, so unwritten elements show
	roleAcc             // accumulated into (+=) or updated in place: starts from the same values on both backends
)

// arg is one tensor argument of an op case. Float values are rounded to dt before both backends see them;
// the reference holds every float argument as F32, so it computes on exactly the same inputs.
type arg struct {
	name  string
	role  role
	dt    tensor.DType
	shape []int
	f     []float32 // float values (inputs, accumulators, and the elements of outputs listed in keep)
	i     []int64   // integer values (I32/I64)
	keep  []bool    // for an output: elements the op must not write (a GEMM's gaps between rows); nil: none
	// exact makes the reference hold this argument in its own dtype instead of F32, for ops whose contract
	// rounds intermediates to the operands' dtype (fused attention's P' and dS), so the comparison is tight.
	exact bool
	// tolAs, when set, is the dtype whose Tolerance the output is held to instead of its own: RMSNorm's F32
	// output of a half x holds w·round_x(x·rstd), which moves by a unit of x's dtype when backends' rstd
	// (summed in other orders) straddle a rounding boundary.
	tolAs tensor.DType
	// nan, for an output, is a contract on its own terms that comparing with the reference cannot check (the
	// reference is the CPU backend): element i must be NaN where nan[i] is nanMust and finite where it is
	// nanNever, on the backend under test and on the reference alike (fused attention's NaN rows); nanOpen
	// elements are neither checked nor compared (where the contract leaves NaN or not open). nil: no such check.
	nan []int8
}

// opCase is one op call, run on the backend under test and on the CPU reference with the same arguments.
// call returns the op's scalar results (a count, a norm, a found flag as 0/1) for comparison.
type opCase struct {
	name string
	args []arg
	call func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error)
}

// The values of arg.nan.
const (
	nanAny   int8 = iota // compared with the reference as usual
	nanMust              // NaN
	nanNever             // finite
	nanOpen              // not checked
)

const (
	guardLen = 3     // elements on each side of every view: views start unaligned and writes past them show
	guardVal = -7.25 // exact in every float type
	guardInt = -7
)

// placed is an argument uploaded to one backend: the view the op sees and the buffer around it.
type placed struct {
	view, parent *tensor.Tensor
	init         []float32 // float contents of the view as uploaded (after rounding)
}

// place uploads every argument of c to b inside a guarded buffer. ref selects the reference layout (float
// arguments as F32, outputs zeroed); otherwise float arguments take their own dtype and outputs are poisoned.
func place(t *testing.T, b tensor.Backend, c opCase, ref bool) []placed {
	t.Helper()
	ps := make([]placed, len(c.args))
	for k, a := range c.args {
		n := tensor.Shape(a.shape).Numel()
		dt := a.dt
		if ref && dt.IsFloat() && !a.exact {
			dt = tensor.F32
		}
		parent, err := b.Alloc(dt, n+2*guardLen)
		if err != nil {
			t.Fatalf("%s: Alloc %s: %v", b.Name(), a.name, err)
		}
		view, err := parent.View(guardLen, a.shape...)
		if err != nil {
			t.Fatal(err)
		}
		ps[k] = placed{view: view, parent: parent}
		if !dt.IsFloat() {
			data := make([]int64, n+2*guardLen)
			for i := range data {
				data[i] = guardInt
			}
			copy(data[guardLen:], a.i)
			uploadInts(t, b, parent, data)
			continue
		}
		data := make([]float32, n+2*guardLen)
		for i := range data {
			data[i] = guardVal
		}
		body := data[guardLen : guardLen+n]
		for i := range body {
			switch {
			case a.role != roleOut || (a.keep != nil && a.keep[i]):
				body[i] = tensor.RoundTo(a.dt, a.f[i])
			case ref:
				body[i] = 0
			default:
				body[i] = float32(math.NaN())
			}
		}
		ps[k].init = append([]float32(nil), body...)
		if err := b.Upload(parent, data); err != nil {
			t.Fatalf("%s: Upload %s: %v", b.Name(), a.name, err)
		}
	}
	return ps
}

func uploadInts(t *testing.T, b tensor.Backend, x *tensor.Tensor, v []int64) {
	t.Helper()
	var err error
	if x.DType == tensor.I32 {
		v32 := make([]int32, len(v))
		for i, x := range v {
			v32[i] = int32(x)
		}
		err = b.Upload(x, v32)
	} else {
		err = b.Upload(x, v)
	}
	if err != nil {
		t.Fatalf("%s: Upload: %v", b.Name(), err)
	}
}

// run executes c on the backend under test and on the reference and compares scalars, outputs, untouched
// inputs and guards.
func run(t *testing.T, b tensor.Backend, c opCase) {
	t.Helper()
	ref := cpu.New()
	got, want := place(t, b, c, false), place(t, ref, c, true)
	views := func(ps []placed) []*tensor.Tensor {
		v := make([]*tensor.Tensor, len(ps))
		for i, p := range ps {
			v[i] = p.view
		}
		return v
	}
	sGot, err := c.call(b, views(got))
	if errors.Is(err, tensor.ErrUnsupported) {
		for k := range c.args {
			freeAll(b, ref, got[k], want[k])
		}
		t.Skipf("%s on %s: %v", c.name, b.Name(), err)
	}
	if err != nil {
		t.Fatalf("%s on %s: %v", c.name, b.Name(), err)
	}
	if err := b.Synchronize(); err != nil {
		t.Fatalf("%s: Synchronize: %v", b.Name(), err)
	}
	sWant, err := c.call(ref, views(want))
	if err != nil {
		t.Fatalf("%s on the reference: %v", c.name, err)
	}
	for i := range sWant {
		if !near(sGot[i], sWant[i], 1e-5, math.Abs(sWant[i])) {
			t.Errorf("%s: scalar result %d = %v, reference %v", c.name, i, sGot[i], sWant[i])
		}
	}
	for k, a := range c.args {
		defer freeAll(b, ref, got[k], want[k])
		checkGuards(t, b, a, got[k])
		if !a.dt.IsFloat() {
			continue
		}
		g := Download(t, b, got[k].view)
		if a.role == roleIn {
			for i := range g {
				if !same(g[i], got[k].init[i]) {
					t.Errorf("%s: input %s[%d] changed from %v to %v", c.name, a.name, i, got[k].init[i], g[i])
					break
				}
			}
			continue
		}
		tol := Tolerance(a.dt)
		if a.tolAs != 0 {
			tol = Tolerance(a.tolAs)
		}
		w := Download(t, ref, want[k].view)
		for i, x := range a.nan {
			if x == nanOpen {
				g[i], w[i] = 0, 0
			}
		}
		if msg := compare(g, w, tol); msg != "" {
			t.Errorf("%s: output %s %v%v: %s", c.name, a.name, a.dt, tensor.Shape(a.shape), msg)
		}
		for _, r := range []struct {
			who string
			v   []float32
		}{{b.Name(), g}, {"the reference", w}} {
			if msg := checkNaN(r.v, a.nan); msg != "" {
				t.Errorf("%s: output %s on %s: %s", c.name, a.name, r.who, msg)
			}
		}
	}
}

func freeAll(b, ref tensor.Backend, g, w placed) {
	b.Free(g.parent)
	ref.Free(w.parent)
}

// checkGuards requires the elements around a's view to be intact.
func checkGuards(t *testing.T, b tensor.Backend, a arg, p placed) {
	t.Helper()
	n := p.parent.Numel()
	bad := func(i int) {
		t.Errorf("%s on %s wrote outside %s: element %d of the guard band", b.Name(), a.name, a.name, i)
	}
	if a.dt.IsFloat() {
		v := Download(t, b, p.parent)
		for _, i := range guardIdx(n) {
			if v[i] != guardVal {
				bad(i)
				return
			}
		}
		return
	}
	v := make([]int64, n)
	if a.dt == tensor.I32 {
		v32 := make([]int32, n)
		if err := b.Download(v32, p.parent); err != nil {
			t.Fatal(err)
		}
		for i, x := range v32 {
			v[i] = int64(x)
		}
	} else if err := b.Download(v, p.parent); err != nil {
		t.Fatal(err)
	}
	for _, i := range guardIdx(n) {
		if v[i] != guardInt {
			bad(i)
			return
		}
	}
}

func guardIdx(n int) []int {
	idx := make([]int, 0, 2*guardLen)
	for i := 0; i < guardLen; i++ {
		idx = append(idx, i, n-1-i)
	}
	return idx
}

// checkNaN returns "" when v keeps arg.nan's contract (nan nil: always), else the first element that breaks it.
func checkNaN(v []float32, nan []int8) string {
	for i, want := range nan {
		isNaN := v[i] != v[i]
		switch {
		case want == nanMust && !isNaN:
			return fmt.Sprintf("element %d = %v, want NaN", i, v[i])
		case want == nanNever && (isNaN || math.IsInf(float64(v[i]), 0)):
			return fmt.Sprintf("element %d = %v, want a finite value", i, v[i])
		}
	}
	return ""
}

func same(a, b float32) bool { return a == b || a != a && b != b }

// near reports |got − want| ≤ tol·(|want| + scale), with NaN equal to NaN and infinities equal to themselves.
func near(got, want, tol, scale float64) bool {
	if got == want || math.IsNaN(got) && math.IsNaN(want) {
		return true
	}
	if math.IsNaN(got) || math.IsNaN(want) || math.IsInf(got, 0) || math.IsInf(want, 0) {
		return false
	}
	return math.Abs(got-want) <= tol*(math.Abs(want)+scale)
}

// compare returns "" when every element of got is close to want (see Tolerance), else the worst element.
func compare(got, want []float32, tol float64) string {
	var ss float64
	finite := 0
	for _, w := range want {
		if !math.IsNaN(float64(w)) && !math.IsInf(float64(w), 0) {
			ss += float64(w) * float64(w)
			finite++
		}
	}
	rms := math.Sqrt(ss / float64(max(finite, 1)))
	worst, at := 0.0, -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if near(g, w, tol, rms) {
			continue
		}
		e := math.Abs(g-w) / (tol * (math.Abs(w) + rms))
		if math.IsNaN(e) || math.IsInf(e, 0) {
			return fmt.Sprintf("element %d = %v, reference %v", i, g, w)
		}
		if e > worst {
			worst, at = e, i
		}
	}
	if at < 0 {
		return ""
	}
	return fmt.Sprintf("worst element %d = %v, reference %v (error %.3g× the tolerance %g·(|ref| + rms %.3g))",
		at, got[at], want[at], worst, tol, rms)
}

// gen draws the random inputs of the suite's cases.
type gen struct{ rng *rand.Rand }

func newGen(name string) *gen {
	h := uint64(14695981039346656037)
	for _, c := range name {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return &gen{rand.New(rand.NewPCG(h, 7))}
}

// normal returns n standard normal values times s.
func (g *gen) normal(n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(s * g.rng.NormFloat64())
	}
	return v
}

// uniform returns n values in [lo, hi).
func (g *gen) uniform(n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*g.rng.Float64())
	}
	return v
}

// odd returns an extent from 1, 3, 7, 33.
func (g *gen) odd() int { return []int{1, 3, 7, 33}[g.rng.IntN(4)] }

// ints returns n integers in [0, v).
func (g *gen) ints(n, v int) []int64 {
	x := make([]int64, n)
	for i := range x {
		x[i] = int64(g.rng.IntN(v))
	}
	return x
}

// input, output, accum and index build the arguments of a case.
func input(name string, dt tensor.DType, f []float32, shape ...int) arg {
	return arg{name: name, role: roleIn, dt: dt, shape: shape, f: f}
}

func output(name string, dt tensor.DType, shape ...int) arg {
	return arg{name: name, role: roleOut, dt: dt, shape: shape}
}

func accum(name string, dt tensor.DType, f []float32, shape ...int) arg {
	return arg{name: name, role: roleAcc, dt: dt, shape: shape, f: f}
}

func index(name string, dt tensor.DType, v []int64, shape ...int) arg {
	return arg{name: name, role: roleIn, dt: dt, shape: shape, i: v}
}

// rounded returns v rounded to dt (what a tensor of dt holds after Upload).
func rounded(dt tensor.DType, v []float32) []float32 {
	r := make([]float32, len(v))
	for i, x := range v {
		r[i] = tensor.RoundTo(dt, x)
	}
	return r
}

// none adapts an op that returns only an error to opCase.call.
func none(err error) ([]float64, error) { return nil, err }
