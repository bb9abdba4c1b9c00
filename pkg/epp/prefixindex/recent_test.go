package prefixindex

import (
	"slices"
	"testing"
)

// TestVisitRecentOrder: touched blocks first, then each endpoint's blocks
// newest first (a prefix's leading block before its tail), endpoints in turn;
// a stop from visit ends the walk; evicted and anonymous items never appear.
func TestVisitRecentOrder(t *testing.T) {
	ix := New(4)
	a := Hash(nil, "m", prompt(64*3, "aaaa-"), 64, 0)
	b := Hash(nil, "m", prompt(64*2, "bbbb-"), 64, 0)
	ix.Add(0, a, nil) // ring 0: a2 a1 a0 (a0 newest)
	ix.Add(1, b, nil) // ring 1: b1 b0
	var got []uint64
	ix.VisitRecent(func(h uint64) bool { got = append(got, h); return true })
	if want := []uint64{a[0], b[0], a[1], b[1], a[2]}; !slices.Equal(got, want) {
		t.Fatalf("order %x, want %x", got, want)
	}

	ix.Add(1, b[:1], nil) // touches b0
	got = got[:0]
	ix.VisitRecent(func(h uint64) bool { got = append(got, h); return len(got) < 2 })
	if want := []uint64{b[0], a[0]}; !slices.Equal(got, want) {
		t.Fatalf("touched first, stopped after two: %x, want %x", got, want)
	}

	ix.Consume(0, 3) // ring 0 (capacity 4) fills up: a2 and a1 make room for anonymous items
	got = got[:0]
	ix.VisitRecent(func(h uint64) bool { got = append(got, h); return true })
	slices.Sort(got)
	want := []uint64{a[0], b[0], b[1]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after eviction %x, want %x", got, want)
	}
}
