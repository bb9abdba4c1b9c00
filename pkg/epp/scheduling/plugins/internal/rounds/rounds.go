// Package rounds is the frame of the pickers that rank by repeated choice:
// each round chooses one more candidate among those not chosen yet.
package rounds

// Pick appends min(n, candidates) distinct indices in [0, candidates) to dst,
// one per round: next is given the indices chosen so far in this call and
// returns one not among them.
func Pick(dst []int, n, candidates int, next func(chosen []int) int) []int {
	n = min(n, candidates)
	base := len(dst)
	for len(dst)-base < n {
		dst = append(dst, next(dst[base:]))
	}
	return dst
}
