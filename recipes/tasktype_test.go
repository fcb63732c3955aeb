package recipes

import (
	"path/filepath"
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

// TestEvalStrategyImpliesDoEval (tester13): validate printed do_eval: false beside eval_strategy: epoch, which
// evaluates at the end all the same. As transformers' TrainingArguments.__post_init__ does, the decoded
// recipe sets do_eval when eval_strategy is not no, and leaves it as written otherwise.
func TestEvalStrategyImpliesDoEval(t *testing.T) {
	for _, c := range []struct {
		overrides []string
		want      bool
	}{
		{[]string{"training.eval_strategy=epoch"}, true},
		{[]string{"training.eval_strategy=no"}, false},
		{[]string{"training.eval_strategy=no", "training.do_eval=true"}, true},
	} {
		dir := t.TempDir()
		r, err := Decode([]byte(labelRecipeText(t, dir, "")), filepath.Join(dir, "r.yaml"), dir, append(c.overrides, "data.eval=train.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		if r.Training.DoEval != c.want {
			t.Errorf("%q: do_eval %v, want %v", c.overrides, r.Training.DoEval, c.want)
		}
	}
}
