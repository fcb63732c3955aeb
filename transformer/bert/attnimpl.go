package bert

import (
	"log/slog"

	"github.com/tune-ml/tune/transformer"
)

// SetAttnImplementation chooses how the model computes attention, as transformers' attn_implementation:
// transformer.AttnSDPA ("sdpa", also ""), the fused op and the default, or transformer.AttnEager ("eager"), the
// two-pass reference. Under sdpa a shape the backend's fused kernel refuses (tensor.ErrUnsupported) runs eager
// instead, and the reason is logged once (SetLogger). The step arena is re-carved at the next Forward; a
// pending Backward is cancelled.
func (m *BertForSequenceClassification) SetAttnImplementation(impl string) error {
	changed, err := m.attn.Set(impl)
	if changed {
		m.shape = carveKey{}
		m.last.ready = false
	}
	return err
}

// AttnImplementation returns the attention implementation asked for: "sdpa" (the default) or "eager".
func (m *BertForSequenceClassification) AttnImplementation() string { return m.attn.Want() }

// AttnFallback returns why the last batch shape ran eager although sdpa was asked for (the backend's
// ErrUnsupported message), or "" when it did not.
func (m *BertForSequenceClassification) AttnFallback() string { return m.attn.Fallback() }

// SetLogger sets where the model logs its notices (the sdpa fallback); nil means slog.Default().
func (m *BertForSequenceClassification) SetLogger(l *slog.Logger) { m.attn.SetLogger(l) }

// PlanArena returns the buffers of the step arena for a (b, t) batch under the current policy and attention
// implementation, and the bytes Reserve(b, t) would allocate for them, without allocating the arena
// (transformer.Arena.Measure); only the fused-attention probe touches the backend. The pass buffers are laid
// out anew at the next Forward; a pending Backward is cancelled.
func (m *BertForSequenceClassification) PlanArena(b, t int) ([]transformer.ArenaBuffer, int64, error) {
	dt := m.Policy().GemmDType()
	impl, err := m.attn.Resolve(m.Backend(), m.Config.NumAttentionHeads, m.Config.HeadDim(), t, dt, float32(m.Config.AttentionProbsDropoutProb))
	if err != nil {
		return nil, 0, err
	}
	m.shape, m.last.ready = carveKey{}, false
	return m.Arena().Measure(func(a *transformer.Arena) error { return m.layout(a, carveKey{b, t, dt, impl}) })
}

// SetGradientCheckpointing turns gradient checkpointing on or off, as transformers'
// model.gradient_checkpointing_enable() / _disable(): with it a training Forward keeps only each encoder
// layer's input, the layers' internal activations share one region of the step arena, and Backward recomputes
// each layer's forward (same Philox offsets, so the same dropout masks) just before its backward
// (transformer.LayoutLayers). Loss and gradients are bit for bit those without it; a step costs about one more
// encoder forward. The step arena is re-carved at the next Forward; a pending Backward is cancelled.
func (m *BertForSequenceClassification) SetGradientCheckpointing(on bool) {
	if on != m.ckpt {
		m.ckpt, m.shape, m.last.ready = on, carveKey{}, false
	}
}

// GradientCheckpointing reports whether gradient checkpointing is on.
func (m *BertForSequenceClassification) GradientCheckpointing() bool { return m.ckpt }
