package trainer

import (
	"strings"
	"testing"
)

// TestGradientCheckpointingNeedsAModelThatRecomputes: gradient_checkpointing on a model without
// transformer.GradientCheckpointer is refused at New, naming the key, not silently ignored.
func TestGradientCheckpointingNeedsAModelThatRecomputes(t *testing.T) {
	a := testArgs(t)
	a.GradientCheckpointing = true
	_, err := New(newBagModel(16, 6, 2, 0), a, toyTask(8, 16, 1), nil)
	if err == nil || !strings.Contains(err.Error(), "gradient_checkpointing") {
		t.Fatalf("New with gradient_checkpointing on a bag model: %v, want an error naming gradient_checkpointing", err)
	}
}
