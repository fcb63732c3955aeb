package trainer

import "slices"

// ClassificationMetricNames returns the names of the metrics ClassificationMetrics computes, without the
// "eval_" prefix that Evaluate adds: accuracy, f1 and matthews_correlation.
func ClassificationMetricNames() []string {
	return []string{"accuracy", "f1", "matthews_correlation"}
}

// BestModelMetricNames returns the metrics an evaluation with the default MetricsFunc (ClassificationMetrics)
// reports and metric_for_best_model can name, without the "eval_" prefix: "loss" always, and for a
// classification model ClassificationMetricNames (a regression model reports only the loss). A Trainer given
// another MetricsFunc (WithComputeMetrics) reports that function's names instead.
func BestModelMetricNames(classification bool) []string {
	if !classification {
		return []string{"loss"}
	}
	return slices.Concat([]string{"loss"}, ClassificationMetricNames())
}

// CausalLMMetricNames returns the metrics a causal LM's evaluation reports, without the "eval_" prefix: loss,
// mean_token_accuracy and perplexity (Evaluate). As in transformers, greater_is_better defaults to true for any
// metric but the loss: set it to false to rank checkpoints by perplexity.
func CausalLMMetricNames() []string {
	return []string{"loss", "mean_token_accuracy", "perplexity"}
}
