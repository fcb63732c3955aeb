package lora

import (
	"errors"
	"strings"
	"testing"
)

// TestApplyRefusesAdaptersLargerThanMemory: lora.r 1e9 on a 64-wide model asked the CPU backend for a 256 GB
// adapter weight and the Go runtime aborted with "fatal error: runtime: out of memory" and a goroutine dump
// (`tune finetune tiny lora.r=1000000000`). Apply now counts the adapters first and refuses a rank whose
// adapters, with their gradients and AdamW state, exceed the host's available memory, naming r; a usual rank
// under the same (small) machine is accepted.
func TestApplyRefusesAdaptersLargerThanMemory(t *testing.T) {
	saved := hostAvailable
	t.Cleanup(func() { hostAvailable = saved })
	hostAvailable = func() (uint64, bool) { return 1 << 20, true } // a 1 MiB machine

	for _, r := range []int{100_000, 1_000_000_000} {
		cfg := seqCls()
		cfg.R, cfg.LoraAlpha = r, 2*float64(r)
		_, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "r" || !strings.Contains(err.Error(), "lower r") {
			t.Fatalf("r %d: error %v, want a *ConfigError for r saying to lower it", r, err)
		}
		t.Logf("r %d refused: %v", r, err)
	}
	cfg := seqCls() // r 4 on 4 modules of 64→64: 2,048 adapter parameters, 32 KiB with gradients and moments
	if _, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1); err != nil {
		t.Fatalf("r 4 on a 1 MiB machine: %v", err)
	}
}
