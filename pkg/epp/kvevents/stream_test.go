package kvevents

import (
	"testing"
	"time"
)

// fakePublisher numbers batches as vLLM's publisher does and answers replays
// from a buffer of the last `buffer` batches.
type fakePublisher struct {
	batches [][]byte
	buffer  int
	// epoch changes every batch's content after a restart.
	epoch int
}

// publish makes batch seq: one root block of its own.
func (p *fakePublisher) publish() message {
	seq := uint64(len(p.batches))
	payload := encodeEvents([]Event{stored([]uint64{uint64(p.epoch)<<32 | seq}, nil, tokens(16, uint32(p.epoch*1e6)+uint32(seq)*16), "")})
	p.batches = append(p.batches, payload)
	return message{seq: seq, payload: payload}
}

func (p *fakePublisher) restart() { p.batches, p.epoch = nil, p.epoch+1 }

// replay answers a request from start, as vLLM does.
func (p *fakePublisher) replay(s *stream, start uint64, now time.Time) (uint64, bool) {
	for seq := max(0, len(p.batches)-p.buffer); seq < len(p.batches); seq++ {
		if uint64(seq) >= start {
			s.replayBatch(message{seq: uint64(seq), payload: p.batches[seq]})
		}
	}
	return s.replayEnd(now)
}

// serve answers replays until the stream asks no more.
func (p *fakePublisher) serve(s *stream, from uint64, ask bool, now time.Time) {
	for ask {
		from, ask = p.replay(s, from, now)
	}
}

func newTestStream(replay bool) (*stream, *Index, time.Time) {
	x := NewIndex(16)
	cfg := StreamConfig{ReplayPort: 0}.WithDefaults()
	if replay {
		cfg.ReplayPort = 5558
	}
	t0 := time.Unix(1000, 0)
	return newStream("pod", x, cfg, t0), x, t0
}

// connectedStream is a stream with replay that has read its (empty) history.
func connectedStream() (*stream, *fakePublisher, time.Time) {
	s, _, now := newTestStream(true)
	pub := &fakePublisher{buffer: 100}
	from, ask := s.connected(now)
	pub.serve(s, from, ask, now)
	return s, pub, now
}

func expect(t *testing.T, s *stream, state State, blocks int, what string) {
	t.Helper()
	st := s.status()
	if st.State != state || st.Blocks != blocks {
		t.Fatalf("%s: %s (%s) with %d blocks, want %s with %d", what, st.State, st.Reason, st.Blocks, state, blocks)
	}
}

func TestStreamRecoversGapsThroughReplay(t *testing.T) {
	s, x, now := newTestStream(true)
	pub := &fakePublisher{buffer: 4}
	for range 3 {
		pub.publish() // before the subscription: only the replay has them
	}
	from, ask := s.connected(now)
	if !ask || from != 0 {
		t.Fatalf("connect asks %d, %v; want a replay from 0", from, ask)
	}
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 3, "whole history replayed")

	for range 2 {
		s.live(pub.publish(), now)
	}
	expect(t, s, StateExact, 5, "live batches")

	pub.publish() // lost on the way
	from, ask = s.live(pub.publish(), now)
	if !ask || from != 4 {
		t.Fatalf("a gap asks %d, %v; want a replay from the last applied batch, 4", from, ask)
	}
	if x.pods[0].exact.Load() != true {
		t.Fatal("the pod stopped being exact while its gap is being replayed")
	}
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 7, "gap recovered")
	if c := s.status().Counters; c.Gaps != 1 || c.GapsRecovered != 1 || c.GapsLost != 0 {
		t.Fatalf("counters %+v", c)
	}

	for range 6 {
		pub.publish() // more than the buffer holds
	}
	from, ask = s.live(pub.publish(), now)
	pub.serve(s, from, ask, now)
	expect(t, s, StateResyncing, pub.buffer, "a gap beyond the replay buffer drops the history and keeps what the buffer had")
	if c := s.status().Counters; c.GapsLost != 1 {
		t.Fatalf("counters %+v", c)
	}
	from, ask, _ = s.tick(now.Add(s.cfg.ResyncWindow / 2)) // a probe too: the pod was silent
	pub.serve(s, from, ask, now)
	expect(t, s, StateResyncing, pub.buffer, "within the resync window")
	s.tick(now.Add(s.cfg.ResyncWindow))
	expect(t, s, StateExact, pub.buffer, "after the resync window")
}

