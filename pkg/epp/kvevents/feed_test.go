package kvevents

import (
	"testing"
	"time"
)

// A fed pod is exact once its batches arrive, after the delay; a lost batch,
// once it would have arrived, drops the pod's blocks and makes it approximate
// (-1) for the resync window, during which new batches are learned; then it
// is exact again with what it learned.
func TestFeedDelaysBatchesAndLostBatchResyncs(t *testing.T) {
	h := NewHub(nil)
	h.Configure(StreamConfig{EventsPort: 1, ResyncWindow: 10 * time.Second})
	f := h.NewFeed(5 * time.Millisecond)
	const pod = "10.0.0.1:8000"
	t0 := time.Unix(1000, 0)
	first, second := tokens(32, 100), tokens(32, 900)
	match := func(toks []uint32) int32 {
		out, _ := h.Index().MatchPrompt(Seed(""), toks, 0, []string{pod}, nil, nil)
		return out[0]
	}
	f.Follow(pod)
	f.Publish(pod, t0, []Event{stored([]uint64{1, 2}, nil, first, "")})
	if f.Advance(t0.Add(4 * time.Millisecond)); match(first) != 0 {
		t.Fatalf("before the delay: matched %d blocks, want 0 (exact, empty)", match(first))
	}
	if f.Advance(t0.Add(5 * time.Millisecond)); match(first) != 2 {
		t.Fatalf("after the delay: matched %d blocks, want 2", match(first))
	}
	lostAt := t0.Add(time.Second)
	f.Lost(pod, lostAt)
	f.Publish(pod, lostAt.Add(time.Millisecond), []Event{stored([]uint64{3, 4}, nil, second, "")})
	if f.Advance(lostAt.Add(4 * time.Millisecond)); match(first) != 2 {
		t.Fatalf("before the loss is noticed: matched %d, want 2", match(first))
	}
	if f.Advance(lostAt.Add(10 * time.Millisecond)); match(first) != -1 || match(second) != -1 {
		t.Fatalf("resyncing: matched %d and %d, want -1 (approximate)", match(first), match(second))
	}
	if f.Advance(lostAt.Add(5*time.Millisecond + 10*time.Second)); match(first) != 0 || match(second) != 2 {
		t.Fatalf("after the resync window: matched %d and %d, want 0 (dropped) and 2 (learned)", match(first), match(second))
	}
	if f.Pending() != 0 {
		t.Fatalf("%d batches pending", f.Pending())
	}
}
