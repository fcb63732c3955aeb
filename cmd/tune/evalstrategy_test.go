package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestEvalStrategyNoDoesNotEvaluate: with eval_strategy no the eval set is not evaluated at the end either (no
// eval line, no eval_results.json, eval metrics in no results file), as transformers' example scripts evaluate
// only under do_eval; a note says how to ask. training.do_eval=true evaluates the final model.
func TestEvalStrategyNoDoesNotEvaluate(t *testing.T) {
	testutil.IsolateCache(t)
	base := []string{"finetune", "--device", "cpu", tinyRecipe, "training.max_steps=2", "training.eval_strategy=no", "training.save_strategy=no"}
	out := filepath.Join(t.TempDir(), "no")
	code, stdout, stderr := runCLI(append(base, "training.output_dir="+out)...)
	if code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if strings.Contains(stdout, "\neval:") || !strings.Contains(stderr, "set training.do_eval=true to evaluate the final model") {
		t.Errorf("eval_strategy no evaluated, or said nothing:\n%s\n%s", stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "eval_results.json")); err == nil {
		t.Error("eval_results.json was written")
	}
	if all, _ := os.ReadFile(filepath.Join(out, "all_results.json")); strings.Contains(string(all), "eval_") {
		t.Errorf("all_results.json holds eval metrics: %s", all)
	}
	if strings.Contains(stdout, "eval_results.json") {
		t.Errorf("the outputs list names eval_results.json, which is not there:\n%s", stdout)
	}
	out = filepath.Join(t.TempDir(), "do")
	code, stdout, stderr = runCLI(append(base, "training.output_dir="+out, "training.do_eval=true")...)
	if code != exitOK || !strings.Contains(stdout, "\neval:  accuracy ") || strings.Contains(stderr, "do_eval") {
		t.Fatalf("do_eval: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "eval_results.json")); err != nil {
		t.Error(err)
	}
	// do_eval without an eval set is a recipe error naming both keys.
	code, _, stderr = runCLI(append(base, "training.output_dir="+filepath.Join(t.TempDir(), "x"), "training.do_eval=true", "data.eval=null")...)
	if code != exitUsage || !strings.Contains(stderr, "data.eval: is required because training.do_eval is set") {
		t.Errorf("do_eval without data.eval: exit %d %s", code, stderr)
	}
}
