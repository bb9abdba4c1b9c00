package kvevents

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// State is where a pod's event stream stands; only an exact pod's blocks are
// used, every other falls back to the picker's approximate index.
type State string

// Stream states.
const (
	// StateConnecting: no complete history yet (just subscribed, or
	// reconnected and waiting for the replay that proves nothing was missed).
	StateConnecting State = "connecting"
	// StateExact: every batch since the pod's cache was empty has been applied.
	StateExact State = "exact"
	// StateResyncing: history was lost (a gap the replay buffer no longer
	// covers, an undecodable batch, a publisher restart seen late); the pod's
	// blocks were dropped and are being relearned from new events, which
	// cannot show blocks the pod still holds from before. After a resync
	// window without further loss the pod counts as exact again.
	StateResyncing State = "resyncing"
	// StateDown: no connection, or the replay socket stopped answering.
	StateDown State = "down"
)

// States lists every state, for metric series.
var States = []State{StateConnecting, StateExact, StateResyncing, StateDown}

// StreamConfig is how the picker reaches every pod's events.
type StreamConfig struct {
	// EventsPort is the pods' PUB port (vLLM's endpoint tcp://*:PORT).
	EventsPort int
	// ReplayPort is their ROUTER port (replay_endpoint); 0: no replay, so a
	// gap cannot be recovered and a silent pod cannot be told from an idle one.
	ReplayPort int
	// Topic is the subscription prefix ("" takes every topic).
	Topic string
	// BlockSize is the engines' block size in tokens.
	BlockSize int
	// ResyncWindow is how long a pod that lost history stays approximate.
	ResyncWindow time.Duration
	// ProbeInterval: a pod silent this long is asked for a replay from its
	// next sequence, which also recovers batches lost at the stream's tail.
	ProbeInterval time.Duration
	// ReplayTimeout: a replay not answered in this time means the pod is down.
	ReplayTimeout time.Duration
}

// Defaults of StreamConfig.
const (
	DefaultEventsPort    = 5557
	DefaultReplayPort    = 5558
	DefaultBlockSize     = 16
	DefaultResyncWindow  = 60 * time.Second
	DefaultProbeInterval = 2 * time.Second
	DefaultReplayTimeout = 3 * time.Second
	// maxPending bounds the live batches held while a replay is in flight.
	maxPending = 1 << 14
	// maxReplayRounds bounds the replays one gap may take.
	maxReplayRounds = 3
	// recentBatches is how many applied batches are remembered to recognise
	// live duplicates of replayed ones.
	recentBatches = 1024
)

// WithDefaults fills zero durations and sizes.
func (c StreamConfig) WithDefaults() StreamConfig {
	c.BlockSize = cmp.Or(c.BlockSize, DefaultBlockSize)
	c.ResyncWindow = cmp.Or(c.ResyncWindow, DefaultResyncWindow)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	c.ReplayTimeout = cmp.Or(c.ReplayTimeout, DefaultReplayTimeout)
	return c
}

// message is one batch as received: its sequence and msgpack payload.
type message struct {
	seq     uint64
	payload []byte
}

// Counters are a stream's totals since the picker started.
type Counters struct {
	Batches        uint64
	Stored         uint64
	Removed        uint64
	Cleared        uint64
	Orphans        uint64
	Gaps           uint64 // sequence gaps seen
	GapsRecovered  uint64 // ... closed by a replay
	GapsLost       uint64 // ... the replay buffer no longer covered
	Replays        uint64 // replay requests sent (probes included)
	ReplayTimeouts uint64
	DecodeErrors   uint64
	Restarts       uint64 // the publisher's sequence went back: it restarted
	Disconnects    uint64
}

// PodStatus is what /readyz and the metrics show of one stream.
type PodStatus struct {
	Pod    string
	State  State
	Reason string
	Since  time.Time
	// Next is the sequence expected next; Blocks the blocks held.
	Next   uint64
	Blocks int
	Counters
}

