package prefixindex

import (
	"strconv"
	"strings"
	"testing"
)

func prompt(n int, seed string) string { return strings.Repeat(seed, n/len(seed)+1)[:n] }

func TestHashChainsAndSeeds(t *testing.T) {
	p := prompt(64*4+10, "abcdefgh")
	h := Hash(nil, "m", p, 64, 0)
	if len(h) != 4 {
		t.Fatalf("want 4 full blocks, got %d", len(h))
	}
	// Same block content at different positions must hash differently (chained).
	if h[0] == h[1] {
		t.Fatal("identical blocks at different positions hash equal: not chained")
	}
	if other := Hash(nil, "other-model", p, 64, 0); other[0] == h[0] {
		t.Fatal("hash does not depend on the model seed")
	}
	if got := Hash(nil, "m", p, 64, 2); len(got) != 2 || got[1] != h[1] {
		t.Fatalf("maxBlocks=2 gave %v, want prefix of %v", got, h)
	}
	// A prompt differing only in block 2 shares the first two hashes.
	q := p[:128] + strings.Repeat("z", 64) + p[192:]
	hq := Hash(nil, "m", q, 64, 0)
	if hq[0] != h[0] || hq[1] != h[1] || hq[2] == h[2] || hq[3] == h[3] {
		t.Fatalf("divergence not reflected: %v vs %v", hq, h)
	}
}

func TestMatchLongestConsecutivePrefix(t *testing.T) {
	ix := New(100)
	a := Hash(nil, "m", prompt(640, "systemprompt-"), 64, 0) // 10 blocks
	ix.Add(0, a[:6], nil)
	ix.Add(1, a[:3], nil)
	ix.Add(2, a[5:], nil) // holds later blocks only: no prefix
	matched := make([]int32, 4)
	best, _ := ix.Match(a, matched, nil)
	if best != 6 || matched[0] != 6 || matched[1] != 3 || matched[2] != 0 || matched[3] != 0 {
		t.Fatalf("best=%d matched=%v", best, matched)
	}
}

func TestLRUEvictsOldestAndRefreshKeeps(t *testing.T) {
	ix := New(4)
	p1 := Hash(nil, "m", prompt(128, "one-"), 64, 0)
	p2 := Hash(nil, "m", prompt(128, "two-"), 64, 0)
	p3 := Hash(nil, "m", prompt(128, "three-"), 64, 0)
	ix.Add(0, p1, nil)
	ix.Add(0, p2, nil)
	ix.Add(0, p1, nil) // refresh p1: p2 is now the oldest
	ix.Add(0, p3, nil) // capacity 4 blocks: something must go
	m := make([]int32, 1)
	if ix.Match(p3, m, nil); m[0] != 2 {
		t.Fatalf("newest prefix lost: %v", m)
	}
	m[0] = 0
	if ix.Match(p1, m, nil); m[0] != 2 {
		t.Fatalf("refreshed prefix evicted: %v", m)
	}
	m[0] = 0
	if ix.Match(p2, m, nil); m[0] != 0 {
		t.Fatalf("oldest prefix kept: %v", m)
	}
}

func TestRemoveEndpointAndCapacity(t *testing.T) {
	ix := New(100)
	p := Hash(nil, "m", prompt(64*8, "x-y-"), 64, 0)
	ix.Add(0, p, nil)
	ix.Add(1, p, nil)
	ix.RemoveEndpoint(0)
	m := make([]int32, 2)
	ix.Match(p, m, nil)
	if m[0] != 0 || m[1] != 8 {
		t.Fatalf("after removal: %v", m)
	}
	ix.SetCapacity(1, 3) // keeps the 3 most recent blocks: the leading ones
	m = make([]int32, 2)
	ix.Match(p, m, nil)
	if m[1] != 3 {
		t.Fatalf("shrinking should evict a prefix from its tail, matched %v", m)
	}
	if ix.Blocks() != 3 {
		t.Fatalf("blocks = %d, want 3", ix.Blocks())
	}
	ix.Reset()
	if ix.Blocks() != 0 {
		t.Fatal("reset left blocks")
	}
}

