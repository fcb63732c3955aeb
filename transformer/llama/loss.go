package llama

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// ignoreIndex is PyTorch CrossEntropyLoss's default ignore_index: a token labelled −100 has no loss.
const ignoreIndex = -100

// head runs the LM head over the final norm's output chunk by chunk (the shape's chunk rows at a time, so the
// (N, V) logits are never held whole): each chunk's logits are copied to host (when non-nil, FP32) and, when
// labelled, their per-token cross-entropy is written into losses. The cross-entropy reads the logits in FP32
// (log-sum-exp in FP32), as transformers' ForCausalLMLoss upcasts them (loss_utils.py: logits.float()).
func (m *ForCausalLM) head(p *transformer.Pass, host []float32, labelled bool) error {
	if host == nil && !labelled {
		return nil
	}
	a, n, v := &m.act, m.shape.b*m.shape.t, m.Config.VocabSize
	step := m.shape.chunk
	for r0 := 0; r0 < n; r0 += step {
		rows := min(step, n-r0)
		x, lg, err := m.chunkViews(r0, rows)
		if err != nil {
			return err
		}
		if labelled && host == nil && m.host.chunkCount(r0, rows) == 0 {
			if err := m.Backend().Fill(mustView(a.losses, r0, rows), 0); err != nil {
				return err
			}
			continue // nothing to predict in this chunk
		}
		if err := m.LMHead.Forward(p, lg, x); err != nil {
			return fmt.Errorf("llama: lm_head: %w", err)
		}
		if host != nil {
			if err := m.Backend().Download(host[r0*v:(r0+rows)*v], lg); err != nil {
				return fmt.Errorf("llama: reading logits: %w", err)
			}
		}
		if labelled {
			if _, err := m.Backend().CrossEntropy(mustView(a.losses, r0, rows), lg, mustView(a.labels, r0, rows), ignoreIndex); err != nil {
				return fmt.Errorf("llama: cross-entropy (labels must lie in [0, %d) or be -100): %w", v, err)
			}
		}
	}
	return nil
}

// loss returns the batch's summed per-token loss divided by its supervised tokens (NaN when there is none, as
// PyTorch's mean over zero elements).
func (m *ForCausalLM) loss() (float32, error) {
	n := m.shape.b * m.shape.t
	h := &m.host
	h.losses = grow(h.losses, n)
	if err := m.Backend().Download(h.losses, m.act.losses); err != nil {
		return 0, fmt.Errorf("llama: reading losses: %w", err)
	}
	var sum float64
	for _, l := range h.losses {
		sum += float64(l)
	}
	m.last.count = h.count
	return float32(sum / float64(h.count)), nil
}

// headBackward recomputes each chunk's logits, seeds d(seed·mean loss)/d(logits) = seed/count·(softmax −
// onehot) in the logits' dtype, and back-propagates the LM head into dxf (N, C) F32 and its weight's gradient
// (for a tied head, the embedding's). Chunks without a supervised token get dxf = 0 and no GEMM.
func (m *ForCausalLM) headBackward(p *transformer.Pass, seed float32) error {
	a, n := &m.act, m.shape.b*m.shape.t
	scale := float32(0)
	if m.last.count > 0 {
		scale = seed / float32(m.last.count)
	}
	c := m.Config.HiddenSize
	step := m.shape.chunk
	for r0 := 0; r0 < n; r0 += step {
		rows := min(step, n-r0)
		dx := mustView(a.dxf, r0*c, rows, c)
		if m.host.chunkCount(r0, rows) == 0 || scale == 0 {
			if err := m.Backend().Fill(dx, 0); err != nil {
				return err
			}
			continue
		}
		x, lg, err := m.chunkViews(r0, rows)
		if err != nil {
			return err
		}
		if err := m.LMHead.Forward(p, lg, x); err != nil {
			return fmt.Errorf("llama: lm_head: %w", err)
		}
		dlg := mustView(a.dlogits, 0, rows, m.Config.VocabSize)
		if err := m.Backend().CrossEntropyBackward(dlg, lg, mustView(a.labels, r0, rows), scale, ignoreIndex); err != nil {
			return fmt.Errorf("llama: cross-entropy backward: %w", err)
		}
		if err := m.LMHead.Backward(p, dx, dlg, x, false); err != nil {
			return fmt.Errorf("llama: lm_head backward: %w", err)
		}
	}
	return nil
}

// chunkViews returns the LM head's input rows [r0, r0+rows) and the logits buffer for them.
func (m *ForCausalLM) chunkViews(r0, rows int) (x, logits *tensor.Tensor, err error) {
	c, v := m.Config.HiddenSize, m.Config.VocabSize
	if x, err = m.act.xf.View(r0*c, rows, c); err != nil {
		return nil, nil, err
	}
	if logits, err = m.act.logits.View(0, rows, v); err != nil {
		return nil, nil, err
	}
	return x, logits, nil
}
