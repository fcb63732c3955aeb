package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestEvalPredictSameTruncation: on a model with 64 positions and texts longer than that, tune predict (which
// defaulted to 512 tokens and failed) and tune eval (which truncated at 128 with no --max-length) now see the
// same tokens: predict's logits give eval's eval_loss, and both take --max-length, refused beyond 64.
func TestEvalPredictSameTruncation(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out,
		"training.max_steps=3", "training.eval_strategy=no", "training.save_strategy=no"); code != exitOK {
		t.Fatal(stderr)
	}
	long := strings.Repeat("the film is not good but the acting is great ", 12) // about 120 tokens
	data := filepath.Join(t.TempDir(), "long.tsv")
	os.WriteFile(data, []byte("sentence\tlabel\n"+long+"\t1\n"+long+"and bad\t0\nshort and good\t1\n"), 0o644)
	code, stdout, stderr := runCLI("predict", "--device", "cpu", "--model", out, "--input", data)
	if code != exitOK {
		t.Fatalf("predict exit %d: %s", code, stderr)
	}
	labels := []int{1, 0, 1}
	var loss float64
	for i, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var p struct{ Logits []float64 }
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		lse := math.Log(math.Exp(p.Logits[0]) + math.Exp(p.Logits[1]))
		loss += (lse - p.Logits[labels[i]]) / 3
	}
	code, stdout, stderr = runCLI("eval", "--json", "--device", "cpu", "--model", out, "--data", data)
	if code != exitOK {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	var m map[string]float64
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	if math.Abs(m["eval_loss"]-loss) > 1e-5 {
		t.Errorf("eval_loss %v, predict's logits give %v: the two commands saw different tokens", m["eval_loss"], loss)
	}
	for _, cmd := range [][]string{{"eval", "--model", out, "--data", data}, {"predict", "--model", out, "--input", data}} {
		code, _, stderr = runCLI(append(cmd, "--max-length", "100")...)
		if code != exitUsage || !strings.Contains(stderr, "--max-length 100 exceeds the model's max_position_embeddings 64") {
			t.Errorf("%s --max-length 100: exit %d %s", cmd[0], code, stderr)
		}
	}
	if code, stdout, stderr = runCLI("eval", "--json", "--device", "cpu", "--model", out, "--data", data, "--max-length", "16"); code != exitOK || stdout == "" {
		t.Errorf("eval --max-length 16: exit %d %s", code, stderr)
	}
}
