//go:build cuda

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// attnShape is one fused attention problem for the kernel tests below (the shared op suite in
// tensor/tensortest covers small shapes; these reach several query and key blocks of the tensor-core
// kernels, their tails, and the general kernel on the same data).
type attnShape struct {
	B, Hq, Hkv, Tq, Tk, D int
	mask, causal, seg     bool
	p                     float32
	unaligned             bool // operands start one element into their buffers: the general kernel
	keepBits              bool // pass AttentionArgs.KeepBits (the forward stores the dropout bits for the backward)
}

func (s attnShape) String() string {
	return fmt.Sprintf("B%d_Hq%d_Hkv%d_Tq%d_Tk%d_D%d_mask%v_causal%v_seg%v_p%v_unaligned%v_keep%v", s.B, s.Hq, s.Hkv, s.Tq, s.Tk, s.D, s.mask, s.causal, s.seg, s.p, s.unaligned, s.keepBits)
}

// attnData is one problem's host inputs.
type attnData struct {
	q, k, v, do, mask []float32
	seg               []int32
}

func (s attnShape) data(seed uint64) attnData {
	rng := rand.New(rand.NewPCG(seed, 99))
	norm := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	d := attnData{q: norm(s.B * s.Hq * s.Tq * s.D), k: norm(s.B * s.Hkv * s.Tk * s.D), v: norm(s.B * s.Hkv * s.Tk * s.D),
		do: norm(s.B * s.Hq * s.Tq * s.D)}
	if s.mask {
		d.mask = make([]float32, s.B*s.Tk)
		pads := []float32{float32(math.Inf(-1)), -1e4, -math.MaxFloat32}
		for b := 0; b < s.B; b++ {
			for j := s.Tk - 1 - (b+1)*s.Tk/5; j < s.Tk; j++ {
				d.mask[b*s.Tk+j] = pads[b%3]
			}
		}
	}
	if s.seg {
		d.seg = make([]int32, s.B*s.Tq)
		for b := 0; b < s.B; b++ {
			for i := 1; i < s.Tq; i++ {
				d.seg[b*s.Tq+i] = d.seg[b*s.Tq+i-1]
				if rng.IntN(40) == 0 {
					d.seg[b*s.Tq+i]++
				}
			}
		}
	}
	return d
}

// attnResult is what one backend computed: O, LSE, dQ, dK, dV as float32.
type attnResult struct{ o, lse, dq, dk, dv []float32 }

// runAttention runs the forward and, from its own O and LSE, the backward of s on be in dtype dt.
func runAttention(t testing.TB, be tensor.Backend, s attnShape, dt tensor.DType, d attnData) attnResult {
	t.Helper()
	var live []*tensor.Tensor
	defer func() {
		for _, x := range live {
			be.Free(x)
		}
	}()
	up := func(dt tensor.DType, v any, n int) *tensor.Tensor {
		off := 0
		if s.unaligned {
			off = 1
		}
		x, err := be.Alloc(dt, n+off)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, x)
		if off > 0 {
			if x, err = x.View(off, n); err != nil {
				t.Fatal(err)
			}
		}
		if v != nil {
			if err := be.Upload(x, v); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	nq, nk := s.B*s.Hq*s.Tq*s.D, s.B*s.Hkv*s.Tk*s.D
	a := tensor.AttentionArgs{B: s.B, Hq: s.Hq, Hkv: s.Hkv, Tq: s.Tq, Tk: s.Tk, D: s.D,
		Q: tensor.AttnOperand{T: up(dt, d.q, nq)}, K: tensor.AttnOperand{T: up(dt, d.k, nk)}, V: tensor.AttnOperand{T: up(dt, d.v, nk)},
		O: tensor.AttnOperand{T: up(dt, nil, nq)}, LSE: up(tensor.F32, nil, s.B*s.Hq*s.Tq),
		Scale: float32(1 / math.Sqrt(float64(s.D))), Causal: s.causal, DropoutP: s.p, Seed: 1234, Offset: 77}
	if d.mask != nil {
		a.Mask = up(tensor.F32, d.mask, len(d.mask))
	}
	if d.seg != nil {
		a.Segments = up(tensor.I32, d.seg, len(d.seg))
	}
	if s.keepBits {
		a.KeepBits = up(tensor.I32, nil, tensor.AttentionKeepBitsLen(s.B, s.Hq, s.Tq, s.Tk))
	}
	if err := be.Attention(a); err != nil {
		t.Fatal(err)
	}
	ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: tensor.AttnOperand{T: up(dt, d.do, nq)},
		DQ: tensor.AttnOperand{T: up(dt, nil, nq)}, DK: tensor.AttnOperand{T: up(dt, nil, nk)}, DV: tensor.AttnOperand{T: up(dt, nil, nk)}}
	if err := be.AttentionBackward(ba); err != nil {
		t.Fatal(err)
	}
	down := func(x *tensor.Tensor) []float32 {
		v := make([]float32, x.Numel())
		if err := be.Download(v, x); err != nil {
			t.Fatal(err)
		}
		return v
	}
	return attnResult{o: down(a.O.T), lse: down(a.LSE), dq: down(ba.DQ.T), dk: down(ba.DK.T), dv: down(ba.DV.T)}
}

