package loaders

// Batch is one padded batch of examples on the host, as the collator builds it and the models consume it.
// Token arrays are row-major (B, T); padding positions have InputIDs = the pad id, AttentionMask = 0.
type Batch struct {
	B, T          int     // sequences in the batch, and tokens per sequence after padding
	InputIDs      []int32 // (B, T)
	TokenTypeIDs  []int32 // (B, T); all 0 for single sentences
	AttentionMask []int32 // (B, T); 1 = attend, 0 = padding
	// Labels holds class ids (B) for classification, -100 for an unlabelled row; nil when the batch has no labels.
	Labels []int64
	// Targets holds regression targets (B) when the task is regression (num_labels == 1); nil otherwise.
	Targets []float32
}

// NumTokens returns the number of non-padding tokens (Σ AttentionMask).
func (b *Batch) NumTokens() int {
	n := 0
	for _, m := range b.AttentionMask {
		n += int(m)
	}
	return n
}

// NumLabelled returns how many rows carry a label (Labels != -100, or every row of a regression batch): the
// denominator of the batch's mean loss.
func (b *Batch) NumLabelled() int {
	if b.Targets != nil {
		return b.B
	}
	n := 0
	for _, l := range b.Labels {
		if l != -100 {
			n++
		}
	}
	return n
}
