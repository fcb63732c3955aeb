package recipes

import (
	"strings"
	"testing"
)

// TestLoRAWithoutTaskTypeWarns (tester13): a BERT LoRA recipe without task_type or modules_to_save trains the
// adapters only, as PEFT does, and leaves the classifier head as loaded; it validates with a warning saying so.
// task_type SEQ_CLS, or modules_to_save naming the classifier, trains the head and warns of nothing.
func TestLoRAWithoutTaskTypeWarns(t *testing.T) {
	for _, c := range []struct {
		lora string
		warn bool
	}{
		{"lora:\n  r: 2\n  target_modules: [query, value]\n", true},
		{"lora:\n  r: 2\n  target_modules: [query, value]\n  task_type: SEQ_CLS\n", false},
		{"lora:\n  r: 2\n  target_modules: [query, value]\n  modules_to_save: [classifier]\n", false},
	} {
		r := labelRecipe(t, t.TempDir(), c.lora)
		warned := false
		for _, w := range r.Warnings {
			warned = warned || strings.Contains(w, "lora: no task_type and no modules_to_save")
		}
		if warned != c.warn {
			t.Errorf("%q: warned %v, want %v; warnings %q", c.lora, warned, c.warn, r.Warnings)
		}
	}
}
