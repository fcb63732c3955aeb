package lora

import (
	"fmt"

	"github.com/tune-ml/tune/internal/hostmem"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// hostAvailable is hostmem.Available; a variable so that tests can stand in a small machine.
var hostAvailable = hostmem.Available

// adapterHostBytes is what one adapter parameter takes on the host while it trains: its FP32 value and
// gradient and AdamW's two FP32 moments.
const adapterHostBytes = 16

// checkHostMemory returns a *ConfigError for r when bk keeps tensors in host memory (the CPU backend) and the
// rank-r adapters of targets, r·(in+out) parameters each, would take more than the memory available with
// their gradients and AdamW state: the CPU backend allocates with make, and a slice beyond the machine makes
// the Go runtime abort ("fatal error: out of memory") where no error can be returned. A GPU backend reports a
// failed allocation as an error itself; a meta backend (a memory plan) allocates nothing.
func checkHostMemory(bk tensor.Backend, r int, targets []string, byPath map[string]transformer.Projection) error {
	if bk == nil || bk.Name() != "cpu" || tensor.IsMeta(bk) {
		return nil
	}
	return hostMemoryError(r, targets, byPath)
}

// hostMemoryError is checkHostMemory's test for adapters that will live in host memory: a *ConfigError for r
// when the rank-r adapters of targets take more than the memory available, or nil (also where it cannot be
// read).
func hostMemoryError(r int, targets []string, byPath map[string]transformer.Projection) error {
	avail, ok := hostAvailable()
	if !ok {
		return nil
	}
	var params float64 // float64: r·(in+out) summed over the targets may exceed an int
	for _, t := range targets {
		if base := byPath[t].Base(); base != nil {
			params += float64(r) * float64(base.In+base.Out)
		}
	}
	need := adapterHostBytes * params
	if need <= float64(avail) {
		return nil
	}
	return &ConfigError{Key: "r", Reason: fmt.Sprintf("%d makes %d adapters of %.3g parameters, %.3g GB with their "+
		"gradients and AdamW state, more than the %.3g GB of memory available on this machine; lower r (LoRA "+
		"ranks are usually 4 to 64)", r, len(targets), params, need/1e9, float64(avail)/1e9)}
}
