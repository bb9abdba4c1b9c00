package sim

import (
	"context"
	"sync"
	"time"
)

// realtime drives an Engine with the wall clock: engine time is wall time since
// start multiplied by the speedup. One goroutine sleeps until the step in flight
// ends; handlers submit and abort under the same mutex. Steps keep their nominal
// engine times however late the goroutine wakes, so lateness delays delivery
// but never accumulates.
type realtime struct {
	mu      sync.Mutex
	eng     *Engine
	origin  time.Time
	speedup float64
	streams map[uint64]*stream
	nextID  uint64
	wake    chan struct{}
	// observe, when set (by tests), sees every event as it is delivered.
	observe func(Event)
}

// stream is what one request's handler waits on; fields are guarded by realtime.mu.
type stream struct {
	tokens int
	done   bool
	finish Event
	// ready holds a wake-up whenever tokens or done changed.
	ready chan struct{}
}

func newRealtime(eng *Engine, speedup float64) *realtime {
	eng.SetTokenEvents(true)
	return &realtime{
		eng:     eng,
		origin:  time.Now(),
		speedup: speedup,
		streams: make(map[uint64]*stream),
		wake:    make(chan struct{}, 1),
	}
}

// engineTime converts a wall-clock instant to engine time.
func (rt *realtime) engineTime(wall time.Time) time.Duration {
	return time.Duration(float64(wall.Sub(rt.origin)) * rt.speedup)
}

// wallTime converts engine time to the wall-clock instant it happens at.
func (rt *realtime) wallTime(t time.Duration) time.Time {
	return rt.origin.Add(time.Duration(float64(t) / rt.speedup))
}

func (rt *realtime) now() time.Duration { return rt.engineTime(time.Now()) }

// run sleeps until each step's end and delivers its events, until ctx ends.
func (rt *realtime) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		rt.mu.Lock()
		rt.advanceLocked(rt.now())
		next, busy := rt.eng.NextEventTime()
		rt.mu.Unlock()
		var due <-chan time.Time
		if busy {
			timer.Reset(time.Until(rt.wallTime(next)))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-rt.wake:
		case <-due:
		}
	}
}

func (rt *realtime) advanceLocked(now time.Duration) {
	for _, ev := range rt.eng.Advance(now) {
		if rt.observe != nil {
			rt.observe(ev)
		}
		st := rt.streams[ev.RequestID]
		if st == nil {
			continue
		}
		switch ev.Kind {
		case EventFirstToken, EventToken:
			st.tokens = ev.Tokens
		case EventFinish, EventFailed:
			st.done, st.finish = true, ev
			delete(rt.streams, ev.RequestID)
		}
		select {
		case st.ready <- struct{}{}:
		default:
		}
	}
}

// submit starts a request now; the engine assigns the ID.
func (rt *realtime) submit(req Request) (uint64, *stream, error) {
	rt.mu.Lock()
	now := rt.now()
	rt.advanceLocked(now)
	rt.nextID++
	req.ID = rt.nextID
	if err := rt.eng.Submit(req, now); err != nil {
		rt.mu.Unlock()
		return 0, nil, err
	}
	st := &stream{ready: make(chan struct{}, 1)}
	rt.streams[req.ID] = st
	rt.mu.Unlock()
	rt.kick()
	return req.ID, st, nil
}

// abort drops a request whose client went away.
func (rt *realtime) abort(id uint64) {
	rt.mu.Lock()
	if _, live := rt.streams[id]; live {
		delete(rt.streams, id)
		rt.eng.Abort(id, max(rt.now(), rt.eng.Now()))
	}
	rt.mu.Unlock()
	rt.kick()
}

// progress returns what a stream has so far.
func (rt *realtime) progress(st *stream) (tokens int, done bool, finish Event) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return st.tokens, st.done, st.finish
}

// snapshot fills s with the engine's state now.
func (rt *realtime) snapshot(s *Snapshot) {
	rt.mu.Lock()
	rt.advanceLocked(rt.now())
	rt.eng.SnapshotInto(s)
	rt.mu.Unlock()
}

func (rt *realtime) kick() {
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

// metricsFault is the metrics fault in force now.
func (rt *realtime) metricsFault() FaultKind {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.eng.MetricsFault(rt.now())
}
