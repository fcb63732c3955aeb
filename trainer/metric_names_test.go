package trainer

import (
	"maps"
	"slices"
	"testing"
)

// TestMetricNames: the names recipes validate metric_for_best_model against are the ones the evaluation
// reports, so the two lists cannot drift apart.
func TestMetricNames(t *testing.T) {
	p := EvalPrediction{Logits: []float32{0.1, 0.9, 0.8, 0.2, 0.3, 0.7}, NumLabels: 2, Labels: []int64{1, 0, 0}}
	got := slices.Sorted(maps.Keys(ClassificationMetrics(p)))
	if want := slices.Sorted(slices.Values(ClassificationMetricNames())); !slices.Equal(got, want) {
		t.Errorf("ClassificationMetrics returns %v, ClassificationMetricNames says %v", got, want)
	}
	for _, c := range []struct {
		name           string
		classification bool
		want           []string
	}{
		{"classification: the loss and the classification metrics", true, []string{"loss", "accuracy", "f1", "matthews_correlation"}},
		{"regression: the loss only (ClassificationMetrics returns nil)", false, []string{"loss"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := BestModelMetricNames(c.classification); !slices.Equal(got, c.want) {
				t.Errorf("BestModelMetricNames(%v) = %v, want %v", c.classification, got, c.want)
			}
		})
	}
	if m := ClassificationMetrics(EvalPrediction{Logits: []float32{0.5}, NumLabels: 1, Labels: []int64{0}}); m != nil {
		t.Errorf("a regression prediction has classification metrics %v", m)
	}
}
