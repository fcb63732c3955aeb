package transformer

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// CausalLMHead is a causal language model's head and loss: transformers' lm_head (logits = h·Wᵀ, no bias)
// followed by ForCausalLMLoss (loss_utils.py): the logits of position t predict the label of position t + 1
// (labels shifted left, the last position of each row predicting nothing), cross-entropy in FP32 with
// ignore_index −100, summed and divided by the number of supervised targets.
//
// The (N, V) logits are never held at once: Forward and Backward walk the rows in chunks of ChunkRows, and
// Backward recomputes each chunk's logits from the kept input instead of storing them, so the head costs two
// (ChunkRows, V) buffers in the GEMM dtype whatever N and V are (V is 32k–152k for current decoders). A chunk
// without a supervised target (a prompt masked with −100 in supervised fine-tuning) costs no GEMM unless its
// logits are asked for. Under
// autocast the logits are the GEMM dtype (h) and the cross-entropy reads them in FP32, as PyTorch's
// logits.float() does.
//
// Weight is lm_head.weight, or the input embedding table itself when tie_word_embeddings is set: then both
// uses accumulate into the one FP32 gradient, as autograd does for a shared nn.Parameter.
type CausalLMHead struct {
	Weight *Param // (V, C) FP32 master weight (the embedding table's Param when tied)
	V, C   int    // vocabulary and hidden size

	// ChunkElems bounds the logits computed at once (rows × V); 0 means 2^27 (lmHeadChunkElems). Tests lower
	// it to exercise the chunking.
	ChunkElems int
	c          lmHeadCache
}

// lmHeadCache holds one pass's buffers (views of the step arena); N = B·T, R = rows per chunk.
type lmHeadCache struct {
	logits  *tensor.Tensor // (R, V) h one chunk of logits
	dlogits *tensor.Tensor // (R, V) h its gradient
	losses  *tensor.Tensor // (N) F32 per-position losses (0 where the target is ignored)
	targets *tensor.Tensor // (N) I64 shifted labels: labels[b, t+1], −100 at t = T−1
	pred    *tensor.Tensor // (N) I32 arg-max of each row's logits (rows of supervised chunks)
	rows, n int            // R and N
	in      *tensor.Tensor // (N, C) h the last Forward's input, kept for Backward
	count   int            // supervised targets of the last Forward
	correct int            // of those, the ones the arg-max logit predicts
	host    []int64        // the last Forward's targets (nil without labels), to skip unsupervised chunks
	// fused is set by ForwardFused: dIn already holds the gradient computed with fusedScale, and Backward
	// has nothing left to do.
	fused      bool
	fusedDIn   *tensor.Tensor
	fusedScale float32
}

// lmHeadChunkElems bounds a chunk of logits: 2^27 elements, 256 MiB per buffer in a half dtype (the chunk's
// logits and their gradient: 512 MiB, against the 3–10 GB of FP32 logits transformers holds for 16k tokens).
// Big chunks keep the head's GEMMs big: a chunk of a 152k-word vocabulary has 768 rows, and the
// input-gradient product (rows × C, summed over V) and the weight-gradient product (which reads and writes
// the whole FP32 (V, C) gradient once per chunk) run a few dozen times per step, not hundreds (2^24 gave 110
// rows and 149 chunks for 16,384 tokens of Qwen2.5).
const lmHeadChunkElems = 1 << 27

// ChunkRows returns the rows per chunk for n rows: all of them when they fit ChunkElems, else as many as do,
// rounded down to a multiple of 128 (whole GEMM tiles) when that leaves at least 256.
func (l *CausalLMHead) ChunkRows(n int) int {
	elems := l.ChunkElems
	if elems == 0 {
		elems = lmHeadChunkElems
	}
	r := max(1, min(n, elems/max(1, l.V)))
	if r < n && r >= 256 {
		r = r / 128 * 128
	}
	return r
}

// Layout takes the head's pass buffers for n = B·T rows in GEMM dtype dt.
func (l *CausalLMHead) Layout(a *Arena, n int, dt tensor.DType) {
	r := l.ChunkRows(n)
	l.c = lmHeadCache{
		logits: a.Take(dt, r, l.V), dlogits: a.Take(dt, r, l.V),
		losses: a.Take(tensor.F32, n), targets: a.Take(tensor.I64, n), pred: a.Take(tensor.I32, n), rows: r, n: n,
	}
}

// SupervisedTargets returns how many next-token targets (B, T) labels with rows of t give: labels[b, i] ≠ −100
// for i ≥ 1 (a row's first label is the target of no prediction), the count ShiftLabels returns, without
// building the targets (Model.Supervised).
func SupervisedTargets(labels []int64, t int) int {
	n := 0
	for i, l := range labels {
		if t > 0 && i%t != 0 && l != -100 {
			n++
		}
	}
	return n
}

