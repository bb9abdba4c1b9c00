package kvevents

import "time"

// Feed delivers the events of in-process pods (the discrete-event
// benchmark's simulated engines) to the hub's index after Delay, in the
// caller's clock: Publish records a batch at the time the engine produced
// it, Advance applies every batch whose delay has passed, in order. A pod fed
// this way has a complete stream by construction, so it is exact; the hub's
// subscribers leave it alone. Not safe for concurrent use.
type Feed struct {
	hub   *Hub
	Delay time.Duration
	queue []queued
	head  int
}

type queued struct {
	due    time.Time
	pod    string
	events []Event
}

// NewFeed returns a feed into h's index with the given delay.
func (h *Hub) NewFeed(delay time.Duration) *Feed { return &Feed{hub: h, Delay: delay} }

// Publish queues a copy of one batch of pod's events, produced at at.
func (f *Feed) Publish(pod string, at time.Time, events []Event) {
	f.hub.mu.Lock()
	if !f.hub.inProcess[pod] {
		f.hub.inProcess[pod] = true
		f.hub.Index().SetExact(pod, true)
	}
	f.hub.mu.Unlock()
	var nh, nt int
	for i := range events {
		nh += len(events[i].Hashes)
		nt += len(events[i].Tokens)
	}
	hashes, tokens := make([]uint64, 0, nh), make([]uint32, 0, nt)
	cp := make([]Event, len(events))
	for i, ev := range events {
		hashes = append(hashes, ev.Hashes...)
		tokens = append(tokens, ev.Tokens...)
		ev.Hashes = hashes[len(hashes)-len(ev.Hashes):]
		ev.Tokens = tokens[len(tokens)-len(ev.Tokens):]
		cp[i] = ev
	}
	f.queue = append(f.queue, queued{due: at.Add(f.Delay), pod: pod, events: cp})
	if f.Delay == 0 {
		f.Advance(at)
	}
}

// Advance applies every queued batch due at or before now.
func (f *Feed) Advance(now time.Time) {
	idx := f.hub.Index()
	for f.head < len(f.queue) && !f.queue[f.head].due.After(now) {
		q := &f.queue[f.head]
		idx.Apply(q.pod, q.events)
		*q = queued{}
		f.head++
	}
	if f.head > 1024 && f.head*2 > len(f.queue) {
		f.queue = append(f.queue[:0], f.queue[f.head:]...)
		f.head = 0
	}
}

// Pending is the number of batches not yet applied.
func (f *Feed) Pending() int { return len(f.queue) - f.head }
