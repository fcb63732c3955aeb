package llama

import (
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// checkpointing is the gradient-checkpointing state of a model.
type checkpointing struct {
	on   bool
	offs []uint64 // the Philox offset each layer's forward started at (LoRA's lora_dropout draws from it)
}

// SetGradientCheckpointing turns gradient checkpointing on or off, as transformers'
// model.gradient_checkpointing_enable() / _disable(): the decoder layers' internal activations share one
// region of the step arena (transformer.Arena.Overlay) and Backward recomputes each layer but the last from
// its kept residual-stream input, with the Philox offset its forward started at, just before its backward.
// Loss and gradients are bit for bit those without it. The arena is re-carved at the next Forward; a pending
// Backward is cancelled.
func (m *ForCausalLM) SetGradientCheckpointing(on bool) {
	if on != m.ckpt.on {
		m.ckpt.on = on
		m.reset()
	}
}

// GradientCheckpointing reports whether gradient checkpointing is on.
func (m *ForCausalLM) GradientCheckpointing() bool { return m.ckpt.on }

// layoutLayers takes the layers' buffers: each its own, or, with gradient checkpointing, one region they all
// share (the residual streams the layers read are kept in m.act.hs either way).
func (m *ForCausalLM) layoutLayers(a *transformer.Arena, b, t int, dt tensor.DType) {
	if !m.ckpt.on {
		for _, l := range m.Layers {
			l.layout(a, b, t, &m.Config, dt)
		}
		return
	}
	a.Overlay(len(m.Layers), func(i int) { m.Layers[i].layout(a, b, t, &m.Config, dt) })
}

// recompute runs layer i's forward again before its backward under gradient checkpointing (the last layer's
// activations are still in the shared region): same input, same Philox offset, nothing observed.
func (m *ForCausalLM) recompute(p *transformer.Pass, in *passInputs, i int) error {
	if !m.ckpt.on || i == len(m.Layers)-1 {
		return nil
	}
	q := *p
	q.Offset, q.Observe = m.ckpt.offs[i], nil
	return m.Layers[i].Forward(&q, &m.sc, in, m.act.hs[i+1], m.act.hs[i])
}

// PlanArena returns the buffers of the step arena for a (b, t) batch under the current policy and
// gradient-checkpointing setting, and the bytes Reserve(b, t) would allocate for them, without allocating
// anything (transformer.Arena.Measure). The pass buffers are laid out anew at the next Forward; a pending
// Backward is cancelled.
func (m *ForCausalLM) PlanArena(b, t int) ([]transformer.ArenaBuffer, int64, error) {
	m.reset()
	return m.Arena().Measure(func(a *transformer.Arena) error {
		return m.layout(a, carveKey{b, t, m.Policy().GemmDType()})
	})
}
