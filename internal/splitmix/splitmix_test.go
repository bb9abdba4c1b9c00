package splitmix

import "testing"

// The reference SplitMix64 sequence from seed 0, and a copied state replays
// what follows.
func TestReferenceSequenceAndReplay(t *testing.T) {
	var s Source
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := s.Next(); got != want {
			t.Fatalf("draw %d from seed 0: %#x, want %#x", i, got, want)
		}
	}
	replay := s
	for range 10 {
		if a, b := s.Next(), replay.Next(); a != b {
			t.Fatalf("copied state drew %#x, original %#x", b, a)
		}
	}
}
