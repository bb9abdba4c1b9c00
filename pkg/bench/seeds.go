package bench

import (
	"fmt"
	"strings"
)

// Seeds is a run of consecutive seeds, First to First+Count-1. The public
// grid's are 1..N; a held-out check runs others (--first-seed), so that a
// figure is not only one of the seeds it was tuned on.
type Seeds struct {
	First, Count int
}

// FirstN is seeds 1..n.
func FirstN(n int) Seeds { return Seeds{First: 1, Count: n} }

// List is the seeds in order.
func (s Seeds) List() []uint64 {
	out := make([]uint64, 0, max(s.Count, 0))
	for i := range s.Count {
		out = append(out, uint64(s.First+i))
	}
	return out
}

// String is "1..3", or "11" for one seed.
func (s Seeds) String() string {
	if s.Count == 1 {
		return fmt.Sprint(s.First)
	}
	return fmt.Sprintf("%d..%d", s.First, s.First+s.Count-1)
}

// Comma is the seeds listed with commas: "1, 2, 3".
func (s Seeds) Comma() string {
	parts := make([]string, 0, max(s.Count, 0))
	for _, seed := range s.List() {
		parts = append(parts, fmt.Sprint(seed))
	}
	return strings.Join(parts, ", ")
}
