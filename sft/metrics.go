package sft

import "math"

// TokenAccuracy counts the supervised next-token predictions of a (B, T, V) logits array that equal their label,
// as TRL's mean_token_accuracy does: the arg-max of the logits at t against the label at t+1, over the labels
// that are not −100. mean_token_accuracy is correct/total over an evaluation.
func TokenAccuracy(logits []float32, labels []int64, B, T, V int) (correct, total int) {
	for b := 0; b < B; b++ {
		for t := 0; t+1 < T; t++ {
			l := labels[b*T+t+1]
			if l == IgnoreIndex {
				continue
			}
			row := logits[(b*T+t)*V : (b*T+t+1)*V]
			best := 0
			for v := range row {
				if row[v] > row[best] {
					best = v
				}
			}
			total++
			if int64(best) == l {
				correct++
			}
		}
	}
	return correct, total
}

// Perplexity is exp(loss), the perplexity of a mean token cross-entropy (natural log).
func Perplexity(loss float64) float64 { return math.Exp(loss) }
