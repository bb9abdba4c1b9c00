package globalsummary

import (
	"math/rand/v2"
	"testing"
)

func TestDigestSizing(t *testing.T) {
	cases := []struct{ blocks, maxBits, wantBits int }{
		{0, 0, MinDigestBits},
		{100, DefaultMaxDigestBits, 1024},
		{103, DefaultMaxDigestBits, 2048},
		{10000, DefaultMaxDigestBits, 1 << 17},
		{1 << 30, DefaultMaxDigestBits, DefaultMaxDigestBits},
		{1 << 30, 3 << 18, 1 << 19}, // a maximum that is no power of two rounds down
	}
	for _, c := range cases {
		d := NewDigest(128, c.blocks, c.maxBits)
		if got := len(d.Bits) * 8; got != c.wantBits {
			t.Errorf("%d blocks, max %d bits: %d bits, want %d", c.blocks, c.maxBits, got, c.wantBits)
		}
		if err := d.Validate(); err != nil {
			t.Errorf("a new digest is invalid: %v", err)
		}
	}
}

// TestDigestFalsePositives: filled to capacity, the filter answers every
// block it holds and wrongly answers under 1.5% of others (0.8% expected).
func TestDigestFalsePositives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := NewDigest(128, 1<<20, DefaultMaxDigestBits)
	held := make([]uint64, d.Capacity())
	for i := range held {
		held[i] = rng.Uint64()
		d.Add(held[i])
	}
	for _, h := range held {
		if !d.Has(h) {
			t.Fatal("a block put in is missing")
		}
	}
	const probes = 200000
	fp := 0
	for range probes {
		if d.Has(rng.Uint64()) {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 0.015 {
		t.Fatalf("false-positive rate %.4f at capacity (%d blocks in %d bits)", rate, len(held), len(d.Bits)*8)
	} else {
		t.Logf("false-positive rate %.4f at %d blocks in %d bits", rate, len(held), len(d.Bits)*8)
	}
	if d.Blocks < len(held)*99/100 || d.Blocks > len(held) {
		t.Fatalf("counted %d distinct blocks of %d", d.Blocks, len(held))
	}
}

func TestMatchLeadingStopsAtFirstMiss(t *testing.T) {
	d := NewDigest(128, 10, 0)
	for _, h := range []uint64{1, 2, 3, 5} {
		d.Add(h)
	}
	if got := d.MatchLeading([]uint64{1, 2, 3, 4, 5}); got != 3 {
		t.Fatalf("matched %d, want 3", got)
	}
	if got := d.MatchLeading([]uint64{9, 1}); got != 0 {
		t.Fatalf("matched %d, want 0", got)
	}
	if (&Digest{}).Has(1) {
		t.Fatal("an empty filter answered yes")
	}
}
