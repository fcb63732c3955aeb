package trainer

import (
	"math"
	"slices"
)

// EvalPrediction is what an evaluation or prediction pass produced (transformers' EvalPrediction): the logits
// of every example in dataset order and their labels.
type EvalPrediction struct {
	Logits    []float32 // (N, NumLabels), FP32
	NumLabels int       // L, logits per example (1 for regression)
	Labels    []int64   // (N) class ids, -100 for an unlabelled example; nil when the dataset has no labels
}

// Predictions returns the argmax class of each example (the first maximum on ties, as torch.argmax).
func (p EvalPrediction) Predictions() []int64 {
	if p.NumLabels <= 0 {
		return nil
	}
	n := len(p.Logits) / p.NumLabels
	out := make([]int64, n)
	for i := range n {
		row := p.Logits[i*p.NumLabels : (i+1)*p.NumLabels]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		out[i] = int64(best)
	}
	return out
}

// MetricsFunc computes named metrics from an evaluation pass (transformers' compute_metrics). Names carry no
// "eval_" prefix; Evaluate adds it.
type MetricsFunc func(p EvalPrediction) map[string]float64

// ClassificationMetrics is the default MetricsFunc for classification: "accuracy", "f1" (binary F1 of class 1
// when NumLabels == 2, macro F1 over the classes present in labels or predictions otherwise, as
// sklearn.metrics.f1_score with average="binary"/"macro" and zero_division=0) and "matthews_correlation"
// (sklearn.metrics.matthews_corrcoef, the multiclass R_K statistic; 0 when undefined). Unlabelled examples
// (label -100) are left out. It returns nil for regression (NumLabels == 1) or when no example is labelled.
func ClassificationMetrics(p EvalPrediction) map[string]float64 {
	if p.NumLabels < 2 || p.Labels == nil {
		return nil
	}
	pred := p.Predictions()
	var yt, yp []int64
	for i, l := range p.Labels {
		if l != -100 && i < len(pred) {
			yt = append(yt, l)
			yp = append(yp, pred[i])
		}
	}
	if len(yt) == 0 {
		return nil
	}
	return map[string]float64{
		"accuracy":             accuracy(yt, yp),
		"f1":                   f1(yt, yp, p.NumLabels == 2),
		"matthews_correlation": matthews(yt, yp),
	}
}

func accuracy(yt, yp []int64) float64 {
	ok := 0
	for i := range yt {
		if yt[i] == yp[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(yt))
}

// f1 returns the binary F1 of class 1, or the macro mean of per-class F1 over the classes in yt ∪ yp.
func f1(yt, yp []int64, binary bool) float64 {
	classF1 := func(c int64) float64 {
		var tp, fp, fn float64
		for i := range yt {
			switch {
			case yt[i] == c && yp[i] == c:
				tp++
			case yp[i] == c:
				fp++
			case yt[i] == c:
				fn++
			}
		}
		if tp == 0 {
			return 0 // sklearn's zero_division=0 (and F1 is 0 whenever tp is 0 but the denominator is not)
		}
		return 2 * tp / (2*tp + fp + fn)
	}
	if binary {
		return classF1(1)
	}
	classes := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(yt), yp...))))
	sum := 0.0
	for _, c := range classes {
		sum += classF1(c)
	}
	return sum / float64(len(classes))
}

// matthews returns the Matthews correlation coefficient from the confusion matrix (Gorodkin's R_K, as
// sklearn): (c·s − Σ_k p_k·t_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²)), with c correct, s total, t_k and p_k the
// true and predicted counts of class k; 0 when the denominator is 0.
func matthews(yt, yp []int64) float64 {
	tc, pc := map[int64]float64{}, map[int64]float64{}
	var c float64
	for i := range yt {
		tc[yt[i]]++
		pc[yp[i]]++
		if yt[i] == yp[i] {
			c++
		}
	}
	s := float64(len(yt))
	var tp, pp, tt float64
	for k, t := range tc {
		tp += t * pc[k]
		tt += t * t
	}
	for _, p := range pc {
		pp += p * p
	}
	den := (s*s - pp) * (s*s - tt)
	if den == 0 {
		return 0
	}
	return (c*s - tp) / math.Sqrt(den)
}