// stream is one pod's sequence bookkeeping. It decides; the subscriber does
// the I/O: methods return the sequence to ask a replay from, if any. One
// goroutine drives it; status reads take mu.
//
// Every replay asks from the last applied sequence, not the next: the answer
// must start with that very batch (same bytes) to prove the stream is
// unbroken. An answer without it means the publisher restarted (its
// sequence began again) while the connection was down or the pod was idle.
type stream struct {
	pod    string
	idx    *Index
	cfg    StreamConfig
	dec    Decoder
	canAsk bool // a replay socket is configured
	resync time.Time
	// pending holds live batches that do not continue the sequence yet.
	pending []message
	// replay in flight: from where, since when, what came back
	replaying bool
	replayAt  time.Time
	replayed  []message
	rounds    int
	gapOpen   bool
	lastLive  time.Time
	// lastSum identifies the last applied batch's payload; recent remembers
	// the payloads of the last recentBatches applied, so that a live batch a
	// replay already applied is known for a duplicate, not a restart.
	lastSum uint64
	recent  [recentBatches]struct{ seq, sum uint64 }

	mu     sync.Mutex
	state  State
	reason string
	since  time.Time
	next   uint64
	known  bool // the history before next was seen, or declared lost
	count  Counters
}

func newStream(pod string, idx *Index, cfg StreamConfig, now time.Time) *stream {
	s := &stream{pod: pod, idx: idx, cfg: cfg, canAsk: cfg.ReplayPort != 0}
	s.setState(StateConnecting, "subscribing", now)
	return s
}

func (s *stream) setState(st State, reason string, now time.Time) {
	s.mu.Lock()
	if s.state != st {
		s.since = now
	}
	s.state, s.reason = st, reason
	s.mu.Unlock()
	s.idx.SetExact(s.pod, st == StateExact)
}

func (s *stream) status() PodStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return PodStatus{Pod: s.pod, State: s.state, Reason: s.reason, Since: s.since, Next: s.next,
		Blocks: s.idx.Holds(s.pod), Counters: s.count}
}

func (s *stream) stateNow() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *stream) counted(f func(c *Counters)) {
	s.mu.Lock()
	f(&s.count)
	s.mu.Unlock()
}

// connected starts a (re)subscribed stream: it asks for a replay that shows
// whether anything was missed (from 0 the first time: is the pod's whole
// history still buffered?).
func (s *stream) connected(now time.Time) (uint64, bool) {
	s.lastLive = now
	if !s.canAsk {
		if s.known {
			s.lose("reconnected without a replay socket: batches sent meanwhile are unknown", now)
			s.setNext(s.next, false)
		} else {
			s.setState(StateConnecting, "waiting for the first batch", now)
		}
		return 0, false
	}
	if s.stateNow() != StateResyncing {
		s.setState(StateConnecting, "waiting for the replay of the stream so far", now)
	}
	return s.ask(now), true
}

// ask starts a replay from the last applied batch (0 before any).
func (s *stream) ask(now time.Time) uint64 {
	s.replaying, s.replayAt = true, now
	s.replayed = s.replayed[:0]
	s.counted(func(c *Counters) { c.Replays++ })
	return s.replayStart()
}

func (s *stream) replayStart() uint64 {
	if s.known && s.next > 0 {
		return s.next - 1
	}
	return 0
}

// disconnected records a lost connection; blocks are kept until a replay
// shows whether anything was missed.
func (s *stream) disconnected(reason string, now time.Time) {
	s.replaying = false
	s.counted(func(c *Counters) { c.Disconnects++ })
	s.setState(StateDown, reason, now)
}

