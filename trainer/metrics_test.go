package trainer

import (
	"math"
	"testing"
)

// onehot returns logits whose argmax is each of preds.
func onehot(preds []int64, numLabels int) []float32 {
	out := make([]float32, len(preds)*numLabels)
	for i, p := range preds {
		out[i*numLabels+int(p)] = 1
	}
	return out
}

func TestClassificationMetrics(t *testing.T) {
	// Expected values computed by hand from the definitions (and matching sklearn.metrics on the same inputs).
	tests := []struct {
		name      string
		numLabels int
		labels    []int64
		preds     []int64
		want      map[string]float64
	}{
		{
			// TP=2 FP=1 FN=1 TN=2: acc 4/6, F1 = 4/6, MCC = (2·2−1·1)/sqrt(3·3·3·3) = 1/3
			name: "binary: F1 of class 1 and MCC from the 2x2 table", numLabels: 2,
			labels: []int64{1, 1, 1, 0, 0, 0}, preds: []int64{1, 1, 0, 1, 0, 0},
			want: map[string]float64{"accuracy": 4.0 / 6, "f1": 4.0 / 6, "matthews_correlation": 1.0 / 3},
		},
		{
			// per-class F1: class0 tp1 fp0 fn1 → 2/3; class1 tp1 fp1 fn0 → 2/3; class2 tp1 fp1 fn1 → 1/2
			// MCC: c=3 s=5 t=(2,1,2) p=(1,2,2): (15 − (2+2+4)) / sqrt((25−9)(25−9)) = 7/16
			name: "three classes: macro F1 and multiclass MCC", numLabels: 3,
			labels: []int64{0, 0, 1, 2, 2}, preds: []int64{0, 2, 1, 2, 1},
			want: map[string]float64{"accuracy": 0.6, "f1": (2.0/3 + 2.0/3 + 0.5) / 3, "matthews_correlation": 7.0 / 16},
		},
		{
			name: "unlabelled rows (-100) are left out", numLabels: 2,
			labels: []int64{1, -100, 0}, preds: []int64{1, 0, 0},
			want: map[string]float64{"accuracy": 1, "f1": 1, "matthews_correlation": 1},
		},
		{
			name: "constant predictions: F1 0 (zero_division) and MCC 0 (undefined)", numLabels: 2,
			labels: []int64{1, 0, 1}, preds: []int64{0, 0, 0},
			want: map[string]float64{"accuracy": 1.0 / 3, "f1": 0, "matthews_correlation": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClassificationMetrics(EvalPrediction{Logits: onehot(tt.preds, tt.numLabels), NumLabels: tt.numLabels, Labels: tt.labels})
			for k, want := range tt.want {
				if math.Abs(got[k]-want) > 1e-12 {
					t.Errorf("%s = %.12g, want %.12g", k, got[k], want)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("got keys %v", got)
			}
		})
	}
}

func TestClassificationMetricsUndefined(t *testing.T) {
	tests := []struct {
		name string
		p    EvalPrediction
	}{
		{"regression has no classification metrics", EvalPrediction{Logits: []float32{1, 2}, NumLabels: 1, Labels: []int64{0, 1}}},
		{"no labels", EvalPrediction{Logits: []float32{1, 2}, NumLabels: 2}},
		{"every label ignored", EvalPrediction{Logits: []float32{1, 2}, NumLabels: 2, Labels: []int64{-100}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassificationMetrics(tt.p); got != nil {
				t.Fatalf("got %v, want nil", got)
			}
		})
	}
}

func TestPredictionsTieTakesFirst(t *testing.T) {
	p := EvalPrediction{Logits: []float32{0.5, 0.5, -1, 3}, NumLabels: 2}
	got := p.Predictions()
	if got[0] != 0 || got[1] != 1 {
		t.Fatalf("argmax %v, want [0 1]", got)
	}
}
