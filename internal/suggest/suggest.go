// Package suggest finds the known name an unknown one was probably meant
// to be ("did you mean"), for the configuration's keys and the CLI's
// flags: one edit distance and one tie rule, so both suggest alike.
package suggest

// Closest is the candidate nearest to name by edit distance, if it is
// within maxDist edits; "" otherwise. Of equally near candidates the first
// wins.
func Closest(name string, candidates []string, maxDist int) string {
	best, bestDist := "", maxDist+1
	for _, c := range candidates {
		if d := Distance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// Distance is the Levenshtein distance of a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