// live handles a batch from the PUB socket.
func (s *stream) live(m message, now time.Time) (uint64, bool) {
	s.lastLive = now
	if s.replaying {
		s.hold(m)
		return 0, false
	}
	if !s.known {
		// Without a replay socket the first batch starts the history, or not.
		s.setNext(m.seq, true)
		if m.seq == 0 {
			s.setState(StateExact, "complete since sequence 0", now)
		} else {
			s.lose(fmt.Sprintf("subscribed at sequence %d: earlier batches are unknown", m.seq), now)
		}
	}
	switch {
	case m.seq == s.next:
		s.apply(m, now)
		return 0, false
	case m.seq > s.next:
		s.counted(func(c *Counters) { c.Gaps++ })
		s.gapOpen = true
	default:
		if s.seen(m) {
			// The replay delivered it first: the live stream lags the
			// replay socket, both carry the batch.
			return 0, false
		}
		s.restarted(now)
	}
	s.hold(m)
	if !s.canAsk {
		s.settle(now)
		return 0, false
	}
	s.rounds = 0
	return s.ask(now), true
}

func (s *stream) hold(m message) {
	if len(s.pending) < maxPending {
		s.pending = append(s.pending, m)
	}
}

// restarted handles a publisher whose sequence began again: its cache
// restarted empty, so the pod's blocks go and the history starts at 0.
func (s *stream) restarted(now time.Time) {
	s.counted(func(c *Counters) { c.Restarts++ })
	s.idx.ClearPod(s.pod)
	s.setNext(0, true)
	s.recent = [recentBatches]struct{ seq, sum uint64 }{}
	if s.stateNow() == StateExact {
		s.setState(StateConnecting, "the publisher restarted: waiting for its replay from sequence 0", now)
	}
}

// replayBatch collects one replayed batch.
func (s *stream) replayBatch(m message) {
	if s.replaying && len(s.replayed) < maxPending {
		s.replayed = append(s.replayed, m)
	}
}

// replayEnd handles the replay's end marker.
func (s *stream) replayEnd(now time.Time) (uint64, bool) {
	if !s.replaying {
		return 0, false
	}
	s.replaying = false
	start := s.replayStart()
	if s.known && s.next > 0 {
		// The answer must begin with the batch applied last.
		if len(s.replayed) == 0 || s.replayed[0].seq != start || xxhashSum(s.replayed[0].payload) != s.lastSum {
			if len(s.replayed) == 0 || s.replayed[0].seq <= start {
				s.restarted(now)
				s.rounds = 0
				return s.ask(now), true
			}
			// The buffer starts after it: batches in between are gone.
			s.counted(func(c *Counters) { c.GapsLost++ })
			s.lose(fmt.Sprintf("the replay buffer starts at sequence %d, %d was needed", s.replayed[0].seq, s.next), now)
			s.setNext(s.replayed[0].seq, s.known)
		}
	} else if len(s.replayed) > 0 && s.replayed[0].seq > 0 {
		if !s.known || s.next == 0 {
			s.lose(fmt.Sprintf("the replay buffer starts at sequence %d: earlier batches are gone", s.replayed[0].seq), now)
		}
		s.setNext(s.replayed[0].seq, s.known)
	}
	s.setNext(s.next, true)
	s.pending = append(s.pending, s.replayed...)
	s.replayed = s.replayed[:0]
	if st := s.stateNow(); st == StateConnecting || st == StateDown {
		s.setState(StateExact, fmt.Sprintf("replay confirmed the stream up to sequence %d", s.next), now)
	}
	s.drain(now)
	if len(s.pending) > 0 { // a hole remains: batches dropped after the replay's snapshot
		if s.rounds++; s.rounds < maxReplayRounds {
			return s.ask(now), true
		}
		s.settle(now)
	}
	return 0, false
}

// drain applies held batches that continue the sequence, up to a hole.
func (s *stream) drain(now time.Time) {
	slices.SortFunc(s.pending, func(a, b message) int { return cmp.Compare(a.seq, b.seq) })
	i := 0
	for ; i < len(s.pending); i++ {
		m := s.pending[i]
		if m.seq < s.next {
			continue // applied already (replay and live overlap)
		}
		if m.seq > s.next {
			break
		}
		s.apply(m, now)
	}
	s.pending = append(s.pending[:0], s.pending[i:]...)
	if len(s.pending) == 0 {
		s.rounds = 0
		if s.gapOpen {
			s.gapOpen = false
			s.counted(func(c *Counters) { c.GapsRecovered++ })
		}
	}
}

