package tensor

import "math"

// Backend holds the whole op set the models, the AMP machinery and the optimizer need, forward and backward.
//
// Conventions (as in llm.c): arguments are outputs first, then inputs, then weights, then sizes. Every
// floating-point argument may be F32, F16 or BF16 unless the doc says otherwise; an op loads its inputs to FP32,
// computes in FP32 and rounds each output to its own dtype on store (round-to-nearest-even). Outputs documented
// with "=" are overwritten; outputs documented with "+=" are accumulated into (weight gradients accumulate, so
// gradient accumulation over micro-batches needs no extra pass). Shapes are given with the legend N rows,
// C channels, B batch, T sequence, H heads, D head size, V vocabulary.
//
// Ops may run asynchronously (CUDA): values reach the host only through Download, the scalar-returning
// reductions (GlobalNorm, NonFiniteCheckAndUnscale), or after Synchronize; GlobalNormTo, ClipByNorm and
// AdamWArgs.Skip keep an optimizer step's gradient norm on the device (see HostWaitCounter). Every error is an *OpError naming the
// op and its argument shapes.
type Backend interface {
	// Name identifies the backend and device: "cpu", "cuda:0".
	Name() string

	// Alloc returns a zero-filled tensor of the given dtype and shape.
	Alloc(dt DType, shape ...int) (*Tensor, error)
	// Free releases t's buffer (for a view: nothing). Using t afterwards is an error.
	Free(t *Tensor)
	// Upload copies host data into dst: src is []float32 for a float dst (converted with RNE), []uint16 raw
	// bits for an F16/BF16 dst, []int32 or []int64 for an integer dst. len(src) must equal dst.Numel().
	Upload(dst *Tensor, src any) error
	// Download copies src to the host: dst is []float32 for any float src (widened exactly), []uint16 for raw
	// F16/BF16 bits, []int32 / []int64 for integers. len(dst) must equal src.Numel().
	Download(dst any, src *Tensor) error
	// Copy: dst = src for tensors of equal dtype and element count.
	Copy(dst, src *Tensor) error
	// Synchronize waits for all queued work.
	Synchronize() error

	// Gemm computes C = alpha·op(A)·op(B) + beta·C (+ bias), batched and strided; see GemmArgs.
	Gemm(a GemmArgs) error

	// Fill: x = v (for every element; v rounded to x's dtype).
	Fill(x *Tensor, v float32) error
	// Cast: dst = src converted to dst's dtype (float↔float; equal element counts).
	Cast(dst, src *Tensor) error
	// Scale: x = alpha·x in place.
	Scale(x *Tensor, alpha float32) error
	// Add: out = a + b elementwise (equal element counts; the residual add).
	Add(out, a, b *Tensor) error
	// Axpy: y += alpha·x elementwise (equal element counts; gradient accumulation of branches).
	Axpy(y, x *Tensor, alpha float32) error
	// BiasAdd: y (N, C) += bias (C), broadcast over rows.
	BiasAdd(y, bias *Tensor) error
	// BiasGrad: dbias (C) += Σ_rows dy (N, C).
	BiasGrad(dbias, dy *Tensor) error

	// GELU: out = x·Φ(x) = 0.5·x·(1 + erf(x/√2)), the exact form (PyTorch gelu, approximate='none').
	GELU(out, x *Tensor) error
	// GELUBackward: dx = dout·(Φ(x) + x·φ(x)), φ the standard normal density.
	GELUBackward(dx, dout, x *Tensor) error
	// GELUBackwardRecompute is GELUBackward and, when out is non-nil, GELU(out, x) in one pass over x: the
	// backward of a GELU whose output was not kept, recomputed for the next weight gradient (x read once,
	// the forward's values bit for bit). When dbias (C) is non-nil it also does BiasGrad(dbias, dx) over dx's
	// (N, C) rows: the bias gradient of the Linear whose output x is. dx may be dout; out must not overlap
	// dx, dout or x.
	GELUBackwardRecompute(dx, out, dbias, dout, x *Tensor) error
	// Tanh: out = tanh(x).
	Tanh(out, x *Tensor) error
	// TanhBackward: dx = dout·(1 − y²) where y = tanh(x) is the forward output.
	TanhBackward(dx, dout, y *Tensor) error

	// LayerNorm over the last axis: x (N, C) → out (N, C) = (x − μ)·rstd·gamma + beta, with
	// rstd = 1/sqrt(var + eps) (biased variance, as torch.nn.LayerNorm); mean (N) and rstd (N) must be F32 and
	// are saved for the backward (=).
	LayerNorm(out, mean, rstd, x, gamma, beta *Tensor, eps float32) error
	// LayerNormBackward: dx (N, C) =, dgamma (C) +=, dbeta (C) += from dout (N, C) and the forward's x, gamma,
	// mean, rstd. dgamma/dbeta may be nil for a frozen LayerNorm.
	LayerNormBackward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *Tensor) error
	// ResidualLayerNorm is a post-LayerNorm block's tail, LayerNorm(dropout(y) + x), in one pass; see
	// ResidualNormArgs.
	ResidualLayerNorm(a ResidualNormArgs) error
	// ResidualLayerNormBackward is its backward: LayerNormBackward, whose dx is the residual's gradient,
	// and the branch's gradient DropoutBackward(dx) in one pass; see ResidualNormBackwardArgs.
	ResidualLayerNormBackward(a ResidualNormBackwardArgs) error

	// RMSNorm over the last axis: x (N, C) → out (N, C) = weight·round_x(x·rstd), rstd (N) F32 =
	// 1/sqrt(mean(x²) + eps), the statistics in FP32. As transformers' LlamaRMSNorm, the normalised value is
	// rounded to x's dtype (round_x) before the weight multiply, and the product is rounded to out's dtype;
	// weight (C) is F32 or half, out any float dtype (x's dtype, or F32 as PyTorch's promotion of an F32
	// weight gives under autocast). rstd is saved for the backward (=). Qwen3's q/k norm is the same op over
	// rows of D (N = B·T·H).
	RMSNorm(out, rstd, x, weight *Tensor, eps float32) error
	// RMSNormBackward: dx (N, C) =, dweight (C) += (nil for a frozen weight), from dout (N, C) and the
	// forward's x, weight and rstd (N, F32): with n̂ = x·rstd and g = round_x(dout·weight),
	// dx = rstd·(g − n̂·mean(g·n̂)) and dweight += Σ_rows dout·round_x(n̂).
	RMSNormBackward(dx, dweight, dout, x, weight, rstd *Tensor) error
	// ResidualRMSNorm is a pre-norm decoder's residual add and the next RMSNorm in one pass, Sum = X + Y then
	// RMSNorm(Sum); see ResidualRMSNormArgs.
	ResidualRMSNorm(a ResidualRMSNormArgs) error
	// ResidualRMSNormBackward is its backward: RMSNormBackward whose dx is added to the residual stream's
	// gradient, that gradient's half copy for the next GEMM, and the weight gradient in one pass; see
	// ResidualRMSNormBackwardArgs.
	ResidualRMSNormBackward(a ResidualRMSNormBackwardArgs) error

	// RoPE rotates x in place, a strided (B, H, T, D) operand (AttnOperand: it works inside a fused QKV
	// buffer), by the rotate-half convention of transformers' apply_rotary_pos_emb: with x1 = x[..., :D/2],
	// x2 = x[..., D/2:], c = cos[p, i], s = sin[p, i] and p = positions[b, t] (I32, (B, T)),
	// x1' = x1·c − x2·s and x2' = x2·c + x1·s. cos and sin are (P, D/2) F32 tables built on the host (rope
	// scaling is the model's business); D must be even and every position in [0, P). Math in FP32, rounded
	// once to x's dtype. inverse applies the transposed rotation (the backward: dx = Rᵀ·dy).
	RoPE(x AttnOperand, b, h, t, d int, positions, cos, sin *Tensor, inverse bool) error

	// SwiGLU: out (N, I) = round_gate(silu(gate))·up, silu(g) = g·σ(g), gate and up (N, I) of one dtype, in
	// FP32; the activation is rounded to gate's dtype before the multiply, as transformers' LlamaMLP
	// (act_fn(gate_proj(x)) * up_proj(x)) does.
	SwiGLU(out, gate, up *Tensor) error
	// SwiGLUBackward: dgate = round(dout·up)·silu'(gate) and dup = dout·round(silu(gate)), both =, from dout
	// and the forward's gate and up (the intermediate roundings are to gate's dtype, as PyTorch's autograd).
	SwiGLUBackward(dgate, dup, dout, gate, up *Tensor) error
	// SwiGLUBackwardRecompute is SwiGLUBackward and SwiGLU(out, gate, up) in one pass over gate and up: the
	// backward of a SwiGLU whose output was not kept, recomputed for the next weight gradient (the forward's
	// values bit for bit). out may be gate or up; dgate and dup must not overlap out.
	SwiGLUBackwardRecompute(dgate, dup, out, dout, gate, up *Tensor) error

	// GELUTanh: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the tanh approximation (PyTorch gelu with
	// approximate='tanh'; transformers' gelu_pytorch_tanh and gelu_new, GPT-2's activation), FP32, rounded once.
	GELUTanh(out, x *Tensor) error
	// GELUTanhBackward: dx = dout·d/dx GELUTanh(x).
	GELUTanhBackward(dx, dout, x *Tensor) error

	// Softmax over the last axis with an additive mask: x viewed as (B, R, C) rows, mask (B, C) F32 or nil,
	// out (B, R, C) = softmax(x + mask[b]) per row. A row whose every entry is -Inf gives zeros.
	Softmax(out, x, mask *Tensor) error
	// SoftmaxBackward: dx = y·(dout − Σ_c dout·y) per row, y the forward output.
	SoftmaxBackward(dx, dout, y *Tensor) error

	// Dropout: out = x·keep/(1−p), where keep is drawn per element by Philox 4x32-10 from (seed, offset);
	// see PhiloxKeep for the exact draw, shared with every backend. p in [0, 1); p == 0 copies.
	Dropout(out, x *Tensor, p float32, seed, offset uint64) error
	// DropoutBackward: dx = dout·keep/(1−p), regenerating the same mask from (seed, offset).
	DropoutBackward(dx, dout *Tensor, p float32, seed, offset uint64) error

	// Transpose12 swaps axes 1 and 2 of x (A, B, C, D) into out (A, C, B, D): (B,T,H,D) ↔ (B,H,T,D) for
	// attention heads. The backward is the same op with out and x exchanged.
	Transpose12(out, x *Tensor, a, b, c, d int) error

	// Attention is fused scaled-dot-product attention, O = dropout(softmax(Q·Kᵀ·Scale + mask))·V, without
	// materialising the (Tq, Tk) scores; it also writes the FP32 log-sum-exp of each score row for the
	// backward. See AttentionArgs for the operands, masking, grouped-query heads, dropout and the numerics.
	Attention(a AttentionArgs) error
	// AttentionBackward computes dQ, dK and dV of Attention from dO, the forward's Q, K, V, O and LSE,
	// recomputing the probabilities from LSE (the same dropout mask is redrawn from Seed and Offset).
	AttentionBackward(a AttentionBackwardArgs) error

	// Embedding: out (N, C) = table (V, C) [ids (N)] with ids I32 or I64; an id outside [0, V) is an error.
	Embedding(out, ids, table *Tensor) error
	// EmbeddingBackward: dtable (V, C) += scatter-add of dout (N, C) rows at ids (N).
	EmbeddingBackward(dtable, ids, dout *Tensor) error

	// CrossEntropy: losses (N) F32 = −log softmax(logits (N, V))[label] per row, labels (N) I32/I64; a row
	// whose label equals ignoreIndex (−100 in PyTorch) gets loss 0. Returns the number of rows not ignored.
	CrossEntropy(losses, logits, labels *Tensor, ignoreIndex int) (count int, err error)
	// CrossEntropyBackward: dlogits (N, V) = scale·(softmax(logits) − onehot(label)) for counted rows and 0 for
	// ignored rows. For a mean loss seeded with the loss scale S over n counted rows, scale = S/n. scaleBy, when
	// non-nil, is an F32 (1) tensor whose value multiplies scale on the device first (FP32, rounded once): the
	// loss scale a GradScaler keeps on the device (amp.DeviceScaler), so that no host waits for it.
	CrossEntropyBackward(dlogits, logits, labels *Tensor, scale float32, ignoreIndex int, scaleBy *Tensor) error
	// CrossEntropyWithGrad is CrossEntropy, ArgMax (when pred is non-nil) and CrossEntropyBackward of the same
	// logits in one op, a language-model head's chunk whose gradient is formed at once: losses (N) F32,
	// pred (N) I32, dlogits (N, V) = scale·(softmax(logits) − onehot(label)) for counted rows and 0 for ignored
	// rows. Returns the counted rows. Every output holds the bits the three ops give on the same backend;
	// dlogits may be logits. scaleBy is CrossEntropyBackward's.
	CrossEntropyWithGrad(losses, pred, dlogits, logits, labels *Tensor, scale float32, ignoreIndex int, scaleBy *Tensor) (count int, err error)
	// ArgMax: out (N) I32 = the index of the largest entry of each row of x (N, V), the first among equal
	// maxima, a NaN counting as larger than any number (torch.argmax): a language-model head's greedy
	// prediction, which token accuracy compares with the labels.
	ArgMax(out, x *Tensor) error
	// MSELoss: losses (N) F32 = (pred − target)², pred and target (N).
	MSELoss(losses, pred, target *Tensor) error
	// MSELossBackward: dpred (N) = scale·2·(pred − target); for a mean loss scale = S/N. scaleBy is
	// CrossEntropyBackward's.
	MSELossBackward(dpred, pred, target *Tensor, scale float32, scaleBy *Tensor) error

	// GlobalNorm returns sqrt(Σ_t Σ_i t_i²) over all tensors, accumulated in float64 on the host side of the
	// reduction (FP32 per-tensor partials on a GPU). Non-finite inputs give a non-finite norm.
	GlobalNorm(ts []*Tensor) (float64, error)
	// GlobalNormTo is GlobalNorm with the result left on the device, so that the host need not wait for it:
	// norm, an I64 (1) tensor, receives the IEEE-754 bits of the float64 norm (math.Float64bits; read it with
	// Download and math.Float64frombits), bit for bit the value GlobalNorm returns on the same backend.
	GlobalNormTo(norm *Tensor, ts []*Tensor) error
	// ClipByNorm is the scaling of torch.nn.utils.clip_grad_norm_ from a norm on the device (GlobalNormTo's
	// I64 bits): with total that float64, every element of every tensor of ts is multiplied in place by
	// coef = (1/(float32(total) + 1e-6))·maxNorm, each step rounded to FP32, when total is finite and coef < 1
	// (the values amp.ClipGradNorm gives). maxNorm 0 scales nothing (only the flag below). A non-finite total
	// leaves ts untouched and, when nonFinite (I32 (1)) is non-nil, sets nonFinite to 1: it is never reset
	// here, so it flags every step since the caller zeroed it (AdamWArgs.Skip reads it). ts may be empty: the
	// flag alone, for a step whose AdamW clips the gradients as it reads them (AdamWArgs.GradNorm).
	ClipByNorm(ts []*Tensor, norm *Tensor, maxNorm float32, nonFinite *Tensor) error
	// NonFiniteCheckAndUnscale multiplies every element of every F32 tensor by invScale in place (skipped when
	// invScale == 1) and reports whether any element was Inf or NaN (PyTorch's
	// _amp_foreach_non_finite_check_and_unscale_). Half-precision tensors are an ErrDType error.
	NonFiniteCheckAndUnscale(ts []*Tensor, invScale float32) (foundInf bool, err error)
	// NonFiniteCheckAndUnscaleOnDevice is NonFiniteCheckAndUnscale with the scale and the result on the device,
	// as PyTorch's op takes them: invScale = float32(1/float64(scale)) of scale (F32 (1)) is computed on the
	// device, and found (I32 (1)) is set to 1 when any element was Inf or NaN (never reset here). Nothing
	// waits.
	NonFiniteCheckAndUnscaleOnDevice(ts []*Tensor, scale, found *Tensor) error
	// UpdateScale is PyTorch's _amp_update_scale_ on the device; see UpdateScaleArgs.
	UpdateScale(a UpdateScaleArgs) error
	// AdamW updates flat F32 buffers in place; see AdamWArgs.
	AdamW(a AdamWArgs) error
}

