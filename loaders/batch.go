package loaders

// Batch is one padded batch of examples on the host, as the collator builds it and the models consume it.
// Token arrays are row-major (B, T); padding positions have InputIDs = the pad id, AttentionMask = 0.
type Batch struct {
	B, T          int     // sequences in the batch, and tokens per sequence after padding
	InputIDs      []int32 // (B, T)
	TokenTypeIDs  []int32 // (B, T); all 0 for single sentences
	AttentionMask []int32 // (B, T); 1 = attend, 0 = padding
	// Labels holds class ids (B) for classification, or token ids (B, T) for a causal language model (the model
	// shifts them: position t's label is the target of the prediction at t−1, as transformers' labels are); -100
	// marks an unlabelled row or token. nil when the batch has no labels.
	Labels []int64
	// PositionIDs (B, T) are the position of each token; nil means 0…T−1 in every row. Packed rows restart them
	// at each example.
	PositionIDs []int32
	// SegmentIDs (B, T) number the examples packed into one row; attention stays within a segment. nil means
	// one example per row.
	SegmentIDs []int32
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

// NumLabelled returns how many entries of Labels are not -100 (every row of a regression batch): for a
// classifier's (B) labels, the denominator of the batch's mean loss. A causal LM's denominator excludes each
// row's first label, which no prediction targets (the model's Supervised says).
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