// settle gives up on holes: the history is lost, the held batches applied.
func (s *stream) settle(now time.Time) {
	for len(s.pending) > 0 {
		first := s.pending[0].seq
		s.counted(func(c *Counters) { c.GapsLost++ })
		s.gapOpen = false
		s.lose(fmt.Sprintf("sequences %d to %d are lost", s.next, first-1), now)
		s.setNext(first, s.known)
		s.drain(now)
	}
}

// lose drops the pod's blocks: what it holds is no longer known.
func (s *stream) lose(reason string, now time.Time) {
	s.idx.ClearPod(s.pod)
	s.resync = now.Add(s.cfg.ResyncWindow)
	s.setState(StateResyncing, reason, now)
}

// setNext changes the sequence bookkeeping, which status reads under mu; the
// driving goroutine, its only writer, reads it without.
func (s *stream) setNext(next uint64, known bool) {
	s.mu.Lock()
	s.next, s.known = next, known
	s.mu.Unlock()
}

// seen reports whether m is a batch applied recently (same sequence, same bytes).
func (s *stream) seen(m message) bool {
	r := s.recent[m.seq%recentBatches]
	return r.seq == m.seq && r.sum == xxhashSum(m.payload) && r.sum != 0
}

// apply applies batch m to the index, then counts it, then moves the stream
// past it: a status that shows the stream past a batch shows it counted
// and its events in the index.
func (s *stream) apply(m message, now time.Time) {
	s.lastSum = xxhashSum(m.payload)
	s.recent[m.seq%recentBatches] = struct{ seq, sum uint64 }{m.seq, s.lastSum}
	batch, err := s.dec.Decode(m.payload)
	if err != nil {
		s.setNext(m.seq+1, s.known)
		s.counted(func(c *Counters) { c.DecodeErrors++ })
		s.lose(fmt.Sprintf("batch %d is undecodable: %v", m.seq, err), now)
		return
	}
	a := s.idx.Apply(s.pod, batch.Events)
	s.counted(func(c *Counters) {
		c.Batches++
		c.Stored += uint64(a.Stored)
		c.Removed += uint64(a.Removed)
		c.Cleared += uint64(a.Cleared)
		c.Orphans += uint64(a.Orphans)
		if a.WrongBlockSize > 0 {
			c.DecodeErrors++
		}
	})
	s.setNext(m.seq+1, s.known)
	if a.WrongBlockSize > 0 {
		s.lose(fmt.Sprintf("batch %d has blocks of another size than the configured %d tokens", m.seq, s.cfg.BlockSize), now)
	}
}

// tick handles time: the end of a resync window, an unanswered replay, a
// silent pod to probe. It returns a replay to ask for, and whether the
// connection must be dropped (the pod is down).
func (s *stream) tick(now time.Time) (from uint64, ask, drop bool) {
	st := s.stateNow()
	if st == StateResyncing && !now.Before(s.resync) {
		s.setState(StateExact, "the resync window passed without loss", now)
	}
	if s.replaying {
		if now.Sub(s.replayAt) >= s.cfg.ReplayTimeout {
			s.counted(func(c *Counters) { c.ReplayTimeouts++ })
			s.disconnected(fmt.Sprintf("the replay socket did not answer in %v", s.cfg.ReplayTimeout), now)
			return 0, false, true
		}
		return 0, false, false
	}
	if s.canAsk && st != StateDown && now.Sub(s.lastLive) >= s.cfg.ProbeInterval {
		s.lastLive = now
		return s.ask(now), true, false
	}
	return 0, false, false
}

func xxhashSum(b []byte) uint64 { return xxhash.Sum64(b) }
