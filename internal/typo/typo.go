package typo

// Closest returns the candidate nearest to name by Distance when it is close enough to be a typo (at most
// max(2, len(name)/3) edits), else "". Ties go to the earlier candidate.
func Closest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(name)/3) {
		return best
	}
	return ""
}

// Distance is the Levenshtein distance between a and b (bytes), with a swap of two adjacent bytes counting as
// one edit ("lora_aplha" is one edit from "lora_alpha").
func Distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