// GemmArgs describes C = alpha·op(A)·op(B) + beta·C (+ Bias), row-major, for Batch independent products.
//
// op(A) is M×K (A stored M×K, or K×M when TransA); op(B) is K×N (B stored K×N, or N×K when TransB); C is M×N.
// LDA, LDB, LDC are row strides in elements (0 means dense: the stored matrix's column count). StrideA/B/C are
// the element distances between consecutive batch members (used when Batch > 1). A and B share one dtype
// (F32, F16 or BF16); C may be F32 or half. Accumulation is FP32 (cuBLASLt CUBLAS_COMPUTE_32F); beta·C reads C
// in FP32; the result is rounded to C's dtype once. Bias, if set, has N elements (one per output column, the
// Linear bias) and is added after alpha·AB + beta·C. An F32 GEMM stays true FP32 (no TF32) unless the backend
// was opened with TF32 allowed.
type GemmArgs struct {
	TransA, TransB            bool    // A is stored K×M (op(A) = Aᵀ); B is stored N×K (op(B) = Bᵀ)
	M, N, K                   int     // C is M×N, the inner dimension is K; each ≥ 0
	A, B, C                   *Tensor // operands; each must hold (Numel) every element the product touches
	LDA, LDB, LDC             int     // row strides of the stored A, B, C in elements; 0 for dense rows
	StrideA, StrideB, StrideC int     // elements between batch members; StrideA or StrideB 0 broadcasts
	Batch                     int     // number of independent products; 0 is taken as 1
	Alpha, Beta               float32 // C = Alpha·op(A)·op(B) + Beta·C; Beta 0 ignores C's old contents
	Bias                      *Tensor // optional, N elements added to every row of C; nil for none
}