// ShiftLabels returns the targets of a (B, T) batch's labels: target[b, t] = labels[b, t+1] and −100 at the
// last position of each row (transformers pads the shifted labels with ignore_index), and how many are not
// −100 (the loss's denominator; Model.Supervised).
func ShiftLabels(labels []int64, b, t int) (targets []int64, count int) {
	targets = make([]int64, b*t)
	for r := 0; r < b; r++ {
		for i := 0; i < t; i++ {
			v := int64(-100)
			if i+1 < t {
				v = labels[r*t+i+1]
			}
			targets[r*t+i] = v
			if v != -100 {
				count++
			}
		}
	}
	return targets, count
}

// Forward computes the logits of in (N, C) h chunk by chunk. With targets (N, already shifted: ShiftLabels)
// it returns the loss summed over the supervised targets (float64, summed on the host from the FP32
// per-position losses) and their count, and counts the supervised targets the arg-max logit predicts (Correct:
// TRL's mean_token_accuracy, from one ArgMax per chunk and one download of the (N) predictions); with host
// (N·V) non-nil it copies the logits there in FP32 (the GEMM dtype's values widened). in stays in use until
// Backward. Every target must be −100 or in [0, V).
func (l *CausalLMHead) Forward(p *Pass, in *tensor.Tensor, targets []int64, host []float32) (sum float64, count int, err error) {
	return l.forward(p, in, targets, host, nil, 0)
}

// Run is a causal LM's Forward from its final hidden states in (N = B·T, C) h: the next-token targets of the
// (B, T) labels (ShiftLabels; nil labels: no loss), the logits copied into out.Logits when opts.HostLogits,
// and with opts.Train and opts.BackwardSeed the head's backward into dIn while each chunk's logits are at hand
// (ForwardFused). It sets out.NumLabels (V), out.Logits, out.Loss (the mean over the supervised targets; NaN
// without any), out.Targets and out.Correct, and returns the number of supervised targets. With neither labels
// nor host logits the head does not run.
func (l *CausalLMHead) Run(p *Pass, in, dIn *tensor.Tensor, labels []int64, b, t int, opts ForwardOptions, out *Output) (count int, err error) {
	var targets []int64
	if labels != nil {
		targets, _ = ShiftLabels(labels, b, t)
	}
	out.NumLabels = l.V
	if opts.HostLogits {
		out.Logits = make([]float32, b*t*l.V)
	}
	out.Loss = float32(math.NaN())
	if targets == nil && out.Logits == nil {
		return 0, nil // nothing asks for the head
	}
	var sum float64
	if opts.Train && opts.BackwardSeed != 0 && targets != nil && out.Logits == nil {
		sum, count, err = l.ForwardFused(p, in, targets, dIn, opts.BackwardSeed)
	} else {
		sum, count, err = l.Forward(p, in, targets, out.Logits)
	}
	if err != nil || targets == nil {
		return count, err
	}
	if count > 0 {
		out.Loss = float32(sum / float64(count))
	}
	out.Targets, out.Correct = count, l.Correct()
	return count, nil
}

// ForwardFused is Forward with targets that also back-propagates each chunk while its logits are at hand
// (ForwardOptions.BackwardSeed): the gradient of the loss sum times seed/count (count: the supervised
// targets; seed: the d(objective)/d(mean loss) the caller's Backward will get) is written into dIn (N, C) and,
// when the weight trains, accumulated into its gradient — what Backward(dIn, seed/count) computes, in the
// same order, without recomputing the logits. The following Backward must get the same dIn and scale; it
// then does nothing.
func (l *CausalLMHead) ForwardFused(p *Pass, in *tensor.Tensor, targets []int64, dIn *tensor.Tensor, seed float32) (sum float64, count int, err error) {
	if targets == nil || dIn == nil {
		return 0, 0, fmt.Errorf("transformer: lm head: a fused forward needs targets and a gradient buffer")
	}
	scale := float32(0)
	if k := supervised(targets); k > 0 {
		scale = seed / float32(k)
	}
	return l.forward(p, in, targets, nil, dIn, scale)
}

