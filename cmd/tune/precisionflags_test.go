package main

import (
	"strings"
	"testing"
)

// TestPrecisionFlagAgainstOverride checks the README's "both at once is an error" on one command line: --fp16
// with the override training.bf16=true (or --bf16 with training.fp16=true) used to train silently in the flag's
// mode. A flag still overrides the recipe file's own setting, and an override that agrees with it is accepted.
func TestPrecisionFlagAgainstOverride(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--fp16", tinyRecipe, "training.bf16=true"}, exitUsage, "--fp16 and the override training.bf16=true are exclusive"},
		{[]string{"--bf16", tinyRecipe, "training.fp16=yes"}, exitUsage, "--bf16 and the override training.fp16=yes are exclusive"},
		{[]string{"--fp16", "--bf16", tinyRecipe}, exitUsage, "--fp16 and --bf16 are exclusive"},
		{[]string{"--fp16", tinyRecipe, "training.bf16=false"}, exitOK, "fp16: true"},
	} {
		code, stdout, stderr := runCLI(append([]string{"validate"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("validate %s: exit %d, %s%s; want %d and %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}