// closeTo requires |got − want| ≤ tol·(|want| + rms(want)) elementwise (equal infinities pass).
func closeTo(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	var ss float64
	n := 0
	for _, w := range want {
		if !math.IsInf(float64(w), 0) {
			ss += float64(w) * float64(w)
			n++
		}
	}
	rms := math.Sqrt(ss / math.Max(1, float64(n)))
	bad, worst, wi := 0, 0.0, -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if g == w {
			continue
		}
		e := math.Abs(g-w) / (math.Abs(w) + rms)
		if math.IsNaN(e) || e > tol {
			bad++
			if math.IsNaN(e) || e > worst {
				worst, wi = e, i
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements outside tolerance %g·(|ref| + rms %.3g); worst [%d] = %v, reference %v", name, bad, len(want), tol, rms, wi, got[wi], want[wi])
	}
}

var attnShapes = []attnShape{
	{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true},
	{B: 1, Hq: 2, Hkv: 2, Tq: 130, Tk: 300, D: 128, causal: true},
	{B: 2, Hq: 2, Hkv: 1, Tq: 257, Tk: 257, D: 64, seg: true, p: 0.1},
	{B: 1, Hq: 4, Hkv: 2, Tq: 190, Tk: 190, D: 128, causal: true, mask: true, p: 0.2},
	{B: 1, Hq: 2, Hkv: 2, Tq: 300, Tk: 65, D: 64, causal: true}, // Tq > Tk: the first rows see no key
	{B: 2, Hq: 2, Hkv: 2, Tq: 77, Tk: 77, D: 64, mask: true, p: 0.1, unaligned: true},
	{B: 1, Hq: 2, Hkv: 1, Tq: 70, Tk: 70, D: 96, causal: true, seg: true},
	// Tk % 4 == 0 with dropout: the keep bits go through shared memory (draw_bits), one Philox block per four.
	{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true, p: 0.1},
	{B: 1, Hq: 2, Hkv: 1, Tq: 132, Tk: 260, D: 128, causal: true, p: 0.15},
	{B: 1, Hq: 2, Hkv: 2, Tq: 256, Tk: 256, D: 64, seg: true, causal: true, p: 0.3},
}

// TestAttentionKernelsMatchCPU compares the CUDA kernels (tensor-core for F16/BF16 with D = 64 or 128 and
// aligned operands, the general kernel otherwise) with tensor/cpu's reference on shapes spanning several
// blocks, masks, causal with Tq ≠ Tk, segments, GQA and dropout.
func TestAttentionKernelsMatchCPU(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		for i, s := range attnShapes {
			if dt == tensor.F32 && s.Tq*s.Tk > 70000 {
				continue // the CPU reference in FP32 is slow; the general kernel is covered by smaller shapes
			}
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(i + 1))
				g, c := runAttention(t, gpu, s, dt, d), runAttention(t, ref, s, dt, d)
				tol := map[tensor.DType]float64{tensor.BF16: 2e-2, tensor.F16: 4e-3, tensor.F32: 1e-4}[dt]
				closeTo(t, "O", g.o, c.o, tol)
				closeTo(t, "LSE", g.lse, c.lse, 1e-4)
				closeTo(t, "dQ", g.dq, c.dq, 2*tol)
				closeTo(t, "dK", g.dk, c.dk, 2*tol)
				closeTo(t, "dV", g.dv, c.dv, 2*tol)
			})
		}
	}
}

// TestAttentionDeterministic runs forward and backward twice and requires identical bits: dQ has its own pass
// and GQA sums run in a fixed order, so nothing depends on scheduling.
func TestAttentionDeterministic(t *testing.T) {
	gpu := openOrSkip(t)
	for _, s := range []attnShape{
		{B: 2, Hq: 8, Hkv: 2, Tq: 333, Tk: 333, D: 64, mask: true, p: 0.1},
		{B: 1, Hq: 4, Hkv: 1, Tq: 260, Tk: 260, D: 128, causal: true, p: 0.1},
		{B: 1, Hq: 4, Hkv: 2, Tq: 100, Tk: 100, D: 64, mask: true, unaligned: true},
	} {
		t.Run(s.String(), func(t *testing.T) {
			d := s.data(5)
			r1, r2 := runAttention(t, gpu, s, tensor.BF16, d), runAttention(t, gpu, s, tensor.BF16, d)
			for _, x := range []struct {
				name string
				a, b []float32
			}{{"O", r1.o, r2.o}, {"LSE", r1.lse, r2.lse}, {"dQ", r1.dq, r2.dq}, {"dK", r1.dk, r2.dk}, {"dV", r1.dv, r2.dv}} {
				for i := range x.a {
					if math.Float32bits(x.a[i]) != math.Float32bits(x.b[i]) {
						t.Fatalf("%s[%d] = %v, then %v: not bit-identical run to run", x.name, i, x.a[i], x.b[i])
					}
				}
			}
		})
	}
}

