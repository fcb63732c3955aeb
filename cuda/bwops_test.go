//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestLayerNormBackwardPathsMatch checks that the LayerNorm backward's one-pass ring kernel and its two passes
// (with layernorm_bwd2 and with layernorm_bwd) give the same bits, with dx aliasing dout, for ResidualLayerNormBackward with and without dropout and with its
// bias gradient, and for LayerNormBackward, on row counts whose last chunk is partial and whose warps end on an
// odd row, with x and dout in F32 and BF16 (and BERT's 64×512 plus a partial chunk once). The inputs are made
// once per case; each path starts from device copies of them.
func TestLayerNormBackwardPathsMatch(t *testing.T) {
	gpu := openOrSkip(t)
	type tc struct {
		n, c  int
		dt    tensor.DType
		p     float32
		paths []string
	}
	all := []string{"ring", "split", "split-v1"}
	var cases []tc
	for _, n := range []int{4096 + 37, 600} {
		for _, c := range []int{768, 1024} {
			for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
				for _, p := range []float32{0, 0.1} {
					cases = append(cases, tc{n, c, dt, p, all})
				}
			}
		}
	}
	cases = append(cases, tc{32768 + 37, 768, tensor.F32, 0.1, all})
	for _, k := range cases {
		t.Run(fmt.Sprintf("%dx%d dout %v p=%v", k.n, k.c, k.dt, k.p), func(t *testing.T) {
			in := lnBwdInputs(t, gpu, k.n, k.c, k.dt)
			defer in.free()
			got := make([][][]float32, len(k.paths))
			for i, path := range k.paths {
				got[i] = lnBwdRun(t, gpu, in, path, k.p)
			}
			for i := 1; i < len(k.paths); i++ {
				for j := range got[0] {
					if d := firstBitDiff(got[0][j], got[i][j]); d >= 0 {
						t.Errorf("output %d differs at %d: ring %v, %s %v", j, d, got[0][j][d], k.paths[i], got[i][j][d])
					}
				}
			}
		})
	}
}

// lnBwdIn holds one case's inputs for lnBwdRun: x (in dout's dtype), gamma, the forward's mean and rstd, the
// pristine dout and gradients that each run copies, and the run's buffers.
type lnBwdIn struct {
	r                               *bitsRig
	x, gamma, mean, rstd, d0, g0    *tensor.Tensor
	d, dy, dg, db, dc, d2, dx2, dg2 *tensor.Tensor
	db2                             *tensor.Tensor
}

func (in *lnBwdIn) free() { in.r.free() }

// lnBwdInputs makes the inputs of an (n, c) case with dout in dt.
func lnBwdInputs(t *testing.T, gpu *cuda.Backend, n, c int, dt tensor.DType) *lnBwdIn {
	r := &bitsRig{t: t, b: gpu, rng: rand.New(rand.NewPCG(uint64(n), uint64(c)))}
	in := &lnBwdIn{r: r}
	in.x, in.gamma = r.up(dt, 2, 0, n, c), r.up(tensor.F32, 1, 0, c)
	beta, y := r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, n, c)
	in.mean, in.rstd = r.up(tensor.F32, 1, 0, n), r.up(tensor.F32, 1, 0, n)
	must(t, gpu.LayerNorm(y, in.mean, in.rstd, in.x, in.gamma, beta, 1e-12))
	in.d0, in.g0 = r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, c)
	in.d, in.dy, in.d2, in.dx2 = r.up(dt, 1, 0, n, c), r.up(tensor.BF16, 1, 0, n, c), r.up(dt, 1, 0, n, c), r.up(dt, 1, 0, n, c)
	in.dg, in.db, in.dc, in.dg2, in.db2 = r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c),
		r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c)
	return in
}

