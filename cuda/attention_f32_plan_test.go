//go:build cuda

package cuda

import (
	"testing"

	"github.com/tune-ml/tune/internal/opcheck"
)

// TestF32PairJobs checks when the FP32 attention path merges (batch member, head) pairs into one job axis
// and how it then chunks them: dense (B, H, T, D) operands of one head per KV head by strided batches (BERT-base
// at 32×128: 384 pairs in one chunk), the attention layers' rows layout through pointer arrays when the legacy
// cuBLAS runs, and neither for GQA, misaligned rows, or a causal call with Tq > Tk through pointer arrays.
func TestF32PairJobs(t *testing.T) {
	const B, H, T, D = 32, 12, 128, 64
	dense := opcheck.AttnOperand{SB: H * T * D, SH: T * D, ST: D}
	rows := opcheck.AttnOperand{SB: T * 3 * H * D, SH: D, ST: 3 * H * D} // BERT's packed QKV rows
	odd := opcheck.AttnOperand{SB: T * 3 * H * 30, SH: 30, ST: 3 * H * 30}
	yes, no := func() bool { return true }, func() bool { return false }
	g := opcheck.Attention{B: B, Hq: H, Hkv: H, Tq: T, Tk: T, D: D}
	gqa := g
	gqa.Hkv = 4
	causal := g
	causal.Causal, causal.Tq = true, T+1
	for _, c := range []struct {
		name string
		g    opcheck.Attention
		blas func() bool
		ops  []opcheck.AttnOperand
		want f32PairMode
	}{
		{"dense", g, no, []opcheck.AttnOperand{dense, dense, dense, dense}, f32PairsStrided},
		{"rows", g, yes, []opcheck.AttnOperand{rows, rows, rows, dense}, f32PairsPtrs},
		{"rows without cuBLAS", g, no, []opcheck.AttnOperand{rows, rows, rows, dense}, f32PairsNone},
		{"rows of 30-wide heads (not 16-byte aligned)", g, yes, []opcheck.AttnOperand{odd, odd, odd, odd}, f32PairsNone},
		{"GQA", gqa, yes, []opcheck.AttnOperand{dense, dense, dense, dense}, f32PairsNone},
		{"causal Tq > Tk, rows", causal, yes, []opcheck.AttnOperand{rows, rows, rows, rows}, f32PairsNone},
		{"causal Tq > Tk, dense", causal, yes, []opcheck.AttnOperand{dense, dense, dense, dense}, f32PairsStrided},
	} {
		if got := f32PairKind(c.g, c.blas, c.ops...); got != c.want {
			t.Errorf("%s: pair mode %d, want %d", c.name, got, c.want)
		}
	}
	defer func(old int) { attnF32Scratch = old }(attnF32Scratch)
	attnF32Scratch = 256 << 20
	c := f32Plan(g, f32PairsPtrs, 2, 0, 0)
	if c.pairs != f32PairsPtrs || c.jobs != B*H || c.per != B*H || c.rb != T {
		t.Fatalf("pair plan %+v: want all %d pairs in one chunk of full rows", c, B*H)
	}
	js := f32Fixed(g, c)
	if len(js) != 1 || js[0] != (f32Job{dh: 1, dhk: 1}) {
		t.Fatalf("pair plan's fixed parts %+v: want one job axis of unit head steps", js)
	}
	// With strided batches pair p = b·H + h starts where the dense operand's (b, h) does.
	for _, p := range []int{0, 1, H - 1, H, 5*H + 7, B*H - 1} {
		if got, want := js[0].q(dense, p, 3), dense.Index(p/H, p%H, 3); got != want {
			t.Fatalf("pair %d: offset %d, want %d", p, got, want)
		}
	}
	attnF32Scratch = 2 * 100 * T * ((T + 3) &^ 3) * 4 // room for 100 pairs' S and dP': chunks evened out
	c = f32Plan(g, f32PairsStrided, 2, 0, 0)
	if c.per > 100 || c.per*cdiv(c.jobs, c.per) < c.jobs || c.jobs-c.per*(cdiv(c.jobs, c.per)-1) < c.per/2 {
		t.Fatalf("pair plan under a 100-pair scratch %+v: want even chunks of at most 100", c)
	}
	if u := f32Plan(g, f32PairsNone, 2, 0, 0); u.pairs != f32PairsNone || u.jobs != B {
		t.Fatalf("one-axis plan %+v: want jobs along the batch", u)
	}
}
