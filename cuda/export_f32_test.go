//go:build cuda

package cuda

// SetAttnF32Ref sends F32 fused attention to the general kernels (attn_*_ref) when on, as TUNE_ATTN_F32=ref
// does, instead of the chunked GEMM path (attention_f32.go).
func SetAttnF32Ref(on bool) (restore func()) {
	old := attnF32Ref
	attnF32Ref = on
	return func() { attnF32Ref = old }
}

// SetAttnF32Scratch sets the FP32 path's score scratch bound in bytes (TUNE_ATTN_F32_SCRATCH), so that tests
// reach chunks that split the (batch, head) pairs unevenly and row blocks within one head.
func SetAttnF32Scratch(n int) (restore func()) {
	old := attnF32Scratch
	attnF32Scratch = n
	return func() { attnF32Scratch = old }
}

// SetAttnF32CausalBlock sets the largest row block of a causal FP32 call (512 by default).
func SetAttnF32CausalBlock(n int) (restore func()) {
	old := attnF32CausalBlock
	attnF32CausalBlock = n
	return func() { attnF32CausalBlock = old }
}

// AttnF32Scratch is the FP32 path's score scratch bound in bytes in force.
func AttnF32Scratch() int { return attnF32Scratch }

// SetAttnF32NoRows skips the FP32 path's row kernels when on (the results are wrong): the microbenchmark times
// the products alone.
func SetAttnF32NoRows(on bool) (restore func()) {
	old := attnF32NoRows
	attnF32NoRows = on
	return func() { attnF32NoRows = old }
}