// lnBwdRun runs ResidualLayerNormBackward (dx = dout in place) and LayerNormBackward under path from in's
// pristine dout and gradients and returns dx, dy, dgamma, dbeta, dbias of the first and dx, dgamma, dbeta of the
// second.
func lnBwdRun(t *testing.T, gpu *cuda.Backend, in *lnBwdIn, path string, p float32) [][]float32 {
	defer cuda.SetLNBwdPath(path)()
	must(t, gpu.Copy(in.d, in.d0))
	must(t, gpu.Copy(in.d2, in.d0))
	for _, g := range []*tensor.Tensor{in.dg, in.db, in.dc, in.dg2, in.db2} {
		must(t, gpu.Copy(g, in.g0))
	}
	must(t, gpu.ResidualLayerNormBackward(tensor.ResidualNormBackwardArgs{DX: in.d, DY: in.dy, DGamma: in.dg, DBeta: in.db,
		DBias: in.dc, DOut: in.d, X: in.x, Gamma: in.gamma, Mean: in.mean, Rstd: in.rstd, DropoutP: p, Seed: 5, Offset: 17}))
	must(t, gpu.LayerNormBackward(in.dx2, in.dg2, in.db2, in.d2, in.x, in.gamma, in.mean, in.rstd))
	var out [][]float32
	for _, o := range []*tensor.Tensor{in.d, in.dy, in.dg, in.db, in.dc, in.dx2, in.dg2, in.db2} {
		h := make([]float32, o.Numel())
		must(t, gpu.Download(h, o))
		out = append(out, h)
	}
	return out
}

// TestAdamWVectorMatchesScalar checks AdamW's float4 path against its element-by-element path (the same
// buffers one element into larger ones, so that no 16-byte boundary lines up) and against tensor/cpu, bit for
// bit, over segments of odd offsets and lengths, one longer than a work chunk (65536 elements), decaying and
// not, with a frozen gap.
func TestAdamWVectorMatchesScalar(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	const n = 300_007
	segs := []tensor.Segment{{Offset: 0, Len: 7, Decay: true}, {Offset: 7, Len: 140_001, Decay: true},
		{Offset: 140_008, Len: 3, Decay: false}, {Offset: 140_020, Len: 100_000, Decay: false}, {Offset: 240_021, Len: 59_986, Decay: true}}
	rng := rand.New(rand.NewPCG(3, 4))
	vals := make([][]float32, 4)
	for k := range vals {
		vals[k] = make([]float32, n)
		for i := range vals[k] {
			vals[k][i] = float32(rng.NormFloat64())
			if k == 3 {
				vals[k][i] = float32(1e-4 * rng.Float64())
			}
		}
	}
	run := func(b tensor.Backend, off int) [][]float32 {
		ts := make([]*tensor.Tensor, 4)
		for k := range ts {
			buf, err := b.Alloc(tensor.F32, n+off)
			must(t, err)
			defer b.Free(buf)
			host := make([]float32, n+off)
			copy(host[off:], vals[k])
			must(t, b.Upload(buf, host))
			ts[k], err = buf.View(off, n)
			must(t, err)
		}
		for step := 1; step <= 3; step++ {
			must(t, b.AdamW(tensor.AdamWArgs{Params: ts[0], Grads: ts[1], ExpAvg: ts[2], ExpAvgSq: ts[3], Segments: segs,
				LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step}))
		}
		out := make([][]float32, 4)
		for k := range out {
			out[k] = make([]float32, n)
			must(t, b.Download(out[k], ts[k]))
		}
		return out
	}
	vec, scalar, want := run(gpu, 0), run(gpu, 1), run(ref, 0)
	for k, name := range []string{"params", "grads", "exp_avg", "exp_avg_sq"} {
		if d := firstBitDiff(vec[k], scalar[k]); d >= 0 {
			t.Errorf("%s: aligned (float4) and unaligned (scalar) differ at %d: %v vs %v", name, d, vec[k][d], scalar[k][d])
		}
		if d := firstBitDiff(vec[k], want[k]); d >= 0 {
			t.Errorf("%s: cuda and cpu differ at %d: %v vs %v", name, d, vec[k][d], want[k][d])
		}
	}
}

