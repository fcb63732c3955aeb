package cuda

// GraphStats is how the steps of a StepGraph ran (graph.go).
type GraphStats struct {
	Replays  int `json:"replays"`  // steps run as one launch of the captured graph
	Captures int `json:"captures"` // steps captured (issued by the new graph's first launch)
	Eager    int `json:"eager"`    // steps run eagerly: warm-up, the probe, mismatches, or all once off
	// Patched counts the kernel nodes checked replays updated because an argument changed (0 when every
	// per-step value is read from device memory: cuda/graph.go); PatchedKernels names them ("name×count").
	Patched        int      `json:"patched"`
	PatchedKernels []string `json:"patched_kernels,omitempty"`
	Off            string   `json:"off,omitempty"`      // why graphs are off ("" while on)
	Mismatch       string   `json:"mismatch,omitempty"` // the reason of the last replay that ran eagerly
}
