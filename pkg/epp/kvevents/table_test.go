package kvevents

import (
	"math/rand/v2"
	"testing"
)

// TestTableAgainstMap runs random puts and deletes (keys clustered so probe
// runs collide and wrap) against a Go map.
func TestTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tb table[uint32]
	ref := map[uint64]uint32{}
	for step := range 200_000 {
		k := uint64(rng.IntN(5000))
		if rng.IntN(3) == 0 {
			k = 0 // zero is a key like any other
		}
		switch rng.IntN(3) {
		case 0, 1:
			v := rng.Uint32()
			tb.Put(k, v)
			ref[k] = v
		default:
			_, had := ref[k]
			if tb.Delete(k) != had {
				t.Fatalf("step %d: Delete(%d) disagrees with the map", step, k)
			}
			delete(ref, k)
		}
		if step%997 == 0 {
			if tb.Len() != len(ref) {
				t.Fatalf("step %d: %d entries, map has %d", step, tb.Len(), len(ref))
			}
			for k, v := range ref {
				if got, ok := tb.Get(k); !ok || got != v {
					t.Fatalf("step %d: Get(%d) = %d, %v; want %d", step, k, got, ok, v)
				}
			}
			n := 0
			tb.All(func(k uint64, v uint32) {
				if ref[k] != v {
					t.Fatalf("All gave %d=%d", k, v)
				}
				n++
			})
			if n != len(ref) {
				t.Fatalf("All visited %d of %d", n, len(ref))
			}
		}
	}
	tb.Clear()
	if _, ok := tb.Get(1); ok || tb.Len() != 0 {
		t.Fatal("Clear left entries")
	}
}
