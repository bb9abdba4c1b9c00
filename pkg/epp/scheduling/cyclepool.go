package scheduling

import (
	"math/rand/v2"
	"sync"
)

// CyclePool keeps a picker's cycles for reuse, so that a pick allocates no
// scratch memory; T is the picker's per-pick state around its Cycle. The zero
// value is ready.
type CyclePool[T any] struct {
	mu      sync.Mutex
	free    []*T
	created uint64
}

// Get returns a kept cycle, or else wraps a new one whose random source is
// seeded with seed and the cycle's creation number, so that runs with one seed
// draw the same numbers.
func (p *CyclePool[T]) Get(seed uint64, wrap func(*Cycle) *T) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		return c
	}
	p.created++
	return wrap(NewCycle(rand.New(rand.NewPCG(seed, p.created))))
}

// Put keeps c for a later Get; the caller has cleared what must not outlive
// its pick.
func (p *CyclePool[T]) Put(c *T) {
	p.mu.Lock()
	p.free = append(p.free, c)
	p.mu.Unlock()
}
