package lora

import "fmt"

// CheckRank makes, before a model is loaded, the checks of cfg's rank that Apply makes once it is: m is the
// model to adapt, usually built on the meta backend from its config alone (transformer.Skeleton), so that only
// the projections' sizes matter. It resolves the targets as Apply does (the model's default target_modules,
// Normalize, Validate, Select) and returns
//
//   - a *ConfigError on r when hostBacked (the adapters will train in host memory: the CPU backend) and their
//     values, gradients and AdamW state exceed the memory available, as Apply refuses them;
//   - a warning when r exceeds min(in, out) of a targeted projection. PEFT accepts any positive r
//     (peft/tuners/lora/layer.py update_layer checks only r > 0), and so does tune, but B·A of a projection
//     has rank at most min(in, out): the rank beyond it adds parameters, memory and compute, not capacity.
//
// A recipe calls it from Validate, so that tune validate and tune finetune give the same error and warning.
func CheckRank(m Base, cfg Config, hostBacked bool) (warnings []string, err error) {
	cfg, targets, byPath, _, err := resolve(m, cfg)
	if err != nil {
		return nil, err
	}
	if hostBacked {
		if err := hostMemoryError(cfg.R, targets, byPath); err != nil {
			return nil, err
		}
	}
	over, smallest, in, out := 0, "", 0, 0
	for _, t := range targets {
		base := byPath[t].Base()
		if base == nil || cfg.R <= min(base.In, base.Out) {
			continue
		}
		if over++; smallest == "" || min(base.In, base.Out) < min(in, out) {
			smallest, in, out = t, base.In, base.Out
		}
	}
	if over > 0 {
		warnings = append(warnings, fmt.Sprintf("lora.r %d is larger than min(in, out) of %d of the %d targeted "+
			"projections (the smallest: %s, %d→%d): an adapter's update B·A has rank at most min(in, out) = %d, so "+
			"the rank beyond it adds parameters and compute but no capacity (r %d can express every update of "+
			"that module)", cfg.R, over, len(targets), smallest, in, out, min(in, out), min(in, out)))
	}
	return warnings, nil
}