// forward is Forward, and ForwardFused when dIn is set.
func (l *CausalLMHead) forward(p *Pass, in *tensor.Tensor, targets []int64, host []float32, dIn *tensor.Tensor, scale float32) (sum float64, count int, err error) {
	bk, c := p.Backend, &l.c
	c.fused = false
	n := in.Numel() / l.C
	if n != c.n {
		return 0, 0, fmt.Errorf("transformer: lm head: %d rows, laid out for %d", n, c.n)
	}
	c.in, c.count, c.correct, c.host = in, 0, 0, targets
	if targets != nil {
		if len(targets) != n {
			return 0, 0, fmt.Errorf("transformer: lm head: %d targets for %d rows", len(targets), n)
		}
		if err := bk.Upload(c.targets, targets); err != nil {
			return 0, 0, err
		}
	}
	w, err := p.Weight(l.Weight.Value) // (V, C) h
	if err != nil {
		return 0, 0, err
	}
	for r0 := 0; r0 < n; r0 += c.rows {
		m := min(c.rows, n-r0)
		if host == nil && targets != nil && supervised(targets[r0:r0+m]) == 0 {
			ls, _ := c.losses.View(r0, m) // a prompt-only chunk (SFT masks prompts): no logits needed
			if err := bk.Fill(ls, 0); err != nil {
				return 0, 0, err
			}
			if dIn != nil {
				if err := l.chunkBackward(p, w, dIn, nil, r0, m, 0); err != nil {
					return 0, 0, err
				}
			}
			continue
		}
		lg, err := l.chunkLogits(p, w, r0, m)
		if err != nil {
			return 0, 0, err
		}
		if host != nil {
			if err := bk.Download(host[r0*l.V:(r0+m)*l.V], lg); err != nil {
				return 0, 0, fmt.Errorf("transformer: reading logits: %w", err)
			}
		}
		if targets != nil {
			ls, _ := c.losses.View(r0, m)
			tg, _ := c.targets.View(r0, m)
			pr, _ := c.pred.View(r0, m)
			if dIn != nil && scale != 0 {
				// loss, arg-max and dlogits from two reads of the chunk's logits (CrossEntropyWithGrad)
				dl, _ := c.dlogits.View(0, m, l.V)
				k, err := bk.CrossEntropyWithGrad(ls, pr, dl, lg, tg, scale, -100, p.LossScale)
				if err != nil {
					return 0, 0, err
				}
				c.count += k
				if err := l.chunkGrads(p, w, dIn, dl, r0, m); err != nil {
					return 0, 0, err
				}
				continue
			}
			k, err := bk.CrossEntropy(ls, lg, tg, -100)
			if err != nil {
				return 0, 0, err
			}
			c.count += k
			if err := bk.ArgMax(pr, lg); err != nil {
				return 0, 0, err
			}
			if dIn != nil {
				if err := l.chunkBackward(p, w, dIn, lg, r0, m, scale); err != nil {
					return 0, 0, err
				}
			}
		}
	}
	if dIn != nil {
		c.fused, c.fusedDIn, c.fusedScale = true, dIn, scale
	}
	if targets == nil {
		return math.NaN(), 0, nil
	}
	losses, pred := make([]float32, n), make([]int32, n)
	if err := bk.Download(losses, c.losses); err != nil {
		return 0, 0, err
	}
	if err := bk.Download(pred, c.pred); err != nil {
		return 0, 0, err
	}
	for i, v := range losses {
		sum += float64(v)
		if targets[i] != -100 && int64(pred[i]) == targets[i] { // rows of skipped chunks have no target
			c.correct++
		}
	}
	return sum, c.count, nil
}

// Correct returns how many supervised targets of the last Forward the arg-max logit predicts (the first
// maximum, as torch.argmax): TRL's mean_token_accuracy is Correct/Count per batch.
func (l *CausalLMHead) Correct() int { return l.c.correct }

// Logits computes the logits of in (M, C) h, any M up to the rows laid out, chunk by chunk into host (M·V)
// FP32 (the GEMM dtype's values widened), with no loss: an incremental decoder's last-token logits. It
// leaves nothing for Backward.
func (l *CausalLMHead) Logits(p *Pass, in *tensor.Tensor, host []float32) error {
	c := &l.c
	n := in.Numel() / l.C
	if n > c.n || n*l.C != in.Numel() || len(host) != n*l.V {
		return fmt.Errorf("transformer: lm head logits: %v input, %d host values, laid out for %d rows of %d", in.Shape, len(host), c.n, l.C)
	}
	w, err := p.Weight(l.Weight.Value) // (V, C) h
	if err != nil {
		return err
	}
	c.in, c.count, c.correct, c.host = in, 0, 0, nil
	for r0 := 0; r0 < n; r0 += c.rows {
		m := min(c.rows, n-r0)
		lg, err := l.chunkLogits(p, w, r0, m)
		if err != nil {
			return err
		}
		if err := p.Backend.Download(host[r0*l.V:(r0+m)*l.V], lg); err != nil {
			return fmt.Errorf("transformer: reading logits: %w", err)
		}
	}
	return nil
}

