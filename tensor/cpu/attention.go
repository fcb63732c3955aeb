package cpu

import (
	"math"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// This file is the reference of fused attention (tensor.AttentionArgs), written plainly: per (batch, head),
// blocks of at most attnBlock query rows whose (rows, Tk) scores come from one GEMM (gonum, FP32 accumulation),
// never the whole (Tq, Tk) matrix of every head. It keeps the numerics contract of docs/ATTENTION.md, which the CUDA
// kernel (FlashAttention-2: Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
// Partitioning", 2023, algorithms 1 and 2) keeps too, so the two agree to the rounding of the outputs:
//
//   - S, the softmax, LSE and every accumulation are in T (FP32 in the backend, FP64 in the gradient checks);
//   - for half operands, P' is rounded to the half dtype as the input of P'·V and of dV = P'ᵀ·dO, and dS as the
//     input of dQ = dS·K and dK = dSᵀ·Q (round; nil for F32 and FP64), with Scale applied to the FP32 sums;
//   - outputs are rounded once on store; the backward recomputes P = exp(S − LSE) from the saved LSE and takes
//     Δ_i = Σ_j P_ij·dP_ij in FP32 from P and dP (O's half rounding would otherwise enter every dS).

// attnProblem is one validated attention call in the kernels' terms: dense (B, H, T, D) operands.
type attnProblem[T scalar] struct {
	B, Hq, Hkv, Tq, Tk, D int
	scale                 T
	mask                  []float32 // (B, Tk) additive key mask, or nil
	seg                   []int32   // (B, T) segment ids, or nil
	causal                bool
	p                     float32 // dropout probability
	seed, offset          uint64
	round                 func(T) T // rounding of P' and dS to the operands' half dtype; nil: none
}

// allowed reports whether query i of batch member b may see key j (causal bottom-right alignment, segments).
func (a *attnProblem[T]) allowed(b, i, j int) bool {
	if a.causal && j > i+a.Tk-a.Tq {
		return false
	}
	return a.seg == nil || a.seg[b*a.Tq+i] == a.seg[b*a.Tk+j]
}

// dropBlock fills f (n·Tk) with the dropout factors of rows i0 … i0+n−1 of head h of batch member b: 1/(1−p)
// where tensor.PhiloxKeep keeps element ((b·Hq + h)·Tq + i)·Tk + j of a dense (B, Hq, Tq, Tk) tensor, else 0
// (as dropoutKernel computes it, so the fused and the two-pass path keep the same elements); all 1 when p is 0.
// The rows are consecutive in that index space, so one dropoutKernel call draws them all (16 Philox blocks at a
// time where the processor allows).
func (a *attnProblem[T]) dropBlock(f []T, b, h, i0, n int) {
	f = f[:n*a.Tk]
	for j := range f {
		f[j] = 1
	}
	if a.p != 0 {
		dropoutKernel(f, f, a.p, a.seed, a.offset, ((b*a.Hq+h)*a.Tq+i0)*a.Tk) // out may be x
	}
}

// rnd applies the half rounding of the product inputs (nothing for F32/FP64).
func (a *attnProblem[T]) rnd(x T) T {
	if a.round == nil {
		return x
	}
	return a.round(x)
}

// heads returns the offsets of query head h's rows and of its key/value head's rows in dense operands.
func (a *attnProblem[T]) heads(b, h int) (qo, ko int) {
	return (b*a.Hq + h) * a.Tq * a.D, (b*a.Hkv + h/(a.Hq/a.Hkv)) * a.Tk * a.D
}

// attnBlock is the number of query rows whose score block (attnBlock, Tk) a task holds at once.
const attnBlock = 64

// rowScores turns row i of a score block, s (Tk) = scale·q_i·Kᵀ, into S: the key mask added and −Inf where
// the pair is forbidden.
func (a *attnProblem[T]) rowScores(s []T, b, i int) {
	negInf := T(math.Inf(-1))
	for j := range s {
		switch {
		case !a.allowed(b, i, j):
			s[j] = negInf
		case a.mask != nil:
			s[j] += T(a.mask[b*a.Tk+j])
		}
	}
}

// attnForwardKernel computes O (B, Hq, Tq, D) and LSE (B, Hq, Tq) from dense Q, K, V, one (b, h) pair per
// task, attnBlock query rows at a time: the block's scores S = scale·Q·Kᵀ by one GEMM (FP32 accumulation),
// then per row P = exp(S − max S)/Σ exp(S − max S) as softmaxKernel computes it, LSE = max S + log Σ and
// P' = rnd(P·f) with f the dropout factor, then O = P'·V by one GEMM. A row with no allowed key gives O = 0,
// LSE = −Inf.
func attnForwardKernel[T scalar](a *attnProblem[T], o, lse, q, k, v []T) {
	if a.Tk == 0 {
		clear(o)
		for i := range lse {
			lse[i] = T(math.Inf(-1))
		}
		return
	}
	m := min(a.Tq, attnBlock)
	parallelFor(a.B*a.Hq, a.Tq*a.Tk*a.D*2, func(lo, hi int) {
		sb, fb := make([]T, m*a.Tk), make([]T, m*a.Tk)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/a.Hq, bh%a.Hq
			qo, ko := a.heads(b, h)
			for i0 := 0; i0 < a.Tq; i0 += m {
				n := min(m, a.Tq-i0)
				blasGemm(false, true, n, a.Tk, a.D, a.scale, q[qo+i0*a.D:], a.D, k[ko:], a.D, 0, sb, a.Tk, false)
				a.dropBlock(fb, b, h, i0, n)
				for r := 0; r < n; r++ {
					i, s, f := i0+r, sb[r*a.Tk:(r+1)*a.Tk], fb[r*a.Tk:(r+1)*a.Tk]
					a.rowScores(s, b, i)
					mx := T(math.Inf(-1))
					for _, x := range s {
						mx = max(mx, x)
					}
					if math.IsInf(float64(mx), -1) {
						lse[bh*a.Tq+i] = mx
						clear(s)
						continue
					}
					var sum T
					for j, x := range s {
						s[j] = T(math.Exp(float64(x - mx)))
						sum += s[j]
					}
					lse[bh*a.Tq+i] = mx + T(math.Log(float64(sum)))
					inv := 1 / sum
					for j, e := range s {
						s[j] = a.rnd(e * inv * f[j])
					}
				}
				blasGemm(false, false, n, a.D, a.Tk, 1, sb, a.Tk, v[ko:], a.D, 0, o[qo+i0*a.D:], a.D, false)
			}
		}
	})
}