func TestStreamProbesAndSeesRestarts(t *testing.T) {
	s, _, now := newTestStream(true)
	pub := &fakePublisher{buffer: 100}
	from, ask := s.connected(now)
	pub.serve(s, from, ask, now) // nothing published yet
	expect(t, s, StateExact, 0, "empty history")
	for range 3 {
		s.live(pub.publish(), now)
	}
	// Silent for a probe interval: the probe asks from the last batch and
	// finds the stream unbroken.
	now = now.Add(s.cfg.ProbeInterval)
	from, ask, drop := s.tick(now)
	if !ask || drop || from != 2 {
		t.Fatalf("probe: %d, %v, %v", from, ask, drop)
	}
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 3, "probe answered")

	// The publisher restarts while the pod is idle: the next probe's answer
	// lacks the last batch, so the pod's blocks go and the new history is read.
	pub.restart()
	pub.publish()
	now = now.Add(s.cfg.ProbeInterval)
	from, ask, _ = s.tick(now)
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 1, "restart seen by a probe")
	if s.status().Restarts != 1 {
		t.Fatalf("restarts %d", s.status().Restarts)
	}
	// A restart seen on the live stream: the sequence goes back.
	pub.restart()
	from, ask = s.live(pub.publish(), now)
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 1, "restart seen live")

	// An unanswered probe means the pod is down.
	now = now.Add(s.cfg.ProbeInterval)
	if _, ask, _ := s.tick(now); !ask {
		t.Fatal("no probe")
	}
	if _, _, drop := s.tick(now.Add(s.cfg.ReplayTimeout)); !drop {
		t.Fatal("an unanswered replay did not drop the connection")
	}
	expect(t, s, StateDown, 1, "replay timed out")
	// Reconnected: the replay proves nothing was missed; the blocks stand.
	from, ask = s.connected(now)
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 1, "reconnected")
}

func TestStreamUndecodableBatch(t *testing.T) {
	s, pub, now := connectedStream()
	s.live(pub.publish(), now)
	s.live(message{seq: 1, payload: []byte{0x93, 0xff}}, now)
	expect(t, s, StateResyncing, 0, "undecodable batch")
	if c := s.status().Counters; c.DecodeErrors != 1 {
		t.Fatalf("counters %+v", c)
	}
	pub.publish() // seq 1 in the publisher's numbering
	s.live(pub.publish(), now)
	expect(t, s, StateResyncing, 1, "later batches still apply")
}

func TestStreamWithoutReplay(t *testing.T) {
	s, _, now := newTestStream(false)
	if _, ask := s.connected(now); ask {
		t.Fatal("asked a replay without a replay socket")
	}
	pub := &fakePublisher{buffer: 100}
	s.live(pub.publish(), now)
	expect(t, s, StateExact, 1, "first batch is sequence 0")
	pub.publish()
	s.live(pub.publish(), now)
	expect(t, s, StateResyncing, 1, "an unrecoverable gap")

	s2, _, _ := newTestStream(false)
	s2.connected(now)
	pub.publish()
	s2.live(pub.publish(), now)
	expect(t, s2, StateResyncing, 1, "subscribed mid-stream")
}

// TestStreamLiveBehindReplay: a replay can deliver batches that are still on
// their way over the live socket; when they arrive they are duplicates, not
// a restarted publisher.
func TestStreamLiveBehindReplay(t *testing.T) {
	s, pub, now := connectedStream()
	s.live(pub.publish(), now) // 0
	pub.publish()              // 1: lost
	var late []message
	m2 := pub.publish() // 2: arrives, shows the gap
	for range 3 {
		late = append(late, pub.publish()) // 3..5: the replay has them before the live socket
	}
	from, ask := s.live(m2, now)
	pub.serve(s, from, ask, now)
	expect(t, s, StateExact, 6, "gap recovered")
	for _, m := range late {
		s.live(m, now)
	}
	expect(t, s, StateExact, 6, "late live duplicates")
	if c := s.status().Counters; c.Restarts != 0 || c.Batches != 6 {
		t.Fatalf("counters %+v: duplicates taken for a restart or applied twice", c)
	}
}