// chunkLogits computes rows [r0, r0+m) of the logits into the chunk buffer and returns that view.
func (l *CausalLMHead) chunkLogits(p *Pass, w *tensor.Tensor, r0, m int) (*tensor.Tensor, error) {
	c := &l.c
	hv, err := c.in.View(r0*l.C, m, l.C)
	if err != nil {
		return nil, err
	}
	lg, _ := c.logits.View(0, m, l.V)
	return lg, p.Backend.Gemm(tensor.GemmArgs{TransB: true, M: m, N: l.V, K: l.C, A: hv, B: w, C: lg, Alpha: 1, Batch: 1})
}

// Backward back-propagates the last Forward's loss with d(objective)/d(loss sum) = scale (seed/count for a
// mean loss seeded with seed): per chunk it recomputes the logits, forms dlogits = scale·(softmax − onehot)
// in the GEMM dtype, writes dIn (N, C) = dlogits·W (F32 or h; =) and accumulates dW += dlogitsᵀ·in when the
// weight is trainable. After ForwardFused it only checks that dIn and scale are the ones that computed it.
func (l *CausalLMHead) Backward(p *Pass, dIn *tensor.Tensor, scale float32) error {
	c := &l.c
	if c.fused {
		c.fused = false
		if dIn != c.fusedDIn || scale != c.fusedScale {
			return fmt.Errorf("transformer: lm head: Backward with scale %g after a fused Forward computed the gradient "+
				"with %g (ForwardOptions.BackwardSeed must be the seed Backward gets)", scale, c.fusedScale)
		}
		return nil
	}
	w, err := p.Weight(l.Weight.Value)
	if err != nil {
		return err
	}
	for r0 := 0; r0 < c.n; r0 += c.rows {
		m := min(c.rows, c.n-r0)
		if scale == 0 || c.host == nil || supervised(c.host[r0:r0+m]) == 0 {
			if err := l.chunkBackward(p, w, dIn, nil, r0, m, 0); err != nil {
				return err
			}
			continue
		}
		lg, err := l.chunkLogits(p, w, r0, m)
		if err != nil {
			return err
		}
		if err := l.chunkBackward(p, w, dIn, lg, r0, m, scale); err != nil {
			return err
		}
	}
	return nil
}

// chunkBackward back-propagates rows [r0, r0+m) from their logits lg: dlogits = scale·(softmax − onehot),
// dIn's rows = dlogits·W, dW += dlogitsᵀ·in. Without logits (no target in the chunk, or scale 0) dIn's rows
// are zeroed and nothing else runs.
func (l *CausalLMHead) chunkBackward(p *Pass, w, dIn, lg *tensor.Tensor, r0, m int, scale float32) error {
	bk, c := p.Backend, &l.c
	dh, err := dIn.View(r0*l.C, m, l.C)
	if err != nil {
		return err
	}
	if lg == nil || scale == 0 {
		return bk.Fill(dh, 0) // no target in the chunk: no gradient, no GEMM
	}
	dl, _ := c.dlogits.View(0, m, l.V)
	tg, _ := c.targets.View(r0, m)
	if err := bk.CrossEntropyBackward(dl, lg, tg, scale, -100, p.LossScale); err != nil {
		return err
	}
	return l.chunkGrads(p, w, dIn, dl, r0, m)
}

// chunkGrads back-propagates rows [r0, r0+m) from their dlogits dl (m, V): dIn's rows = dl·W, dW += dlᵀ·in.
func (l *CausalLMHead) chunkGrads(p *Pass, w, dIn, dl *tensor.Tensor, r0, m int) error {
	bk, c := p.Backend, &l.c
	dh, err := dIn.View(r0*l.C, m, l.C)
	if err != nil {
		return err
	}
	if err := bk.Gemm(tensor.GemmArgs{M: m, N: l.C, K: l.V, A: dl, B: w, C: dh, Alpha: 1, Batch: 1}); err != nil {
		return err
	}
	if g := l.Weight.Grad; g != nil {
		hv, _ := c.in.View(r0*l.C, m, l.C)
		return bk.Gemm(tensor.GemmArgs{TransA: true, M: l.V, N: l.C, K: m, A: dl, B: hv, C: g, Alpha: 1, Beta: 1, Batch: 1})
	}
	return nil
}

// supervised counts the targets that are not −100.
func supervised(targets []int64) int {
	n := 0
	for _, t := range targets {
		if t != -100 {
			n++
		}
	}
	return n
}

// Count returns the supervised targets of the last Forward.
func (l *CausalLMHead) Count() int { return l.c.count }
