// Package tensor is tune's tensor core: the element types (DType, with exact FP16/BF16 conversions), the Tensor
// view (shape, dtype, backend buffer, offset), the Backend interface that holds the whole op set forward and
// backward, the Philox 4x32-10 generator that makes dropout masks identical on every backend, and typed errors
// (*OpError wrapping ErrShape, ErrDType, ...).
//
// # Simplest use
//
// Open a backend, allocate, upload, run an op, download (the CPU reference backend here; package cuda is the
// GPU one):
//
//	b := cpu.New()
//	x, _ := b.Alloc(tensor.F32, 2, 3)                // zero-filled, shape (2, 3)
//	_ = b.Upload(x, []float32{1, 2, 3, 4, 5, 6})
//	y, _ := b.Alloc(tensor.BF16, 2, 3)
//	_ = b.GELU(y, x)                                 // computed in FP32, rounded to BF16 on store
//	out := make([]float32, y.Numel())
//	_ = b.Download(out, y)                           // widened exactly to float32
//
// # Element types
//
// A DType is F32, F16 (IEEE binary16), BF16 (bfloat16), I32 or I64, spelled as safetensors spells them
// (ParseDType also reads "fp16", "bfloat16", ...). F32ToF16 and F32ToBF16 round to nearest even as the GPU and
// PyTorch do (values past the largest finite half become ±Inf); F16ToF32 and BF16ToF32 are exact. RoundTo(d, f)
// is what storing f in a tensor of dtype d and reading it back gives; WidenHalf and NarrowHalf convert slices.
//
// # Tensors are views
//
// A *Tensor is Shape, DType and Offset into a backend-owned Buffer; it owns nothing. View and Reshape make new
// views of the same buffer without copying, which is how a model carves its parameters out of one flat buffer
// (so zero-grad is one Fill and the optimizer one AdamW call) and its activations out of one step arena:
//
//	flat, _ := b.Alloc(tensor.F32, out*in+out)
//	w, _ := flat.View(0, out, in)                    // (out, in) weight
//	bias, _ := flat.View(out*in, out)                // (out) bias right after it
//
// Ops never check whether their arguments overlap: an output that is exactly one of the inputs (GELU(x, x)) is
// supported by the elementwise and row-wise ops, partial overlap by none.
//
// # The Backend
//
// Backend's methods follow llm.c's conventions: outputs first, then inputs, then weights, then sizes. Float
// arguments may be F32, F16 or BF16 unless a method says otherwise; each op loads to FP32, computes in FP32 and
// rounds each output to its own dtype once. Outputs documented "=" are overwritten, "+=" accumulated (weight
// gradients accumulate, so micro-batches need no extra pass). Ops may be asynchronous (CUDA): values reach the
// host through Download, the scalar reductions (GlobalNorm, NonFiniteCheckAndUnscale) or Synchronize.
//
// The GEMM takes every layout cuBLASLt does through GemmArgs: a Linear layer's forward y = x·Wᵀ + b, with
// x (N, in), W (out, in) and y (N, out), is
//
//	err := b.Gemm(tensor.GemmArgs{M: n, N: out, K: in, A: x, B: w, TransB: true, C: y, Alpha: 1, Bias: bias})
//
// and its weight gradient dW (out, in) += dyᵀ·x is {M: out, N: in, K: n, A: dy, TransA: true, B: x, C: dw,
// Alpha: 1, Beta: 1}. Batch and the Stride fields run many products at once (the attention heads). AdamW updates
// flat parameter, gradient and moment buffers in one call (AdamWArgs, PyTorch's formula), Segments saying
// which ranges decay.
//
// Attention and AttentionBackward are fused scaled-dot-product attention (FlashAttention-2's algorithm on the
// GPU): they never hold the (Tq, Tk) scores, only the FP32 log-sum-exp of each row. Their operands are
// AttnOperands, (B, H, T, D) views given by strides, so the heads are read in place from a projection's
// (B, T, H·D) output — Q, K and V of a (B, T, 3C) buffer of the fused QKV projection are
//
//	q := tensor.AttnOperand{T: qkv, StrideB: T * 3 * C, StrideH: D, StrideT: 3 * C}
//	k, v := q, q
//	k.T, _ = qkv.View(C, qkv.Numel()-C)     // K starts at channel C of row 0
//	v.T, _ = qkv.View(2*C, qkv.Numel()-2*C) // V at channel 2C
//
// (see AttentionArgs; docs/ATTENTION.md gives the numerics contract every backend keeps).
//
// # Randomness
//
// Dropout draws from Philox 4x32-10 (Salmon et al., SC'11) at a (seed, offset) the caller chooses: element i is
// kept when PhiloxUniform(seed, offset, i) ≥ p (PhiloxKeep), its uniform being 16-bit slice i%8 of the block at
// counter offset + i/8 (eight draws per block; p is quantised up to a multiple of 2⁻¹⁶). Every backend computes the same draw, so the CPU
// and the GPU produce the same masks, and a caller that draws several masks advances its offset by
// PhiloxCounters(n) after each so that no two share draws. A resumed run needs only the seed and the offset.
//
// # Errors
//
// Every op returns nil or an *OpError naming the op and its arguments' shapes, wrapping one of the sentinels
// ErrShape, ErrDType, ErrBackend, ErrArgument, ErrUnsupported (a valid shape a backend's kernel does not
// cover; the message says what is supported) or ErrNoDevice:
//
//	if errors.Is(err, tensor.ErrShape) { ... }
//	var oe *tensor.OpError
//	if errors.As(err, &oe) { fmt.Println(oe.Op, oe.Shapes) }
//
// # Full control: backends
//
// Backend packages register themselves from init (RegisterBackend, as database/sql drivers do): importing
// tensor/cpu registers "cpu", a binary built with the cuda tag registers "cuda". Backends lists them, and
// tensortest.ForEachBackend runs a test once on each, so a test written once checks every compiled backend
// against the same expectations. A new backend implements Backend and must pass tensortest.RunOpSuite, which
// checks every op against the CPU reference on odd shapes in every float dtype.
package tensor