// ResidualNormArgs describes ResidualLayerNorm, the end of BERT's BertSelfOutput and BertOutput
// (LayerNorm(dropout(dense(h)) + input_tensor), transformers/models/bert/modeling_bert.py), for (N, C) rows:
//
//	y'   = Dropout(Y, DropoutP, Seed, Offset)   rounded to Y's dtype; Y itself is not written
//	Sum  = y' + X                                rounded to Sum's dtype (=): the LayerNorm backward's input
//	Out  = LayerNorm(Sum; Gamma, Beta, Eps)      (=), Mean and Rstd (N) F32 (=), as the LayerNorm op
//	OutHalf = Out converted to OutHalf's dtype   (=) when set: the next GEMM's input, no separate Cast
//
// Every output holds the bits the separate ops (Dropout, Add, LayerNorm, Cast) give on the same backend.
// Outputs must not overlap Y, X or each other.
type ResidualNormArgs struct {
	Sum, Out, OutHalf *Tensor // (N, C) written; OutHalf may be nil
	Mean, Rstd        *Tensor // (N) F32, written
	Y, X              *Tensor // (N, C) the branch (before its dropout) and the residual
	Gamma, Beta       *Tensor // (C) LayerNorm weight and bias
	Eps               float32 // LayerNorm's ε (layer_norm_eps)
	DropoutP          float32 // dropout probability on Y, in [0, 1); 0 for none
	Seed, Offset      uint64  // Philox key and counter base of Y's dropout mask (see PhiloxKeep)
}

