package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestLoRAScalingOutsideFP32 (tester3: lora.lora_alpha=1e308 trained into NaN and the error said "check the
// data for bad values"): a scaling lora_alpha/r that is +Inf or 0 in FP32 is refused by validate and finetune
// before anything is built, naming lora.lora_alpha, r, the scaling and the usual values.
func TestLoRAScalingOutsideFP32(t *testing.T) {
	testutil.IsolateCache(t)
	recipe := tinyLoRARecipe(t)
	for _, cmd := range []string{"validate", "finetune"} {
		for _, c := range []struct{ alpha, want string }{
			{"1e308", "makes the scaling lora_alpha/r = 1.25e+307, outside FP32's range"},
			{"1e-40", "makes the scaling lora_alpha/r = 1.25e-41, outside FP32's range"},
		} {
			t.Run(cmd+" "+c.alpha, func(t *testing.T) {
				code, _, errOut := runTune(t, cmd, recipe, "lora.lora_alpha="+c.alpha,
					"training.output_dir="+filepath.Join(t.TempDir(), "out"))
				if code != exitUsage || !strings.Contains(errOut, "lora.lora_alpha: ") ||
					!strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usually r or 2·r") {
					t.Errorf("exit %d, stderr %q; want exit %d naming lora.lora_alpha and %q", code, errOut, exitUsage, c.want)
				}
			})
		}
	}
}

// TestLoRAScalingNamedInTheNonFiniteError: a scaling inside FP32's range but far above the usual one
// (lora_alpha 1e30, r 8: 1.25e29) trains into a NaN gradient at step 3; the error names the scaling and
// lora_alpha as the likely cause instead of telling the user to check the data.
func TestLoRAScalingNamedInTheNonFiniteError(t *testing.T) {
	testutil.IsolateCache(t)
	code, _, errOut := runTune(t, "finetune", tinyLoRARecipe(t), "lora.lora_alpha=1e30", "training.max_steps=10",
		"training.eval_strategy=no", "training.save_strategy=no", "training.output_dir="+filepath.Join(t.TempDir(), "out"))
	if code == exitOK || !strings.Contains(errOut, "the LoRA scaling lora_alpha/r = 1.25e+29 (lora_alpha 1e+30, r 8)") ||
		!strings.Contains(errOut, "lower lora_alpha") || strings.Contains(errOut, "check the data") {
		t.Errorf("exit %d, stderr %q; want the scaling named as the cause and no 'check the data'", code, errOut)
	}
}

// TestLoRARankValidateAgreesWithFinetune: tune validate makes finetune's checks of lora.r before anything
// loads. A rank whose adapters cannot fit in memory (1e9 on tiny: 8 TB) is refused by both naming lora.r
// (validate accepted it, tester3); a rank above min(in, out) of the targeted projections (100 over 64→64) is
// accepted by both, as PEFT accepts it, with the same warning that the rank beyond 64 adds no capacity.
func TestLoRARankValidateAgreesWithFinetune(t *testing.T) {
	testutil.IsolateCache(t)
	recipe := tinyLoRARecipe(t)
	for _, cmd := range []string{"validate", "finetune"} {
		out := "training.output_dir=" + filepath.Join(t.TempDir(), "out")
		code, _, errOut := runTune(t, cmd, recipe, "lora.r=1000000000", out)
		if code != exitUsage || !strings.Contains(errOut, "lora.r: 1000000000 makes 4 adapters") {
			t.Errorf("%s lora.r=1000000000: exit %d, stderr %q; want exit %d naming lora.r", cmd, code, errOut, exitUsage)
		}
		code, _, errOut = runTune(t, cmd, recipe, "lora.r=100", "training.max_steps=1", out)
		want := "warning: " + recipe + ": lora.r 100 is larger than min(in, out) of 4 of the 4 targeted projections"
		if code != exitOK || !strings.Contains(errOut, want) || strings.Count(errOut, "is larger than min(in, out)") != 1 {
			t.Errorf("%s lora.r=100: exit %d, stderr %q; want exit 0 and one warning %q", cmd, code, errOut, want)
		}
	}
}