// attnBackwardKernel computes dQ (B, Hq, Tq, D), dK and dV (B, Hkv, Tk, D) from dense dO and the forward's
// Q, K, V, O and LSE, one (b, key/value head) pair per task so that dK and dV sum their query heads in a fixed
// order, attnBlock query rows at a time: with P = exp(S − LSE) (S recomputed by a GEMM), f the dropout
// factor, dP_ij = f_ij·dO_i·V_j (a GEMM), Δ_i = Σ_j P_ij·dP_ij (computed from P and dP, not from the stored O:
// see docs/ATTENTION.md) and dS_ij = P_ij·(dP_ij − Δ_i),
//
//	dV += rnd(P·f)ᵀ·dO,   dQ = scale·rnd(dS)·K,   dK += scale·rnd(dS)ᵀ·Q      (three GEMMs per block).
//
// o is not read.
func attnBackwardKernel[T scalar](a *attnProblem[T], dq, dk, dv, q, k, v, o, lse, dout []T) {
	if a.Tk == 0 {
		clear(dq)
		return
	}
	g, m := a.Hq/a.Hkv, min(a.Tq, attnBlock)
	parallelFor(a.B*a.Hkv, g*a.Tq*a.Tk*a.D*4, func(lo, hi int) {
		sb, db, pb, fb := make([]T, m*a.Tk), make([]T, m*a.Tk), make([]T, m*a.Tk), make([]T, m*a.Tk)
		for bk := lo; bk < hi; bk++ {
			b, kh := bk/a.Hkv, bk%a.Hkv
			ko := bk * a.Tk * a.D
			dkh, dvh := dk[ko:ko+a.Tk*a.D], dv[ko:ko+a.Tk*a.D]
			clear(dkh)
			clear(dvh)
			for h := kh * g; h < (kh+1)*g; h++ {
				qo, _ := a.heads(b, h)
				for i0 := 0; i0 < a.Tq; i0 += m {
					n := min(m, a.Tq-i0)
					blasGemm(false, true, n, a.Tk, a.D, a.scale, q[qo+i0*a.D:], a.D, k[ko:], a.D, 0, sb, a.Tk, false)
					blasGemm(false, true, n, a.Tk, a.D, 1, dout[qo+i0*a.D:], a.D, v[ko:], a.D, 0, db, a.Tk, false)
					a.dropBlock(fb, b, h, i0, n)
					for r := 0; r < n; r++ {
						i := i0 + r
						p, dp, pd := sb[r*a.Tk:(r+1)*a.Tk], db[r*a.Tk:(r+1)*a.Tk], pb[r*a.Tk:(r+1)*a.Tk]
						f := fb[r*a.Tk : (r+1)*a.Tk]
						l := lse[(b*a.Hq+h)*a.Tq+i]
						if math.IsInf(float64(l), -1) { // no allowed key: no gradient
							clear(pd)
							clear(dp)
							continue
						}
						a.rowScores(p, b, i)
						var delta T
						for j, x := range p {
							if math.IsInf(float64(x), -1) {
								p[j], dp[j] = 0, 0
								continue
							}
							p[j], dp[j] = T(math.Exp(float64(x-l))), dp[j]*f[j]
							delta += p[j] * dp[j]
						}
						for j, x := range p {
							pd[j] = a.rnd(x * f[j])
							dp[j] = a.rnd(x * (dp[j] - delta)) // dS, rounded as the products' input
						}
					}
					blasGemm(true, false, a.Tk, a.D, n, 1, pb, a.Tk, dout[qo+i0*a.D:], a.D, 1, dvh, a.D, false)
					blasGemm(false, false, n, a.D, a.Tk, a.scale, db, a.Tk, k[ko:], a.D, 0, dq[qo+i0*a.D:], a.D, false)
					blasGemm(true, false, a.Tk, a.D, n, a.scale, db, a.Tk, q[qo+i0*a.D:], a.D, 1, dkh, a.D, false)
				}
			}
		}
	})
}

