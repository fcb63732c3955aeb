package lora

import (
	"errors"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/meta"
	"github.com/tune-ml/tune/transformer/bert"
)

// TestCheckRank: CheckRank, on a model built on the meta backend from its config alone, refuses what Apply
// refuses on the CPU backend (a rank whose adapters exceed the host's memory, named by r, with Apply's message)
// and warns when r exceeds min(in, out) of a targeted projection, which PEFT and Apply accept (PEFT checks only
// r > 0): B·A has rank at most min(in, out), so the rest is parameters without capacity.
func TestCheckRank(t *testing.T) {
	saved := hostAvailable
	t.Cleanup(func() { hostAvailable = saved })
	hostAvailable = func() (uint64, bool) { return 1 << 20, true } // a 1 MiB machine

	skeleton, err := bert.NewBertForSequenceClassification(meta.New(nil), tinyConfig(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r          int
		hostBacked bool
		warn, err  string
	}{
		{4, true, "", ""},
		{64, false, "", ""}, // min(in, out) of query and value (64→64) is 64
		{65, false, "lora.r 65 is larger than min(in, out) of 4 of the 4 targeted projections (the smallest: bert.encoder.layer.0.attention.self.query, 64→64)", ""},
		{100_000, false, "has rank at most min(in, out) = 64", ""}, // on a GPU: no host-memory bound
		{100_000, true, "", "100000 makes 4 adapters of 5.12e+07 parameters"},
	} {
		cfg := seqCls()
		cfg.R, cfg.LoraAlpha = c.r, 2*float64(c.r)
		warnings, err := CheckRank(skeleton, cfg, c.hostBacked)
		if c.err != "" {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != "r" || !strings.Contains(err.Error(), c.err) {
				t.Errorf("r %d: error %v, want a *ConfigError for r with %q", c.r, err, c.err)
			}
			_, applyErr := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
			if applyErr == nil || applyErr.Error() != err.Error() {
				t.Errorf("r %d: Apply's error %v, want CheckRank's %v", c.r, applyErr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("r %d: %v", c.r, err)
		}
		if got := strings.Join(warnings, "\n"); (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
			t.Errorf("r %d: warnings %q, want %q", c.r, got, c.warn)
		}
	}
}