// ResidualNormBackwardArgs describes ResidualLayerNormBackward for (N, C) rows:
//
//	LayerNormBackward(DX, DGamma, DBeta, DOut, X, Gamma, Mean, Rstd)   DX =, DGamma and DBeta += (nil: frozen)
//	DY = DropoutBackward(DX, DropoutP, Seed, Offset)                     (=), a Cast of DX when DropoutP is 0
//	BiasGrad(DBias, DY)                                                  DBias += (nil: none)
//
// X, Mean and Rstd are the forward's Sum and statistics; DX is the gradient of the residual input X of the
// forward, DY that of its branch Y. DBias is the bias gradient of the projection whose output Y was (BERT's
// attention.output.dense and output.dense): the column sum of the DY just formed, without a second read of
// it. Every output holds the bits the separate ops give on the same backend. DX may be DOut or X; DY and
// DBias must not overlap the other arguments.
type ResidualNormBackwardArgs struct {
	DX, DY        *Tensor // (N, C) written
	DGamma, DBeta *Tensor // (C) accumulated; either may be nil
	DBias         *Tensor // (C) accumulated: Σ over rows of DY; nil for none
	DOut, X       *Tensor // (N, C) the output's gradient and the forward's Sum
	Gamma         *Tensor // (C)
	Mean, Rstd    *Tensor // (N) F32, as the forward saved them
	DropoutP      float32 // the forward's dropout on Y, in [0, 1); 0 for none
	Seed, Offset  uint64  // the forward's Philox key and counter base
}

