package bert

import (
	"fmt"
	"github.com/tune-ml/tune/transformer"
	"math"

	"github.com/tune-ml/tune/loaders"
)

// ignoreIndex is PyTorch CrossEntropyLoss's default ignore_index: a row labelled −100 has no loss.
const ignoreIndex = -100

// problemType resolves the loss as transformers does on the first forward with labels (transformers/models/bert/modeling_bert.py):
// problem_type if set; else num_labels == 1 → regression, integer labels → single-label classification,
// float targets with num_labels > 1 → multi-label classification. The resolved type is stored in the config.
func (m *BertForSequenceClassification) problemType(batch *loaders.Batch) (string, error) {
	pt := m.Config.ProblemType
	if pt == "" {
		switch {
		case m.Config.NumLabels() == 1:
			pt = Regression
		case batch.Labels != nil:
			pt = SingleLabel
		default:
			pt = MultiLabel
		}
		m.Config.ProblemType = pt
	}
	switch pt {
	case MultiLabel:
		return "", ErrMultiLabel
	case Regression:
		if batch.Targets == nil {
			return "", fmt.Errorf("transformer: problem_type %q needs float targets in Batch.Targets (got integer Labels)", pt)
		}
		if p := regressionProblem(m.Config.NumLabels()); p != nil {
			return "", p
		}
	case SingleLabel:
		if batch.Labels == nil {
			return "", fmt.Errorf("transformer: problem_type %q needs integer class ids in Batch.Labels (got float Targets)", pt)
		}
	}
	return pt, nil
}

// loss computes the batch's mean loss from the head's logits (FP32-class: half logits are read in FP32) and
// records what lossBackward needs. Cross-entropy averages over rows whose label is not −100 (NaN when there is
// none, as PyTorch's mean over zero elements); MSE averages over all B rows.
// With deferred set the per-row losses stay on the device (the returned loss is NaN; Forward hands out the
// rows and the count, transformer.Output.LossRows).
func (m *BertForSequenceClassification) loss(batch *loaders.Batch, deferred bool) (float32, error) {
	pt, err := m.problemType(batch)
	if err != nil {
		return 0, err
	}
	a, logits := &m.act, m.Head.c.logits
	count := batch.B
	switch pt {
	case SingleLabel:
		if count, err = m.Backend().CrossEntropy(a.losses, logits, a.labels, ignoreIndex); err != nil {
			return 0, fmt.Errorf("transformer: cross-entropy loss (labels must lie in [0, %d) or be -100): %w", m.Config.NumLabels(), err)
		}
	case Regression:
		pred, err := logits.Reshape(batch.B)
		if err != nil {
			return 0, err
		}
		if err := m.Backend().MSELoss(a.losses, pred, a.targets); err != nil {
			return 0, fmt.Errorf("transformer: MSE loss: %w", err)
		}
	}
	m.last.problem, m.last.count = pt, count
	if deferred {
		return float32(math.NaN()), nil
	}
	m.host.losses = grow(m.host.losses, batch.B)
	if err := m.Backend().Download(m.host.losses, a.losses); err != nil {
		return 0, fmt.Errorf("transformer: reading losses: %w", err)
	}
	return transformer.LossOf(m.host.losses, count), nil
}

// lossBackward seeds the gradient of the logits: d(seed·mean loss)/d(logits), rounded to the logits' dtype
// (the gradient of a half tensor is half, torch/amp/autocast_mode.py). A batch with no labelled row contributes zero.
func (m *BertForSequenceClassification) lossBackward(p *transformer.Pass, seed float32) error {
	a, h := &m.act, &m.Head.c
	scale := float32(0)
	if m.last.count > 0 {
		scale = seed / float32(m.last.count)
	}
	switch m.last.problem {
	case SingleLabel:
		return p.Backend.CrossEntropyBackward(h.dlogits, h.logits, a.labels, scale, ignoreIndex, p.LossScale)
	case Regression:
		b := m.shape.b
		pred, err := h.logits.Reshape(b)
		if err != nil {
			return err
		}
		dpred, err := h.dlogits.Reshape(b)
		if err != nil {
			return err
		}
		return p.Backend.MSELossBackward(dpred, pred, a.targets, scale, p.LossScale)
	}
	return fmt.Errorf("transformer: no loss to back-propagate")
}