// Attention computes fused attention (tensor.AttentionArgs) with the reference kernel above, or for FP32 with
// its fast twin (attention_fast.go) where the processor has AVX-512: operands are
// gathered from their strided layout into dense FP32 (B, H, T, D) scratch, and O is rounded into its own
// elements only. Argument errors are those of opcheck.AttentionGeometry; the CPU supports every valid shape.
func (bk *Backend) Attention(a tensor.AttentionArgs) (err error) {
	ts := opcheck.AttentionTensors(a)
	defer guard(&err, "Attention", ts...)
	g, gerr := opcheck.AttentionGeometry(a, cpuOwner)
	if gerr != nil {
		return tensor.Errorf("Attention", gerr, ts...)
	}
	pr := newAttnProblem(g)
	if attnFast(pr) {
		attnForwardFast(pr, viewOf(g.O), f32Of(g.LSE), viewOf(g.Q), viewOf(g.K), viewOf(g.V))
		return nil
	}
	var sc scratch
	defer sc.release()
	q, k, v := sc.gather(g.Q, g.B, g.Hq, g.Tq, g.D), sc.gather(g.K, g.B, g.Hkv, g.Tk, g.D), sc.gather(g.V, g.B, g.Hkv, g.Tk, g.D)
	o := sc.get(g.B * g.Hq * g.Tq * g.D)
	attnForwardKernel(pr, o, f32Of(g.LSE), q, k, v)
	scatter(g.O, o, g.B, g.Hq, g.Tq, g.D)
	return nil
}