// TestAttentionRefusesLargeHeads: D beyond the general kernel's 256 is ErrUnsupported naming the limit.
func TestAttentionRefusesLargeHeads(t *testing.T) {
	gpu := openOrSkip(t)
	s := attnShape{B: 1, Hq: 1, Hkv: 1, Tq: 4, Tk: 4, D: 264}
	x, _ := gpu.Alloc(tensor.BF16, 4*264)
	o, _ := gpu.Alloc(tensor.BF16, 4*264)
	l, _ := gpu.Alloc(tensor.F32, 4)
	defer gpu.Free(x)
	defer gpu.Free(o)
	defer gpu.Free(l)
	err := gpu.Attention(tensor.AttentionArgs{B: 1, Hq: 1, Hkv: 1, Tq: s.Tq, Tk: s.Tk, D: s.D, Q: tensor.AttnOperand{T: x},
		K: tensor.AttnOperand{T: x}, V: tensor.AttnOperand{T: x}, O: tensor.AttnOperand{T: o}, LSE: l, Scale: 0.1})
	if err == nil || !errors.Is(err, tensor.ErrUnsupported) {
		t.Fatalf("D = 264: got %v, want an error wrapping ErrUnsupported", err)
	}
	t.Log(err)
}

// TestAttentionBwdBitsReuseMatchesRedraw: with dropout and Tk % 4 == 0 the dQ kernel's first sweep stores the
// keep bits for its second sweep and the dK/dV kernel; the gradients must be bit-identical to every kernel
// drawing its own bits (tails, causal blocks past the diagonal, GQA, Tq ≠ Tk).
func TestAttentionBwdBitsReuseMatchesRedraw(t *testing.T) {
	gpu := openOrSkip(t)
	for _, s := range []attnShape{
		{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true, p: 0.1},
		{B: 1, Hq: 2, Hkv: 1, Tq: 132, Tk: 260, D: 128, causal: true, p: 0.15},
		{B: 1, Hq: 2, Hkv: 2, Tq: 300, Tk: 68, D: 64, causal: true, p: 0.3},
		{B: 2, Hq: 2, Hkv: 2, Tq: 256, Tk: 256, D: 64, seg: true, causal: true, p: 0.5},
	} {
		t.Run(s.String(), func(t *testing.T) {
			d := s.data(7)
			r1 := runAttention(t, gpu, s, tensor.BF16, d)
			restore := cuda.SetAttnBwdRedraw(true)
			r2 := runAttention(t, gpu, s, tensor.BF16, d)
			restore()
			for _, x := range []struct {
				name string
				a, b []float32
			}{{"dQ", r1.dq, r2.dq}, {"dK", r1.dk, r2.dk}, {"dV", r1.dv, r2.dv}} {
				for i := range x.a {
					if math.Float32bits(x.a[i]) != math.Float32bits(x.b[i]) {
						t.Fatalf("%s[%d] = %v with stored keep bits, %v with redrawn ones", x.name, i, x.a[i], x.b[i])
					}
				}
			}
		})
	}
}

// TestAttentionKeepBitsMatchesRedraw: with AttentionArgs.KeepBits the forward stores its dropout keep bits and
// the backward reads them instead of drawing; O and every gradient must be bit-identical to a backward that
// draws its own (and KeepBits must not change the forward), on every backend.
func TestAttentionKeepBitsMatchesRedraw(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	for _, s := range []attnShape{
		{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true, p: 0.1},
		{B: 1, Hq: 2, Hkv: 1, Tq: 132, Tk: 260, D: 128, causal: true, p: 0.15},
		{B: 1, Hq: 2, Hkv: 2, Tq: 300, Tk: 68, D: 64, causal: true, p: 0.3},
		{B: 2, Hq: 2, Hkv: 2, Tq: 256, Tk: 256, D: 64, seg: true, causal: true, p: 0.5},
		{B: 2, Hq: 2, Hkv: 2, Tq: 77, Tk: 77, D: 64, mask: true, p: 0.1}, // Tk % 4 != 0: KeepBits unused
	} {
		t.Run(s.String(), func(t *testing.T) {
			d := s.data(11)
			plain := runAttention(t, gpu, s, tensor.BF16, d)
			k := s
			k.keepBits = true
			for _, be := range []tensor.Backend{gpu, ref} {
				want := plain
				if be == tensor.Backend(ref) {
					want = runAttention(t, ref, s, tensor.BF16, d)
				}
				got := runAttention(t, be, k, tensor.BF16, d)
				for _, x := range []struct {
					name string
					a, b []float32
				}{{"O", got.o, want.o}, {"dQ", got.dq, want.dq}, {"dK", got.dk, want.dk}, {"dV", got.dv, want.dv}} {
					for i := range x.a {
						if math.Float32bits(x.a[i]) != math.Float32bits(x.b[i]) {
							t.Fatalf("%s: %s[%d] = %v with KeepBits, %v without", be.Name(), x.name, i, x.a[i], x.b[i])
						}
					}
				}
			}
		})
	}
}