func TestSlotsFromMatchSpareLookupsAndStayCorrect(t *testing.T) {
	ix := New(100)
	p := Hash(nil, "m", prompt(64*6, "abc-"), 64, 0)
	ix.Add(0, p, nil)
	m := make([]int32, 2)
	_, slots := ix.Match(p, m, nil)
	if len(slots) != 6 {
		t.Fatalf("slots %v", slots)
	}
	ix.RemoveEndpoint(0) // slots now point at freed entries
	q := Hash(nil, "m", prompt(64*6, "xyz-"), 64, 0)
	ix.Add(0, q, nil) // reuses the freed entries for other hashes
	ix.Add(1, p, slots)
	m = make([]int32, 2)
	if ix.Match(p, m, nil); m[1] != 6 || m[0] != 0 {
		t.Fatalf("stale slots corrupted the index: %v", m)
	}
	m = make([]int32, 2)
	if ix.Match(q, m, nil); m[0] != 6 || m[1] != 0 {
		t.Fatalf("stale slots corrupted another prefix: %v", m)
	}
}

func FuzzIndex(f *testing.F) {
	f.Add([]byte("abcabcabcabc"), uint8(3), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, block, capacity uint8) {
		bc := int(block%16) + 1
		ix := New(int(capacity%8) + 1)
		h := Hash(nil, "m", string(data), bc, 0)
		for ep := int32(0); ep < 3; ep++ {
			ix.Add(ep, h[:len(h)*int(ep)/3], nil)
		}
		m := make([]int32, 3)
		best, _ := ix.Match(h, m, nil)
		for ep, v := range m {
			if int(v) > best || int(v) > len(h) {
				t.Fatalf("endpoint %d matched %d > best %d / %d", ep, v, best, len(h))
			}
		}
		if ix.Blocks() > 3*(int(capacity%8)+1) {
			t.Fatalf("index exceeds capacity: %d", ix.Blocks())
		}
	})
}

// BenchmarkMemoryPerMillionBlocks reports the index's heap use per million
// distinct blocks (one endpoint each), the figure to size the picker by.
func BenchmarkMemoryPerMillionBlocks(b *testing.B) {
	for range b.N {
		const blocks = 1 << 20
		ix := New(blocks / 8)
		before := heapInUse()
		hashes := make([]uint64, 256)
		for n := 0; n < blocks; n += len(hashes) {
			for i := range hashes {
				hashes[i] = uint64(n+i)*0x9E3779B97F4A7C15 + 1
			}
			ix.Add(int32((n/len(hashes))%8), hashes, nil)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/float64(ix.Blocks())*1e6/(1<<20), "MiB/Mblocks")
		if ix.Blocks() != blocks {
			b.Fatalf("blocks = %d", ix.Blocks())
		}
	}
}

// A prefix sent again and again takes its size in the capacity once, as in
// the server's cache, and stays while colder blocks go.
func TestRepeatedPrefixCountsOnceAndStays(t *testing.T) {
	ix := New(12)
	system := Hash(nil, "m", prompt(64*4, "system-"), 64, 0) // 4 blocks
	m := make([]int32, 1)
	for i := range 20 {
		user := Hash(nil, "m", prompt(64*4, "system-")+prompt(64*2, "user-"+strconv.Itoa(i)+"-"), 64, 0)
		ix.Add(0, user, nil) // the system prompt's 4 blocks plus 2 of its own
		m[0] = 0
		if ix.Match(system, m, nil); m[0] != 4 {
			t.Fatalf("after %d requests the shared system prompt is evicted: matched %d", i+1, m[0])
		}
	}
	if ix.Blocks() > 12 {
		t.Fatalf("index holds %d blocks, capacity 12", ix.Blocks())
	}
	// The 8 other blocks are the 4 latest requests' own: re-sending the
	// system prompt did not use up capacity.
	for i := 16; i < 20; i++ {
		user := Hash(nil, "m", prompt(64*4, "system-")+prompt(64*2, "user-"+strconv.Itoa(i)+"-"), 64, 0)
		m[0] = 0
		if ix.Match(user, m, nil); m[0] != 6 {
			t.Fatalf("request %d's own blocks evicted: matched %d of 6", i, m[0])
		}
	}
}

// Consume stands for cached data the index does not name: it ages the
// prefixes an endpoint holds, oldest first.
func TestConsumeEvictsOldestFirst(t *testing.T) {
	ix := New(6)
	old := Hash(nil, "m", prompt(64*3, "old-"), 64, 0)
	recent := Hash(nil, "m", prompt(64*3, "new-"), 64, 0)
	ix.Add(0, old, nil)
	ix.Add(0, recent, nil)
	ix.Consume(0, 3)
	m := make([]int32, 1)
	if ix.Match(old, m, nil); m[0] != 0 {
		t.Fatalf("oldest prefix survived consumption: matched %d", m[0])
	}
	m[0] = 0
	if ix.Match(recent, m, nil); m[0] != 3 {
		t.Fatalf("recent prefix lost: matched %d", m[0])
	}
	if ix.Blocks() != 3 {
		t.Fatalf("blocks %d, want 3", ix.Blocks())
	}
}
