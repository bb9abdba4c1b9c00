package scheduling

import (
	"math/rand/v2"
	"testing"
)

type pooled struct{ *Cycle }

func wrapPooled(c *Cycle) *pooled { return &pooled{Cycle: c} }

// A put cycle comes back rather than a new one; new cycles draw from sources
// seeded with the seed and their creation number, as a fresh pool repeats.
func TestCyclePoolReusesAndSeedsByCreation(t *testing.T) {
	var p CyclePool[pooled]
	first, second := p.Get(42, wrapPooled), p.Get(42, wrapPooled)
	for i, c := range []*pooled{first, second} {
		want := rand.New(rand.NewPCG(42, uint64(i+1))).Uint64()
		if got := c.Rand.Uint64(); got != want {
			t.Fatalf("cycle %d draws %d, want %d: the source of creation number %d", i+1, got, want, i+1)
		}
	}
	p.Put(first)
	if got := p.Get(42, wrapPooled); got != first {
		t.Fatal("Get made a new cycle while one was kept")
	}
	if third := p.Get(42, wrapPooled); third == first || third == second {
		t.Fatal("Get returned a cycle in use")
	}
}