// ResidualRMSNormArgs describes ResidualRMSNorm for (N, C) rows, the residual add of a pre-norm decoder
// layer (transformers' LlamaDecoderLayer: hidden_states = residual + hidden_states) followed by the RMSNorm
// that reads its result (post_attention_layernorm, or the next layer's input_layernorm, or the final norm):
//
//	Sum = X + Y                         rounded to Sum's dtype (=): the residual stream
//	Out = RMSNorm(Sum; Weight, Eps)     (=), Rstd (N) F32 (=), as the RMSNorm op with x = Sum
//
// Every output holds the bits Add(Sum, X, Y) then RMSNorm(Out, Rstd, Sum, Weight, Eps) give on the same
// backend. Outputs must not overlap X, Y or each other.
type ResidualRMSNormArgs struct {
	Sum, Out *Tensor // (N, C) written
	Rstd     *Tensor // (N) F32, written
	X, Y     *Tensor // (N, C) the residual and the branch output
	Weight   *Tensor // (C)
	Eps      float32 // rms_norm_eps
}

// ResidualRMSNormBackwardArgs describes ResidualRMSNormBackward for (N, C) rows:
//
//	RMSNormBackward(dx, DWeight, DOut, X, Weight, Rstd)   dx in DX's dtype, DWeight += (nil: frozen)
//	DX = DX + dx (Accumulate) or DX = dx                   the residual stream's gradient
//	DXHalf = DX converted to DXHalf's dtype               when set: the next GEMM's copy, no separate Cast
//
// X and Rstd are the forward's Sum and statistics. DX and DXHalf hold the bits the separate ops
// (RMSNormBackward into a scratch of DX's dtype, Axpy, Cast) give on the same backend; DWeight is the same
// column sum, which a backend may add in another fixed order than RMSNormBackward's (deterministic, equal up
// to FP32 summation rounding). DX and DXHalf must not
// overlap DOut, X or each other.
type ResidualRMSNormBackwardArgs struct {
	DX, DXHalf *Tensor // (N, C); DXHalf may be nil
	DWeight    *Tensor // (C) accumulated; nil for a frozen weight
	DOut, X    *Tensor // (N, C) the norm output's gradient and the forward's Sum
	Weight     *Tensor // (C)
	Rstd       *Tensor // (N) F32, as the forward saved it
	Accumulate bool    // add dx to DX (the gradient of the residual's other use) instead of overwriting it
}

