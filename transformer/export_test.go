package transformer

// SetKeepPlan sets what the encoder layers keep for a test: with all, every input and u (the layout before
// keepPlan); otherwise keepPlan's choice with u recomputed from recomputeBytes bytes a layer. The returned
// function restores the defaults.
func SetKeepPlan(all bool, recomputeBytes int64) (restore func()) {
	oldAll, oldBytes := keepAll, ffnRecomputeBytes
	keepAll, ffnRecomputeBytes = all, recomputeBytes
	return func() { keepAll, ffnRecomputeBytes = oldAll, oldBytes }
}
