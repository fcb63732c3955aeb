//go:build cuda

package cuda

import (
	"testing"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// TestAttentionDispatch pins, per shape, which kernel every launch of Attention and AttentionBackward runs
// (module, name, grid, block, shared memory, block-order chunk): the table is the dispatch of the defaults as
// they were measured on the H200 (docs/PERFORMANCE.md, call r8: forward and backward v10), written down before
// the losing variants were removed, so that the removal cannot have changed a default. No GPU is needed.
func TestAttentionDispatch(t *testing.T) {
	ref := func(tq, tk, hq, hkv, b int) [3]attnKernel {
		return [3]attnKernel{
			{"attention_ref.cu", "attn_fwd_ref", cdiv(tq, 8), hq, b, 256, 0, 0},
			{"attention_ref.cu", "attn_bwd_dq_ref", cdiv(tq, 8), hq, b, 256, 0, 0},
			{"attention_ref.cu", "attn_bwd_dkdv_ref", cdiv(tk, 8), hkv, b, 256, 0, 0},
		}
	}
	for _, c := range []struct {
		name    string
		sm      int
		aligned bool
		dt      tensor.DType
		g       opcheck.Attention
		want    [3]attnKernel // forward, dQ, dK/dV
	}{
		{"BERT-base BF16", 90, true, tensor.BF16, opcheck.Attention{B: 64, Hq: 12, Hkv: 12, Tq: 512, Tk: 512, D: 64}, [3]attnKernel{
			{"attention_fwd_bf16_d64.cu", "attn_fwd_bf16_d64", 4, 12, 64, 128, 51200, 0},
			{"attention_bwd_bf16_d64.cu", "attn_bwd_dq_bf16_d64_h3v3", 6144, 1, 1, 128, 50176, 1},
			{"attention_bwd_bf16_d64.cu", "attn_bwd_dkdv_bf16_d64_q3v3", 6144, 1, 1, 128, 51200, 1}}},
		{"SmolLM2 GQA 9/3 causal BF16", 90, true, tensor.BF16, opcheck.Attention{B: 8, Hq: 9, Hkv: 3, Tq: 2048, Tk: 2048, D: 64, Causal: true}, [3]attnKernel{
			{"attention_fwd_bf16_d64.cu", "attn_fwd_bf16_d64", 16, 9, 8, 128, 51200, 0},
			{"attention_bwd_bf16_d64.cu", "attn_bwd_dq_bf16_d64_h3v3", 2304, 1, 1, 128, 50176, 32},
			{"attention_bwd_bf16_d64.cu", "attn_bwd_dkdv_bf16_d64_q3v3", 768, 1, 1, 128, 51200, 32}}},
		{"causal F16 tails", 80, true, tensor.F16, opcheck.Attention{B: 2, Hq: 4, Hkv: 4, Tq: 200, Tk: 200, D: 64, Causal: true}, [3]attnKernel{
			{"attention_fwd_f16_d64.cu", "attn_fwd_f16_d64", 2, 4, 2, 128, 51200, 0},
			{"attention_bwd_f16_d64.cu", "attn_bwd_dq_f16_d64_h3v3", 32, 1, 1, 128, 50176, 327},
			{"attention_bwd_f16_d64.cu", "attn_bwd_dkdv_f16_d64_q3v3", 32, 1, 1, 128, 51200, 327}}},
		{"decoder D=128 causal BF16", 90, true, tensor.BF16, opcheck.Attention{B: 8, Hq: 32, Hkv: 32, Tq: 2048, Tk: 2048, D: 128, Causal: true}, [3]attnKernel{
			{"attention_fwd_bf16_d128.cu", "attn_fwd_bf16_d128", 32, 32, 8, 128, 50176, 0},
			{"attention_bwd_bf16_d128.cu", "attn_bwd_dq_bf16_d128", 32, 32, 8, 128, 99328, 0},
			{"attention_bwd_bf16_d128.cu", "attn_bwd_dkdv_bf16_d128", 32, 32, 8, 128, 100352, 0}}},
		{"GQA D=128 F16", 90, true, tensor.F16, opcheck.Attention{B: 1, Hq: 6, Hkv: 2, Tq: 200, Tk: 130, D: 128}, [3]attnKernel{
			{"attention_fwd_f16_d128.cu", "attn_fwd_f16_d128", 4, 6, 1, 128, 50176, 0},
			{"attention_bwd_f16_d128.cu", "attn_bwd_dq_f16_d128", 4, 6, 1, 128, 99328, 0},
			{"attention_bwd_f16_d128.cu", "attn_bwd_dkdv_f16_d128", 3, 2, 1, 128, 100352, 0}}},
		{"F32", 90, true, tensor.F32, opcheck.Attention{B: 2, Hq: 4, Hkv: 2, Tq: 100, Tk: 90, D: 64}, ref(100, 90, 4, 2, 2)},
		{"D=96 BF16", 90, true, tensor.BF16, opcheck.Attention{B: 2, Hq: 4, Hkv: 2, Tq: 100, Tk: 100, D: 96}, ref(100, 100, 4, 2, 2)},
		{"unaligned BF16", 90, false, tensor.BF16, opcheck.Attention{B: 1, Hq: 2, Hkv: 2, Tq: 77, Tk: 77, D: 64}, ref(77, 77, 2, 2, 1)},
		{"sm_75 F16", 75, true, tensor.F16, opcheck.Attention{B: 1, Hq: 2, Hkv: 2, Tq: 64, Tk: 64, D: 128, Causal: true}, ref(64, 64, 2, 2, 1)},
	} {
		pl := attnPlanFor(c.sm, c.aligned, c.dt, c.g.D)
		bwd := pl.bwdKernels(c.g, false)
		got := [3]attnKernel{pl.fwdKernel(c.g), bwd[0], bwd[1]}
		for i, what := range []string{"forward", "dQ", "dK/dV"} {
			if got[i] != c.want[i] {
				t.Errorf("%s: %s launches %+v, want %+v", c.name, what, got[i], c.want[i])
			}
		}
	}
}

// TestAttentionFwdWgmmaRule pins when the forward takes the wgmma kernel (fwdWgmma) and its launch
// (fwdWgKernel): tensor-core plans on sm_90 only, not under TUNE_ATTN_FWD=mma or after the NVRTC failed to
// compile sm_90a, dropout only with Tk % 4 == 0. No GPU is needed.
func TestAttentionFwdWgmmaRule(t *testing.T) {
	bert := opcheck.Attention{B: 64, Hq: 12, Hkv: 12, Tq: 512, Tk: 512, D: 64}
	drop := bert
	drop.DropoutP = 0.1
	odd := drop
	odd.Tk = 510
	tc := attnPlanFor(90, true, tensor.BF16, 64)
	for _, c := range []struct {
		name   string
		b      *Backend
		pl     attnPlan
		g      opcheck.Attention
		mma    bool
		expect bool
	}{
		{"H200 BF16 D=64", &Backend{sm: 90}, tc, bert, false, true},
		{"H200 dropout", &Backend{sm: 90}, tc, drop, false, true},
		{"H200 dropout Tk%4 != 0", &Backend{sm: 90}, tc, odd, false, false},
		{"TUNE_ATTN_FWD=mma", &Backend{sm: 90}, tc, bert, true, false},
		{"NVRTC without sm_90a", &Backend{sm: 90, noWgmma: true}, tc, bert, false, false},
		{"A100", &Backend{sm: 80}, attnPlanFor(80, true, tensor.BF16, 64), bert, false, false},
		{"sm_100", &Backend{sm: 100}, attnPlanFor(100, true, tensor.BF16, 64), bert, false, false},
		{"general kernel", &Backend{sm: 90}, attnPlanFor(90, false, tensor.BF16, 64), bert, false, false},
	} {
		old := attnFwdMMA
		attnFwdMMA = c.mma
		if got := c.pl.fwdWgmma(c.b, c.g); got != c.expect {
			t.Errorf("%s: fwdWgmma = %v, want %v", c.name, got, c.expect)
		}
		attnFwdMMA = old
	}
	for _, c := range []struct {
		d    int
		g    opcheck.Attention
		want attnKernel
	}{
		{64, bert, attnKernel{"attention_fwdwg_bf16_d64.cu", "attn_fwd_wg_bf16_d64", 4, 12, 64, 256, 16384 + 32768 + 2048 + 1024, 0}},
		{128, opcheck.Attention{B: 8, Hq: 32, Hkv: 32, Tq: 2048, Tk: 2048, D: 128, Causal: true},
			attnKernel{"attention_fwdwg_bf16_d128.cu", "attn_fwd_wg_bf16_d128", 16, 32, 8, 256, 32768 + 131072 + 4096 + 1024, 0}},
	} {
		if got := attnPlanFor(90, true, tensor.BF16, c.d).fwdWgKernel(c.g); got != c.want {
			t.Errorf("D=%d: fwdWgKernel = %+v, want %+v", c.d, got, c.want)
		}
	}
}

// TestAttentionDispatchWG pins the launches of the warpgroup-MMA backward (kernels/attention_bwd_wg.cu, taken
// on sm_90 for D = 64): the mma.sync kernels' grids and block order with 1024 bytes more shared memory (the
// tiles' alignment), and no warpgroup kernels for D = 128.
func TestAttentionDispatchWG(t *testing.T) {
	g := opcheck.Attention{B: 64, Hq: 12, Hkv: 12, Tq: 512, Tk: 512, D: 64}
	got := attnPlanFor(90, true, tensor.BF16, 64).bwdKernels(g, true)
	want := [2]attnKernel{
		{"attention_bwd_wg_bf16_d64.cu", "attn_bwd_dq_wg_bf16_d64" + attnBwdWGVariant, 6144, 1, 1, 128, 51200, 1},
		{"attention_bwd_wg_bf16_d64.cu", "attn_bwd_dkdv_wg_bf16_d64" + attnBwdWGVariant, 6144, 1, 1, 128, 52224, 1},
	}
	if got != want {
		t.Errorf("BERT-base BF16 with wgmma: %+v, want %+v", got, want)
	}
	g = opcheck.Attention{B: 8, Hq: 32, Hkv: 32, Tq: 2048, Tk: 2048, D: 128, Causal: true}
	if k := attnPlanFor(90, true, tensor.BF16, 128).bwdKernels(g, true); k[0].mod != "attention_bwd_bf16_d128.cu" {
		t.Errorf("D = 128 with wg set launches %+v, want the mma.sync kernels", k)
	}
}
