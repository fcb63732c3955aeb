package transformer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestCheckpointProblemsSummarizesShapes: a tiny-chat config.json with hidden_size 64 → 32 printed each of the
// 21 tensors' two shapes in one line (a 16-layer model would print ~150). The first three are shown, then a
// count of the rest.
func TestCheckpointProblemsSummarizesShapes(t *testing.T) {
	r := &loaders.LoadReport{}
	for i := range 21 {
		r.Mismatched = append(r.Mismatched, loaders.ShapeMismatch{Name: fmt.Sprintf("model.layers.%d.w", i), Key: fmt.Sprintf("model.layers.%d.w", i),
			Checkpoint: []int{64}, Model: []int{32}})
	}
	p := CheckpointProblems(r)
	if !strings.Contains(p, "21 tensors of another shape: model.layers.0.w: checkpoint [64], model [32]") ||
		!strings.Contains(p, "and 18 more") || strings.Contains(p, "model.layers.3.w") {
		t.Errorf("problems %q", p)
	}
	r.Mismatched = r.Mismatched[:1]
	if p := CheckpointProblems(r); p != "model.layers.0.w: checkpoint [64], model [32]" {
		t.Errorf("one mismatch: %q", p)
	}
}
