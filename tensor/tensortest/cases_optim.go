package tensortest

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// optimizerCases: the F32-only master-state ops: NonFiniteCheckAndUnscale (clean, Inf, NaN, invScale 1) and
// AdamW over a flat buffer with a decaying segment, a non-decaying one and a frozen gap.
func optimizerCases() []opCase {
	g := newGen("optimizer")
	var cases []opCase
	for _, c := range []struct {
		name     string
		poison   float32
		invScale float32
	}{{"clean", 0, 1.0 / 1024}, {"Inf", float32(math.Inf(1)), 1.0 / 65536}, {"NaN", float32(math.NaN()), 0.5}, {"invScale 1", float32(math.Inf(-1)), 1}} {
		a, b := g.normal(33, 1000), g.normal(7, 1)
		if c.poison != 0 {
			b[3] = c.poison
		}
		cases = append(cases, opCase{"NonFiniteCheckAndUnscale " + c.name,
			[]arg{accum("a", tensor.F32, a, 3, 11), accum("b", tensor.F32, b, 7)},
			func(bk tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				found, err := bk.NonFiniteCheckAndUnscale(ts, c.invScale)
				f := 0.0
				if found {
					f = 1
				}
				return []float64{f}, err
			}})
	}
	const n = 101
	v := g.uniform(n, 0, 1e-2)
	segs := []tensor.Segment{{Offset: 0, Len: 40, Decay: true}, {Offset: 40, Len: 20, Decay: false}, {Offset: 67, Len: 34, Decay: true}}
	cases = append(cases, opCase{"AdamW step 3 with segments and a frozen gap",
		[]arg{accum("params", tensor.F32, g.normal(n, 1), n), input("grads", tensor.F32, g.normal(n, 1), n),
			accum("exp_avg", tensor.F32, g.normal(n, 0.1), n), accum("exp_avg_sq", tensor.F32, v, n)},
		func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
			return none(b.AdamW(tensor.AdamWArgs{Params: ts[0], Grads: ts[1], ExpAvg: ts[2], ExpAvgSq: ts[3], Segments: segs,
				LR: 2e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3}))
		}})
	// AdamW clipping the gradients as it reads them (AdamWArgs.GradNorm): a norm that clips, one within
	// max_norm, max_norm 0, and a non-finite norm (no clipping; the step taken, then skipped by its flag).
	for _, c := range []struct {
		name    string
		norm    float64
		maxNorm float32
		skip    int64 // -1: no Skip flag
	}{{"clipping", 37.5, 1, -1}, {"within max_norm", 0.25, 1, -1}, {"max_norm 0", 37.5, 0, 0},
		{"non-finite norm", math.Inf(1), 1, -1}, {"non-finite norm skipped", math.NaN(), 1, 1}} {
		args := []arg{accum("params", tensor.F32, g.normal(n, 1), n), input("grads", tensor.F32, g.normal(n, 1), n),
			accum("exp_avg", tensor.F32, g.normal(n, 0.1), n), accum("exp_avg_sq", tensor.F32, g.uniform(n, 0, 1e-2), n),
			index("grad_norm", tensor.I64, []int64{int64(math.Float64bits(c.norm))}, 1)}
		if c.skip >= 0 {
			args = append(args, index("skip", tensor.I32, []int64{c.skip}, 1))
		}
		cases = append(cases, opCase{"AdamW clipped by a device norm: " + c.name, args,
			func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
				a := tensor.AdamWArgs{Params: ts[0], Grads: ts[1], ExpAvg: ts[2], ExpAvgSq: ts[3], Segments: segs,
					LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradNorm: ts[4], MaxGradNorm: c.maxNorm}
				if len(ts) > 5 {
					a.Skip = ts[5]
				}
				return none(b.AdamW(a))
			}})
	}
	return cases
}
