package bench

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tune-ml/tune/tensor"
)

// MemoryPlan is what a training step of a Spec keeps allocated, by category, in bytes: the memory a step needs
// before any scratch, measured by building the model, its optimizer and its step arena without running a step.
type MemoryPlan struct {
	// Parameters holds the FP32 master weights, frozen ones included (4 bytes per parameter).
	Parameters int64 `json:"parameters"`
	// Gradients holds the FP32 gradients of the trainable parameters (4 bytes each).
	Gradients int64 `json:"gradients"`
	// Optimizer holds AdamW's exp_avg and exp_avg_sq (8 bytes per trainable parameter).
	Optimizer int64 `json:"optimizer"`
	// Activations is the step arena carved for B×T: every activation backward reads and the pass scratch.
	Activations int64 `json:"activations"`
	// WeightCache is the autocast copies of the projection weights and biases (2 bytes per parameter under
	// FP16/BF16, 0 in FP32). They are allocated by the first Forward, so this is computed, not measured.
	WeightCache int64 `json:"weight_cache"`
}

// Total returns the sum of the categories.
func (p MemoryPlan) Total() int64 {
	return p.Parameters + p.Gradients + p.Optimizer + p.Activations + p.WeightCache
}

// Plan builds the model of s on b (adapted by LoRA when set), its AdamW and its step arena for s.Batch × s.Seq,
// measures each part's bytes through a Meter, frees everything and returns the plan. It runs no step, so it is
// cheap on any backend, but the arena is really allocated: on the CPU a BERT-base arena of 64×512 needs tens of
// GiB (the arena grows linearly with the batch, so measure batch 1 and scale).
func Plan(b tensor.Backend, s Spec) (plan MemoryPlan, err error) {
	if err := s.Validate(); err != nil {
		return plan, err
	}
	meter := NewMeter(b)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: internal error: %v", r)
		}
		meter.freeAll()
	}()
	base, m, err := buildModel(meter, &s)
	if err != nil {
		return plan, err
	}
	model := meter.Bytes()
	params, grads, _ := m.Trainable()
	if params == nil || grads == nil {
		return plan, fmt.Errorf("bench: the model has no trainable parameters")
	}
	plan.Gradients = int64(grads.Bytes())
	plan.Parameters = model - plan.Gradients
	if _, err := newAdamW(m, &s); err != nil {
		return plan, err
	}
	plan.Optimizer = meter.Bytes() - model
	before := meter.Bytes()
	if err := reserve(base, &s); err != nil {
		return plan, err
	}
	plan.Activations = meter.Bytes() - before
	if s.Policy.Enabled {
		projs, err := Projections(m, 1, 1)
		if err != nil {
			return plan, err
		}
		half := int64(s.Policy.DType.Size())
		for _, p := range projs {
			plan.WeightCache += half * int64(p.In*p.Out+p.Out+p.LoRARank*(p.In+p.Out))
		}
	}
	return plan, nil
}

// WritePlan writes one line per plan, in GiB: the label (the precision), each category and the total.
func WritePlan(w io.Writer, labels []string, plans []MemoryPlan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tweights\tgradients\tAdamW state\tactivations\tweight cache\ttotal GiB\t")
	g := func(n int64) string { return fmt.Sprintf("%.3f", float64(n)/gib) }
	for i, p := range plans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", labels[i], g(p.Parameters), g(p.Gradients), g(p.Optimizer),
			g(p.Activations), g(p.WeightCache), g(p.Total()))
	}
	return tw.Flush()
}