// Segment is a contiguous range [Offset, Offset+Len) of a flat parameter buffer with its own weight-decay flag.
type Segment struct {
	Offset, Len int  // the range's first element and length, in elements of the flat buffer
	Decay       bool // apply AdamWArgs.WeightDecay to these elements (false for biases and LayerNorm)
}

// AdamWArgs drives one AdamW step over flat F32 buffers of equal length (PyTorch torch.optim.AdamW with
// decoupled weight decay, _single_tensor_adam): for each element, with t = Step (1-based, after increment),
//
//	p  = p·(1 − lr·wd)                     (only where the segment decays)
//	m  = β1·m + (1−β1)·g
//	v  = β2·v + (1−β2)·g²
//	p  = p − lr·(m/(1−β1^t)) / (sqrt(v/(1−β2^t)) + eps)
//
// Segments lists the decaying and non-decaying ranges; nil means the whole buffer decays. Elements outside
// every segment are left untouched (frozen parameters).
type AdamWArgs struct {
	Params, Grads, ExpAvg, ExpAvgSq *Tensor   // p, g, m, v: F32 and of one length; all but Grads are updated
	Segments                        []Segment // the ranges updated, each with its decay flag; nil: all, decaying
	LR, Beta1, Beta2, Eps           float32   // lr, β1, β2, eps of the update above (HF: 5e-5, 0.9, 0.999, 1e-8)
	WeightDecay                     float32   // wd, decoupled: p·(1 − lr·wd) on decaying segments
	Step                            int       // t, the 1-based step count after this step's increment
	// Skip, when set, is an I32 (1) flag on the device: when it is non-zero the step changes nothing (the
	// flag ClipByNorm sets for a non-finite gradient norm), decided on the device without the host waiting.
	Skip *Tensor
	// Table and Row, when set, take the step's lr and t from the device instead of LR and Step (which are then
	// not used): Table is F32 (K, 3), row k holding AdamWScalars(lr_k, Beta1, Beta2, WeightDecay, t_k) for the
	// k-th optimizer step the table was made for, and Row (I32 (1)) the index k of this step (clamped to
	// [0, K)), e.g. a counter of the steps not skipped (UpdateScaleArgs.Steps). So a skipped FP16 step
	// neither advances the bias correction nor the learning-rate schedule, and nobody waits to know.
	Table, Row *Tensor
	// GradNorm, when set, is an I64 (1) gradient norm on the device (GlobalNormTo's bits) by which AdamW clips
	// the gradients as it reads them, instead of a ClipByNorm pass that writes them back: where ClipByNorm
	// would scale (a finite norm, MaxGradNorm > 0, its coefficient below 1), each g is first multiplied by
	// ClipByNorm's FP32 coefficient, rounded once to FP32, so that the update is bit for bit
	// ClipByNorm([Grads], GradNorm, MaxGradNorm, nil) followed by AdamW without GradNorm; Grads itself is not
	// changed. A non-finite norm scales nothing (as ClipByNorm): whether the step is taken is Skip's
	// decision (ClipByNorm with no tensors sets its flag).
	GradNorm *Tensor
	// MaxGradNorm is ClipByNorm's maxNorm for GradNorm (torch.nn.utils.clip_grad_norm_'s max_norm), finite
	// and ≥ 0; 0 clips nothing. Not used without GradNorm.
	MaxGradNorm float32
}

