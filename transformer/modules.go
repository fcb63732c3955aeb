package transformer

import ()

// ModuleProjection is a projection with its module path as transformers names the module
// ("bert.encoder.layer.0.attention.self.query", "bert.pooler.dense", "classifier").
type ModuleProjection struct {
	Path       string     // the module path, without ".weight"
	Projection Projection // the module now in that slot: a *Linear, or what ReplaceProjections put there
}

// ClosestName returns the name in names sharing the longest prefix with want, and among those the one sharing
// the longest suffix (so "layer.9...value" suggests a value projection), for error messages.
func ClosestName(want string, names []string) string {
	common := func(a, b string, fromEnd bool) int {
		k := 0
		for k < len(a) && k < len(b) {
			i, j := k, k
			if fromEnd {
				i, j = len(a)-1-k, len(b)-1-k
			}
			if a[i] != b[j] {
				break
			}
			k++
		}
		return k
	}
	best, bestPre, bestSuf := "", -1, -1
	for _, n := range names {
		pre, suf := common(want, n, false), common(want, n, true)
		if pre > bestPre || (pre == bestPre && suf > bestSuf) {
			best, bestPre, bestSuf = n, pre, suf
		}
	}
	return best
}