// TestEmbeddingMatchesCPU checks the Embedding gather (a block per four rows) against tensor/cpu bit for bit:
// F32 and BF16 outputs from an F32 table, aligned (vector) and one element off (scalar), with a row count
// that leaves the last block partial.
func TestEmbeddingMatchesCPU(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	const v, c, n = 1000, 768, 4099
	rng := rand.New(rand.NewPCG(5, 6))
	table := make([]float32, v*c)
	for i := range table {
		table[i] = float32(rng.NormFloat64())
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(v))
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, off := range []int{0, 1} {
			run := func(b tensor.Backend) []float32 {
				buf, err := b.Alloc(tensor.F32, v*c+off)
				must(t, err)
				defer b.Free(buf)
				host := make([]float32, v*c+off)
				copy(host[off:], table)
				must(t, b.Upload(buf, host))
				tab, err := buf.View(off, v, c)
				must(t, err)
				id, err := b.Alloc(tensor.I32, n)
				must(t, err)
				defer b.Free(id)
				must(t, b.Upload(id, ids))
				out, err := b.Alloc(dt, n, c)
				must(t, err)
				defer b.Free(out)
				must(t, b.Embedding(out, id, tab))
				h := make([]float32, n*c)
				must(t, b.Download(h, out))
				return h
			}
			if d := firstBitDiff(run(gpu), run(ref)); d >= 0 {
				t.Errorf("out %v, table offset %d: cuda and cpu differ at %d", dt, off, d)
			}
		}
	}
}

// TestBF16PackMatchesHost checks the hardware BF16 rounding of the BF16 kernels (bf16x2_rn in common.cuh, used by
// elementwise.cu and norm.cu) against tensor.F32ToBF16 through Cast (F32 → BF16, aligned: the packed stores): every
// sign, exponent and leading 7 mantissa bits (the upper halves), each with the low halves where rounding turns
// (0x7FFF, 0x8000, 0x8001), their neighbours and two random ones. That covers subnormals, the largest finite values
// rounding to Inf, Inf and NaNs (which must become 0x7FC0).
func TestBF16PackMatchesHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	checkHalfCast(t, openOrSkip(t), tensor.BF16, tensor.F32ToBF16, func() []uint32 {
		return []uint32{0, 1, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0xFFFF, rng.Uint32() & 0xFFFF, rng.Uint32() & 0xFFFF}
	})
}

// TestGlobalNormToMatchesGlobalNorm checks the device-side norm (sumsq_partial with loads in flight, then
// norm_finish's two-level float64 sum of the partials) against GlobalNorm's host sum of the same partials, bit
// for bit, over tensors of F32 and BF16 whose sizes leave partial chunks (about 190 partials, so each of
// norm_finish's lanes takes its four-loads loop and its tail), and against tensor/cpu within float64 summation
// rounding; then ClipByNorm from it against the host's clip_grad_norm_ arithmetic, bit for bit.
func TestGlobalNormToMatchesGlobalNorm(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	rng := rand.New(rand.NewPCG(7, 7))
	var ts, cs []*tensor.Tensor
	for i := range 37 {
		n := 1 + rng.IntN(600_000)
		dt := tensor.F32
		if i%3 == 2 {
			dt = tensor.BF16
		}
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		for _, b := range []tensor.Backend{gpu, ref} {
			x, err := b.Alloc(dt, n)
			must(t, err)
			defer b.Free(x)
			must(t, b.Upload(x, v))
			if b == tensor.Backend(gpu) {
				ts = append(ts, x)
			} else {
				cs = append(cs, x)
			}
		}
	}
	host, err := gpu.GlobalNorm(ts)
	must(t, err)
	norm, err := gpu.Alloc(tensor.I64, 1)
	must(t, err)
	defer gpu.Free(norm)
	must(t, gpu.GlobalNormTo(norm, ts))
	var bits [1]int64
	must(t, gpu.Download(bits[:], norm))
	if got := math.Float64frombits(uint64(bits[0])); got != host {
		t.Errorf("GlobalNormTo %v (%#x), GlobalNorm %v (%#x)", got, bits[0], host, math.Float64bits(host))
	}
	want, err := ref.GlobalNorm(cs)
	must(t, err)
	if math.Abs(host-want) > 1e-12*want {
		t.Errorf("GlobalNorm %v, tensor/cpu %v", host, want)
	}
	// ClipByNorm from that norm: clip_grad_norm_'s coefficient in FP32 steps, every element times it, rounded
	// to its dtype (float4 groups for the F32 chunks, element by element for the BF16 ones and the tails).
	const maxNorm = 0.5
	before := make([][]float32, len(ts))
	for i, x := range ts {
		before[i] = make([]float32, x.Numel())
		must(t, gpu.Download(before[i], x))
	}
	must(t, gpu.ClipByNorm(ts, norm, maxNorm, nil))
	coef := float32(1/(float32(host)+1e-6)) * maxNorm
	for i, x := range ts {
		got := make([]float32, x.Numel())
		must(t, gpu.Download(got, x))
		for j, v := range before[i] {
			w := v * coef
			if x.DType == tensor.BF16 {
				w = tensor.BF16ToF32(tensor.F32ToBF16(w))
			}
			if math.Float32bits(got[j]) != math.Float32bits(w) {
				t.Fatalf("ClipByNorm tensor %d (%v) element %d: %v, want %v·%v = %v", i, x.DType, j, got[j], v, coef, w)
			}
		}
	}
}