// AdamWScalars returns the three per-step scalars of an AdamW update for learning rate lr and step t (1-based)
// as every backend computes them: in float64 from the float32 arguments (PyTorch's Python floats), each
// rounded to float32: 1 − lr·wd, lr/(1 − β1^t) and √(1 − β2^t). They are the rows of AdamWArgs.Table.
func AdamWScalars(lr, beta1, beta2, weightDecay float32, t int) [3]float32 {
	l := float64(lr)
	return [3]float32{
		float32(1 - l*float64(weightDecay)),
		float32(l / (1 - math.Pow(float64(beta1), float64(t)))),
		float32(math.Sqrt(1 - math.Pow(float64(beta2), float64(t)))),
	}
}

// UpdateScaleArgs describes UpdateScale, dynamic loss scaling's update after an optimizer step, all on the
// device (PyTorch's _amp_update_scale_, aten/src/ATen/native/cuda/AmpKernels.cu), with s = *Scale:
//
//	*FoundInf ≠ 0:  s = max(float32(float64(s)·BackoffFactor), MinScale); *GrowthTracker = 0
//	else if *GrowthTracker+1 == GrowthInterval:  s = float32(float64(s)·GrowthFactor) if that is finite;
//	                *GrowthTracker = 0
//	else:           *GrowthTracker += 1
//
// and, each when set: *Record = 1 or 0 as *FoundInf was set (the step's flag, for the host to read later);
// *Steps += 1 when *FoundInf was 0 (the optimizer steps taken: AdamWArgs.Row); *Skipped counts the
// consecutive steps with *FoundInf set (0 after a clean one). Then *FoundInf is reset to 0 for the next step
// — unless MaxSkipped > 0 and *Skipped has reached it: the flag then stays set, so that every later step is
// skipped too (tune's max_consecutive_skipped_steps stop, decided on the device).
type UpdateScaleArgs struct {
	Scale         *Tensor // F32 (1), updated in place
	GrowthTracker *Tensor // I32 (1), updated in place
	FoundInf      *Tensor // I32 (1), read and reset (NonFiniteCheckAndUnscaleOnDevice's found)
	Record        *Tensor // optional I32 (1), receives the step's found flag
	Steps         *Tensor // optional I32 (1), counts the steps whose FoundInf was 0
	Skipped       *Tensor // optional I32 (1), the consecutive steps whose FoundInf was set
	MaxSkipped    int     // with Skipped: the count at which FoundInf stays set (0: never)
	// GrowthFactor (> 1), BackoffFactor (in (0, 1)) and GrowthInterval (≥ 1) are GradScaler's options.
	GrowthFactor, BackoffFactor float64
	GrowthInterval              int
	MinScale                    float32 // the floor of a backoff (0: none, as PyTorch; amp.MinScale in tune)
}

// AttnOperand is one (B, H, T, D) operand of fused attention, read (or written) through strides so that the
// projections' (B, T, H·D) outputs are used in place: element (b, h, t, d) lives at
// Tensor.Offset + b·StrideB + h·StrideH + t·StrideT + d (d contiguous). All strides 0 means dense (B, H, T, D).
// Only the operand's own elements are read or written; other elements of T (the rest of a packed (B, T, 3C)
// projection buffer) are left untouched.
type AttnOperand struct {
	T                         *Tensor // the storage; its Numel must cover every element the operand addresses
	StrideB, StrideH, StrideT int     // element distances between batch members, heads and positions
}