// TestAttentionKeepBitsArePhiloxKeep reads the KeepBits a BF16 forward stores (attn_keep_bits draws them before
// the forward) and requires bit j % 16 of word j/16 of row (b·Hq + h)·Tq + i to be tensor.PhiloxKeep of dense
// element ((b·Hq + h)·Tq + i)·Tk + j for every key j < Tk, also past a causal diagonal: rows that start at slice
// 0 and at slice 4 of a Philox block (Tk % 8 == 4), D = 64 and 128, a counter carrying into its high word.
func TestAttentionKeepBitsArePhiloxKeep(t *testing.T) {
	gpu := openOrSkip(t)
	for _, s := range []attnShape{
		{B: 2, Hq: 3, Hkv: 3, Tq: 70, Tk: 132, D: 64, p: 0.1},
		{B: 1, Hq: 2, Hkv: 1, Tq: 130, Tk: 200, D: 128, causal: true, p: 0.3},
		{B: 1, Hq: 1, Hkv: 1, Tq: 40, Tk: 128, D: 64, p: 0.99999}, // threshold 2¹⁶: nothing kept
	} {
		t.Run(s.String(), func(t *testing.T) {
			n := tensor.AttentionKeepBitsLen(s.B, s.Hq, s.Tq, s.Tk)
			kb, err := gpu.Alloc(tensor.I32, n)
			if err != nil {
				t.Fatal(err)
			}
			defer gpu.Free(kb)
			if err := gpu.Upload(kb, make([]int32, n)); err != nil {
				t.Fatal(err)
			}
			var live []*tensor.Tensor
			defer func() {
				for _, x := range live {
					gpu.Free(x)
				}
			}()
			d := s.data(5)
			mk := func(v []float32, n int, dt tensor.DType) *tensor.Tensor {
				x, err := gpu.Alloc(dt, n)
				if err != nil {
					t.Fatal(err)
				}
				live = append(live, x)
				if v != nil {
					if err := gpu.Upload(x, v); err != nil {
						t.Fatal(err)
					}
				}
				return x
			}
			nq, nk := s.B*s.Hq*s.Tq*s.D, s.B*s.Hkv*s.Tk*s.D
			const seed, offset = 0x5eed_0000_0001, 1<<32 - 5
			a := tensor.AttentionArgs{B: s.B, Hq: s.Hq, Hkv: s.Hkv, Tq: s.Tq, Tk: s.Tk, D: s.D,
				Q: tensor.AttnOperand{T: mk(d.q, nq, tensor.BF16)}, K: tensor.AttnOperand{T: mk(d.k, nk, tensor.BF16)},
				V: tensor.AttnOperand{T: mk(d.v, nk, tensor.BF16)}, O: tensor.AttnOperand{T: mk(nil, nq, tensor.BF16)},
				LSE: mk(nil, s.B*s.Hq*s.Tq, tensor.F32), Scale: 0.125, Causal: s.causal, DropoutP: s.p,
				Seed: seed, Offset: offset, KeepBits: kb}
			if err := gpu.Attention(a); err != nil {
				t.Fatal(err)
			}
			got := make([]int32, n)
			if err := gpu.Download(got, kb); err != nil {
				t.Fatal(err)
			}
			words := 4 * ((s.Tk + 63) / 64) // 16-bit words per row
			bad := 0
			for r := 0; r < s.B*s.Hq*s.Tq; r++ {
				for j := 0; j < s.Tk; j++ {
					w := r*words + j/16
					bit := uint32(got[w/2])>>(16*(w%2)+j%16)&1 == 1
					if want := tensor.PhiloxKeep(seed, offset, r*s.Tk+j, s.p); bit != want {
						if bad++; bad <= 5 {
							t.Errorf("row %d key %d: keep bit %v, want %v", r, j, bit, want)
						}
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d keep bits differ from tensor.PhiloxKeep", bad)
			}
		})
	}
}