// TestColumnSumFinishMatchesLaunch checks that BiasGrad, GELUBackwardRecompute's bias gradient and the
// two-pass LayerNorm weight gradients give the same bits when their last blocks finish the sums (the default up
// to 32 row chunks) as with a colsum_finish launch, three calls in a row accumulating onto nonzero gradients (so
// each tile's counter must have been reset), on BERT's widths and ragged ones.
func TestColumnSumFinishMatchesLaunch(t *testing.T) {
	gpu := openOrSkip(t)
	for _, sh := range [][2]int{{2600, 768}, {4096, 2304}, {600, 3072}, {37, 33}, {300, 70}} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			n, c := sh[0], sh[1]
			t.Run(fmt.Sprintf("%v %dx%d", dt, n, c), func(t *testing.T) {
				var got [2][][]float32
				for k, launch := range []bool{true, false} {
					got[k] = colsumRun(t, gpu, launch, n, c, dt)
				}
				for j := range got[0] {
					if d := firstBitDiff(got[0][j], got[1][j]); d >= 0 {
						t.Errorf("output %d differs at %d: launch %v, last block %v", j, d, got[0][j][d], got[1][j][d])
					}
				}
			})
		}
	}
}

// colsumRun runs BiasGrad, GELUBackwardRecompute with dbias and LayerNormBackward with only dgamma (the
// two-pass path) three times each and returns their outputs.
func colsumRun(t *testing.T, gpu *cuda.Backend, launch bool, n, c int, dt tensor.DType) [][]float32 {
	defer cuda.SetColsumFinishLaunch(launch)()
	r := &bitsRig{t: t, b: gpu, rng: rand.New(rand.NewPCG(uint64(n), uint64(c)))}
	defer r.free()
	dy, db := r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, c)
	x, d, g, gdb := r.up(dt, 3, 0, n, c), r.up(dt, 1, 0, n, c), r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, c)
	lx, gamma, beta := r.up(tensor.F32, 2, 0, n, c), r.up(tensor.F32, 1, 0, c), r.up(tensor.F32, 1, 0, c)
	y, mean, rstd := r.up(tensor.F32, 1, 0, n, c), r.up(tensor.F32, 1, 0, n), r.up(tensor.F32, 1, 0, n)
	must(t, gpu.LayerNorm(y, mean, rstd, lx, gamma, beta, 1e-12))
	ld, ldx, dg := r.up(dt, 1, 0, n, c), r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, c)
	for range 3 {
		must(t, gpu.BiasGrad(db, dy))
		must(t, gpu.GELUBackwardRecompute(d, g, gdb, d, x))
		must(t, gpu.LayerNormBackward(ldx, dg, nil, ld, lx, gamma, mean, rstd))
	}
	var out [][]float32
	for _, o := range []*tensor.Tensor{db, d, g, gdb, ldx, dg} {
		h := make([]float32, o.Numel())
		must(t, gpu.Download(h, o))
		out = append(out, h)
	}
	return out
}