// AttentionArgs describes fused attention over B batch members, Hq query heads and Hkv key/value heads of size
// D, Tq queries and Tk keys:
//
//	S  = Q·Kᵀ·Scale + Mask[b, j]      (and −Inf where Causal or Segments forbid the pair)
//	P  = softmax_j(S)                  (held in FP32), LSE = log Σ_j exp(S_ij) (natural log, FP32)
//	P' = dropout(P)                    (P·keep/(1 − DropoutP))
//	O  = P'·V
//
// Query head h reads key/value head h / (Hq/Hkv) (grouped-query attention; Hkv == Hq is multi-head
// attention). A row whose every key is forbidden gives O = 0 and LSE = −Inf (and zero gradients in the
// backward); a NaN score of an allowed pair gives a NaN row (O, LSE and its gradients NaN, as PyTorch's
// softmax; docs/ATTENTION.md). Q, K, V and O (and the backward's dO, dQ, dK, dV) share one dtype, F32, F16 or BF16.
//
// Dropout draws element (b, h, i, j) exactly as the Dropout op draws element n = ((b·Hq + h)·Tq + i)·Tk + j of
// a dense (B, Hq, Tq, Tk) tensor with the same (Seed, Offset) (PhiloxKeep), so the fused op and the two-pass
// path (Gemm → Softmax → Dropout → Gemm) keep the same elements on every backend, forward and backward; a
// caller drawing further masks from Seed advances Offset by PhiloxCounters(B·Hq·Tq·Tk).
//
// Numerics (docs/ATTENTION.md): S and the softmax are FP32; for half operands P' is rounded to the half dtype
// only as the input of the P'·V product (and of dV = P'ᵀ·dO in the backward), dS only as the input of the
// dQ and dK products; accumulation is FP32 and each output is rounded once on store. Results are
// bit-identical from run to run.
//
// A backend whose fast kernel does not cover a shape (a head size, a dtype) returns an error wrapping
// ErrUnsupported that names the shape and what is supported; the caller can then take the two-pass path.
type AttentionArgs struct {
	B, Hq, Hkv, Tq, Tk, D int         // Hq = G·Hkv (grouped-query attention; Hkv == Hq for MHA); D head size
	Q                     AttnOperand // (B, Hq, Tq, D)   F16, BF16 or F32 (all operands one dtype)
	K, V                  AttnOperand // (B, Hkv, Tk, D)
	O                     AttnOperand // (B, Hq, Tq, D)   written (=)
	LSE                   *Tensor     // (B, Hq, Tq) F32, dense; written (=): natural-log log-sum-exp of the row of S
	Scale                 float32     // softmax scale, usually 1/sqrt(D)
	Mask                  *Tensor     // optional additive key mask (B, Tk) F32 (0, -1e4, finfo.min or -Inf); nil none
	Causal                bool        // query i sees key j only when j <= i + (Tk - Tq)  (bottom-right aligned)
	Segments              *Tensor     // optional (B, T) I32 segment ids (needs Tq == Tk): i sees j only when equal
	DropoutP              float32     // dropout on the probabilities P, in [0, 1); 0 for none
	Seed, Offset          uint64      // Philox key and counter base for the dropout draw (see PhiloxKeep)
	// KeepBits is optional scratch for dropout: I32, AttentionKeepBitsLen(B, Hq, Tq, Tk) elements, that a
	// backend's forward may fill with the keep bits it draws so that its backward reads them instead of
	// drawing them again. Pass the forward's tensor, unchanged, with the same Seed and Offset to
	// AttentionBackward. Its contents are the backend's own; a backend that does not use it (tensor/cpu)
	// leaves it alone, and nil makes every pass draw its own bits.
	KeepBits *Tensor
}

// AttentionKeepBitsLen is the number of I32 elements of AttentionArgs.KeepBits: one bit per (query, key)
// pair of every query head, each query row padded to whole 64-key tiles.
func AttentionKeepBitsLen(b, hq, tq, tk int) int { return b * hq * tq * ((tk + 63) / 64) * 2 }

// AttentionBackwardArgs describes the backward of Attention: with dP' = dO·Vᵀ, dP = dP'·keep/(1 − DropoutP),
// Δ_i = Σ_j P_ij·dP_ij in FP32 (dO_i·O_i for an unrounded O; docs/ATTENTION.md says why it is not taken from a
// half O) and dS = P∘(dP − Δ), it writes dQ = Scale·dS·K, dK = Scale·dSᵀ·Q and dV = P'ᵀ·dO. dK and dV of a
// key/value head are summed over its Hq/Hkv query heads in a fixed order.
type AttentionBackwardArgs struct {
	AttentionArgs             // the forward's arguments; Q, K, V, O and LSE are read (O and LSE as written)
	DO            AttnOperand // (B, Hq, Tq, D)
	DQ            AttnOperand // (B, Hq, Tq, D)  written (=)
	DK, DV        AttnOperand // (B, Hkv, Tk, D) written (=), summed over the G query heads of each KV head
}

// IsMeta reports whether b allocates no memory and computes nothing (package tensor/meta, which only counts
// bytes): a model built on it skips work nobody can read the result of, such as drawing its initial weights.
func IsMeta(b Backend) bool {
	_, ok := b.(interface{ Meta() })
	return ok
}

// MetaTarget returns the backend a meta backend stands in for (tensor/meta's New), or nil when b is not a meta
// backend or stands in for none. A decision that depends on the backend (which shapes a fused kernel covers) is
// asked of the target.
func MetaTarget(b Backend) Backend {
	if t, ok := b.(interface{ Target() Backend }); ok && IsMeta(b) {
		return t.Target()
	}
	return nil
}

// HostWaitCounter is implemented by a backend whose ops run asynchronously (cuda.Backend): HostWaits returns how
// many times, since the backend was opened, an op made the host wait for the device, by op name. A training
// step that keeps its scalars on the device adds nothing between its logging steps.
type HostWaitCounter interface {
	// HostWaits returns the waits so far by op name ("Download", "GlobalNorm", ...).
	HostWaits() map[string]int64
}
