package gpt2

import (
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// checkpointing is the gradient-checkpointing state of a model.
type checkpointing struct {
	on   bool
	offs []uint64 // the Philox offset each block's forward started at
}

// SetGradientCheckpointing turns gradient checkpointing on or off, as transformers'
// model.gradient_checkpointing_enable() / _disable(): each block keeps only its output (the next block's
// input), the blocks' internal activations share one region of the step arena (transformer.Arena.Overlay), and
// Backward recomputes each block but the last from its input with the Philox offset its forward started at
// (the same attention and residual dropout masks) just before its backward. Loss and gradients are bit for bit
// those without it. The arena is re-carved at the next Forward; a pending Backward is cancelled.
func (m *GPT2LMHeadModel) SetGradientCheckpointing(on bool) {
	if on != m.ckpt.on {
		m.ckpt.on = on
		m.reset()
	}
}

// GradientCheckpointing reports whether gradient checkpointing is on.
func (m *GPT2LMHeadModel) GradientCheckpointing() bool { return m.ckpt.on }

// layoutBlocks takes the blocks' buffers: each its own, or, with gradient checkpointing, the kept outputs
// and then one region the blocks share.
func (m *GPT2LMHeadModel) layoutBlocks(a *transformer.Arena, impl string, b, t int, dt tensor.DType) {
	if !m.ckpt.on {
		for _, k := range m.Blocks {
			k.layout(a, nil, impl, b, t, dt)
		}
		return
	}
	outs := make([]*tensor.Tensor, len(m.Blocks))
	for i := range outs {
		outs[i] = a.Take(tensor.F32, b*t, m.Config.NEmbd)
	}
	a.Overlay(len(m.Blocks), func(i int) { m.Blocks[i].layout(a, outs[i], impl, b, t, dt) })
}

// recompute runs block i's forward again before its backward under gradient checkpointing (the last block's
// activations are still in the shared region): same input, same Philox offset, nothing observed.
func (m *GPT2LMHeadModel) recompute(p *transformer.Pass, i int) error {
	if !m.ckpt.on || i == len(m.Blocks)-1 {
		return nil
	}
	q := *p
	q.Offset, q.Observe = m.ckpt.offs[i], nil
	k := m.Blocks[i]
	_, err := k.Forward(&q, &m.sc, k.c.x)
	return err
}
