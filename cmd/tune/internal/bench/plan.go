package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tune-ml/tune/internal/syncfree"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/meta"
	"github.com/tune-ml/tune/transformer"
)

// MemoryPlan is what a training step of a Spec keeps allocated, by category, in bytes: the memory a step needs
// before any scratch, counted by building the model and its optimizer on a meta backend and laying out its step
// arena, without running a step or allocating any of it.
type MemoryPlan struct {
	// Parameters holds the weights: FP32 masters (4 bytes per parameter), except that under FP16/BF16 the
	// frozen projection weights are stored once in the autocast dtype (2 bytes; ModelCore.StoreFrozenIn).
	Parameters int64 `json:"parameters"`
	// Gradients holds the FP32 gradients of the trainable parameters (4 bytes each).
	Gradients int64 `json:"gradients"`
	// Optimizer holds AdamW's exp_avg and exp_avg_sq (8 bytes per trainable parameter) and the step's device
	// scalars (the gradient norm and the skip flag, 12 bytes unless TUNE_SYNC_FREE=0).
	Optimizer int64 `json:"optimizer"`
	// Activations is the step arena carved for B×T: every activation backward reads and the pass scratch.
	Activations int64 `json:"activations"`
	// Quadratic is the part of Activations held in buffers of rank ≥ 3 whose last two axes are T×T
	// (attention scores and probabilities of the eager path); 0 on the default sdpa path. When the head
	// size equals T the eager path's (B, H, T, D) heads are counted too.
	Quadratic int64 `json:"quadratic"`
	// DropoutBits is the part of Activations held in the fused attention's dropout keep bits
	// (tensor.AttentionArgs.KeepBits, (B, H, T, ⌈T/64⌉·2) I32 per layer with attention dropout): one bit per
	// score, T²/8 bytes per head and sequence — growing with T² like Quadratic, at 1/32 of an F32 score.
	DropoutBits int64 `json:"dropout_bits"`
	// Attention is the attention implementation the plan is for ("sdpa" or "eager"; see
	// transformer.AttnChoice), and Largest the arena's largest buffers, biggest first.
	Attention string               `json:"attention"`
	Largest   []ArenaBufferSummary `json:"largest"`
	// WeightCache is the autocast copies of the FP32 weights (2 bytes per parameter under FP16/BF16, 0 in
	// FP32): one copy of the span of the trainable projections' parameters (LoRA's adapters included; the
	// norms between them too), plus the frozen FP32 projection weights and biases and the LM head's weight;
	// frozen ones stored in half need none. They are allocated by the first Forward, so this is computed,
	// not measured.
	WeightCache int64 `json:"weight_cache"`
}

// ArenaBufferSummary is one kind of buffer of the step arena: dtype, shape, how many buffers of that dtype and
// shape the arena holds (one per layer, typically) and their bytes together.
type ArenaBufferSummary struct {
	DType string `json:"dtype"` // "F32", "BF16", ...
	Shape []int  `json:"shape"` // the buffer's shape
	Count int    `json:"count"` // buffers of this dtype and shape
	Bytes int64  `json:"bytes"` // their size together
}

// largest groups bufs by dtype and shape and returns the n groups of the most bytes, biggest first.
func largest(bufs []transformer.ArenaBuffer, n int) []ArenaBufferSummary {
	idx := map[string]int{}
	var out []ArenaBufferSummary
	for _, bf := range bufs {
		key := fmt.Sprint(bf.DType, bf.Shape)
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, ArenaBufferSummary{DType: bf.DType.String(), Shape: bf.Shape})
		}
		out[i].Count++
		out[i].Bytes += bf.Bytes()
	}
	slices.SortStableFunc(out, func(x, y ArenaBufferSummary) int { return cmp.Compare(y.Bytes, x.Bytes) })
	return out[:min(len(out), n)]
}

// Total returns the sum of the categories.
func (p MemoryPlan) Total() int64 {
	return p.Parameters + p.Gradients + p.Optimizer + p.Activations + p.WeightCache
}