// AttentionBackward computes dQ, dK and dV of Attention (tensor.AttentionBackwardArgs) with the reference
// kernel above (or the fast one, as Attention), recomputing P from the saved LSE and the dropout mask from (Seed, Offset).
func (bk *Backend) AttentionBackward(a tensor.AttentionBackwardArgs) (err error) {
	ts := opcheck.AttentionBackwardTensors(a)
	defer guard(&err, "AttentionBackward", ts...)
	g, gerr := opcheck.AttentionBackwardGeometry(a, cpuOwner)
	if gerr != nil {
		return tensor.Errorf("AttentionBackward", gerr, ts...)
	}
	pr := newAttnProblem(g)
	if attnFast(pr) {
		attnBackwardFast(pr, viewOf(g.DQ), viewOf(g.DK), viewOf(g.DV), viewOf(g.Q), viewOf(g.K), viewOf(g.V),
			f32Of(g.LSE), viewOf(g.DO))
		return nil
	}
	nq, nk := g.B*g.Hq*g.Tq*g.D, g.B*g.Hkv*g.Tk*g.D
	var sc scratch
	defer sc.release()
	q, k, v := sc.gather(g.Q, g.B, g.Hq, g.Tq, g.D), sc.gather(g.K, g.B, g.Hkv, g.Tk, g.D), sc.gather(g.V, g.B, g.Hkv, g.Tk, g.D)
	o, dout := sc.gather(g.O, g.B, g.Hq, g.Tq, g.D), sc.gather(g.DO, g.B, g.Hq, g.Tq, g.D)
	dq, dk, dv := sc.get(nq), sc.get(nk), sc.get(nk) // every element is written by the kernel
	attnBackwardKernel(pr, dq, dk, dv, q, k, v, o, f32Of(g.LSE), dout)
	scatter(g.DQ, dq, g.B, g.Hq, g.Tq, g.D)
	scatter(g.DK, dk, g.B, g.Hkv, g.Tk, g.D)
	scatter(g.DV, dv, g.B, g.Hkv, g.Tk, g.D)
	return nil
}

// newAttnProblem turns a validated call into the FP32 kernels' problem, rounding P' and dS to the operands'
// dtype when it is half.
func newAttnProblem(g opcheck.Attention) *attnProblem[float32] {
	pr := &attnProblem[float32]{B: g.B, Hq: g.Hq, Hkv: g.Hkv, Tq: g.Tq, Tk: g.Tk, D: g.D, scale: g.Scale,
		causal: g.Causal, p: g.DropoutP, seed: g.Seed, offset: g.Offset}
	if g.Mask != nil {
		pr.mask = f32Of(g.Mask)
	}
	if g.Segments != nil {
		pr.seg = i32Of(g.Segments)
	}
	if dt := g.Q.T.DType; dt != tensor.F32 {
		pr.round = func(x float32) float32 { return tensor.RoundTo(dt, x) }
	}
	return pr
}

// scratch hands out FP32 buffers from the packing pool (sgemm.go) for one op call and returns them after it, so
// steady-state training steps do not allocate them again. Their contents are not cleared.
type scratch []*[]float32

func (s *scratch) get(n int) []float32 {
	p := getPack(n)
	*s = append(*s, p)
	return *p
}

func (s *scratch) release() {
	for _, p := range *s {
		packPool.Put(p)
	}
	*s = nil
}

// gather copies operand x, (b, h, t, d) through its strides, into a dense FP32 scratch slice (half widened
// exactly).
func (s *scratch) gather(x opcheck.AttnOperand, b, h, t, d int) []float32 {
	out := s.get(b * h * t * d)
	for r := 0; r < b*h*t; r++ {
		src := x.T.Offset + x.Index(r/(h*t), r/t%h, r%t)
		row := out[r*d : (r+1)*d]
		if x.T.DType == tensor.F32 {
			copy(row, bufOf(x.T).f32[src:src+d])
		} else {
			tensor.WidenHalf(row, bufOf(x.T).u16[src:src+d], x.T.DType)
		}
	}
	return out
}

// scatter rounds the dense (b, h, t, d) values v into operand x's own elements once.
func scatter(x opcheck.AttnOperand, v []float32, b, h, t, d int) {
	for r := 0; r < b*h*t; r++ {
		dst := x.T.Offset + x.Index(r/(h*t), r/t%h, r%t)
		row := v[r*d : (r+1)*d]
		if x.T.DType == tensor.F32 {
			copy(bufOf(x.T).f32[dst:dst+d], row)
		} else {
			tensor.NarrowHalf(bufOf(x.T).u16[dst:dst+d], row, x.T.DType)
		}
	}
}