// TestBiasGradWideMatchesNarrow checks BiasGrad's partial pass of four columns a thread (colsum_partial4, for
// half dy past 32 row chunks) against colsum_partial's two, bit for bit, accumulating twice onto nonzero
// gradients: BERT's 64×512 widths (768, and the packed Q/K/V's 2304) and a partial last chunk, BF16 and F16.
func TestBiasGradWideMatchesNarrow(t *testing.T) {
	gpu := openOrSkip(t)
	for _, sh := range [][2]int{{32768, 768}, {32768 + 37, 2304}, {9000, 132}} {
		for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
			n, c := sh[0], sh[1]
			t.Run(fmt.Sprintf("%v %dx%d", dt, n, c), func(t *testing.T) {
				r := &bitsRig{t: t, b: gpu, rng: rand.New(rand.NewPCG(uint64(n), uint64(c)))}
				defer r.free()
				dy, wide := r.up(dt, 1, 0, n, c), r.up(tensor.F32, 1, 0, c)
				narrow := r.up(tensor.F32, 1, 0, c)
				must(t, gpu.Copy(narrow, wide))
				for range 2 {
					must(t, gpu.BiasGrad(wide, dy))
					restore := cuda.SetColsumNarrow(true)
					must(t, gpu.BiasGrad(narrow, dy))
					restore()
				}
				a, b := make([]float32, c), make([]float32, c)
				must(t, gpu.Download(a, wide))
				must(t, gpu.Download(b, narrow))
				if d := firstBitDiff(a, b); d >= 0 {
					t.Errorf("column %d differs: colsum_partial4 %v, colsum_partial %v", d, a[d], b[d])
				}
			})
		}
	}
}

// TestGlobalNormOrderIgnoresLayout: sumsq_partial's summation order follows the elements' indices in their
// chunk alone, so the norm's bits do not depend on the path that loads them: an F32 tensor on a 16-byte
// boundary (float4 groups), the same values in a view one element off it (one by one), and in BF16 (values
// exact in BF16), with sizes that leave partial chunks and 1–3 trailing elements.
func TestGlobalNormOrderIgnoresLayout(t *testing.T) {
	gpu := openOrSkip(t)
	rng := rand.New(rand.NewPCG(3, 9))
	for _, n := range []int{1, 3, 4, 1001, 65536, 65539, 200_003} {
		v := make([]float32, n)
		for i := range v {
			v[i] = tensor.BF16ToF32(tensor.F32ToBF16(float32(rng.NormFloat64()) * 3))
		}
		norm := func(dt tensor.DType, off int) uint64 {
			buf, err := gpu.Alloc(dt, n+off)
			must(t, err)
			defer gpu.Free(buf)
			x, err := buf.View(off, n)
			must(t, err)
			must(t, gpu.Upload(x, v))
			out, err := gpu.Alloc(tensor.I64, 1)
			must(t, err)
			defer gpu.Free(out)
			must(t, gpu.GlobalNormTo(out, []*tensor.Tensor{x}))
			var bits [1]int64
			must(t, gpu.Download(bits[:], out))
			return uint64(bits[0])
		}
		want := norm(tensor.F32, 0)
		for _, c := range []struct {
			dt  tensor.DType
			off int
		}{{tensor.F32, 1}, {tensor.F32, 2}, {tensor.BF16, 0}, {tensor.BF16, 1}} {
			if got := norm(c.dt, c.off); got != want {
				t.Errorf("%d elements, %v at offset %d: norm %v, aligned F32 %v", n, c.dt, c.off,
					math.Float64frombits(got), math.Float64frombits(want))
			}
		}
	}
}