// Plan builds the model of s (adapted by LoRA when set) and its AdamW on a meta backend standing in for b
// (tensor/meta: tensors without storage, no weights drawn), counts their bytes, computes the step arena for
// s.Batch × s.Seq from its layout (bert.BertForSequenceClassification.PlanArena, llama.ForCausalLM.PlanArena)
// and returns the plan. Nothing sized by the model or the batch is allocated, on b or on the host, so the plan
// of a model far larger than the machine prints at once; only the fused-attention probe (one head of length
// s.Seq) runs on b, to choose the attention implementation as a run on b would.
func Plan(b tensor.Backend, s Spec) (plan MemoryPlan, err error) {
	if err := s.Validate(); err != nil {
		return plan, err
	}
	if err := checkPlanHost(&s, hostAvailable()); err != nil {
		return plan, err
	}
	mb := meta.New(b)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: internal error: %v", r)
		}
	}()
	base, m, err := buildModel(mb, &s)
	if err != nil {
		return plan, err
	}
	model := mb.Bytes()
	params, grads, _ := m.Trainable()
	if params == nil || grads == nil {
		return plan, fmt.Errorf("bench: the model has no trainable parameters")
	}
	plan.Gradients = int64(grads.Bytes())
	plan.Parameters = model - plan.Gradients
	if _, err := newAdamW(m, &s); err != nil {
		return plan, err
	}
	if _, _, err := stepScalars(mb, !syncfree.Enabled()); err != nil {
		return plan, err
	}
	plan.Optimizer = mb.Bytes() - model
	bufs, arena, err := base.PlanArena(s.Batch, s.Seq)
	if err != nil {
		return plan, fmt.Errorf("bench: planning activations for %d×%d: %w", s.Batch, s.Seq, err)
	}
	plan.Activations, plan.Attention = arena, "sdpa" // the causal LMs always run the fused op
	if a, ok := base.(interface {
		AttnImplementation() string
		AttnFallback() string
	}); ok {
		plan.Attention = a.AttnImplementation()
		if a.AttnFallback() != "" {
			plan.Attention = "eager"
		}
	}
	bufs = slices.DeleteFunc(bufs, func(b transformer.ArenaBuffer) bool { return b.Shared }) // laid over others: no bytes of their own
	for _, bf := range bufs {
		n := len(bf.Shape)
		switch {
		case n >= 3 && bf.Shape[n-1] == s.Seq && bf.Shape[n-2] == s.Seq && s.Seq > 1:
			plan.Quadratic += bf.Bytes()
		case n == 4 && bf.DType == tensor.I32 && bf.Shape[2] == s.Seq && bf.Shape[3] == tensor.AttentionKeepBitsLen(1, 1, 1, s.Seq):
			plan.DropoutBits += bf.Bytes()
		}
	}
	plan.Largest = largest(bufs, 12)
	if s.Policy.Enabled {
		// The trainable projections' parameters are cast as one copy of their span in the flat buffer
		// (amp.WeightCache.SetFlat); frozen FP32 projection weights (not stored in half) and the LM head's
		// weight get copies of their own.
		half := int64(s.Policy.DType.Size())
		if sp, ok := base.(interface{ WeightCastSpan() int }); ok {
			plan.WeightCache = half * int64(sp.WeightCastSpan())
		}
		projs, err := Projections(m, 1, 1)
		if err != nil {
			return plan, err
		}
		stored := m.FrozenDType() != tensor.F32
		for _, p := range projs {
			if !stored && !p.TrainWeight {
				n := p.In * p.Out
				if p.Bias {
					n += p.Out
				}
				plan.WeightCache += half * int64(n)
			}
		}
		if s.Decoder != nil { // the LM head's weight (the embedding table when tied) is cast too
			plan.WeightCache += half * int64(s.Decoder.VocabSize*s.Decoder.HiddenSize)
		}
	}
	return plan, nil
}

// planHostPerLayer bounds the host memory a plan takes per layer: the model's module structure, its
// parameter list and the arena layout's records (about 9 KiB a layer measured for a 100,000-layer Llama).
const planHostPerLayer = 16 << 10

// checkPlanHost refuses a plan whose module structure alone would not fit in avail bytes of host memory (0:
// unknown, no check): the plan allocates no tensor, but it still builds every layer.
func checkPlanHost(s *Spec, avail int64) error {
	layers := s.Config.NumHiddenLayers
	if s.Decoder != nil {
		layers = s.Decoder.NumHiddenLayers
	}
	if need := int64(layers) * planHostPerLayer; avail > 0 && need > avail/2 {
		return fmt.Errorf("bench: --model %s: num_hidden_layers %d would take about %.1f GiB of host memory to plan (%.1f GiB available)",
			s.Model, layers, float64(need)/gib, float64(avail)/gib)
	}
	return nil
}

// WritePlan writes one line per plan, in GiB: the label (the precision), each category and the total.
func WritePlan(w io.Writer, labels []string, plans []MemoryPlan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tattention\tweights\tgradients\tAdamW state\tactivations\tof which T×T\tdropout bits\tweight cache\ttotal GiB\t")
	g := func(n int64) string { return fmt.Sprintf("%.3f", float64(n)/gib) }
	for i, p := range plans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", labels[i], p.Attention, g(p.Parameters), g(p.Gradients),
			g(p.Optimizer), g(p.Activations), g(p.Quadratic), g(p.DropoutBits), g(p.WeightCache), g(p.Total()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, p := range plans {
		if len(p.Largest) == 0 {
			continue
		}
		parts := make([]string, len(p.Largest))
		for j, b := range p.Largest {
			parts[j] = fmt.Sprintf("%s%v %.3f", b.DType, b.Shape, float64(b.Bytes)/gib)
			if b.Count > 1 {
				parts[j] = fmt.Sprintf("%d×%s%v %.3f", b.Count, b.DType, b.Shape, float64(b.Bytes)/gib)
			}
		}
		if _, err := fmt.Fprintf(w, "%s largest activation buffers (count×dtype[shape] GiB together): %s\n", labels[i], strings.Join(parts, ", ")); err != nil {
			return err
		}
	}
	return nil
}
