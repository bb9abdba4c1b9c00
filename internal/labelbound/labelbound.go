// Package labelbound bounds the distinct values of a metric label that
// clients choose (a model name read from the request): an unbounded label
// would let them grow the metric's series without limit.
package labelbound

import "sync"

// Other is the label of every value seen after the bound.
const Other = "__other__"

// Set admits the first max distinct values as labels; it is safe for
// concurrent use.
type Set struct {
	max  int
	mu   sync.Mutex
	seen map[string]struct{}
}

// New returns a set admitting max values.
func New(max int) *Set { return &Set{max: max, seen: map[string]struct{}{}} }

// Label returns v when v was admitted (now or before), Other once max other
// values were.
func (s *Set) Label(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return Other
	}
	s.seen[v] = struct{}{}
	return v
}
