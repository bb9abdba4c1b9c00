package kvevents

import "time"

// Feed delivers the events of in-process pods (the discrete-event
// benchmark's simulated engines) to the hub's index after Delay, in the
// caller's clock: Publish records a batch at the time the engine produced
// it, Lost records a batch the engine dropped, Advance applies every batch
// whose delay has passed, in order. A pod whose batches all arrive is exact;
// a lost batch is what a subscriber sees as a sequence gap its replay cannot
// close, so the pod is handled as a stream that lost history: its blocks are
// dropped and it is scored approximately for the hub's resync window. The
// hub's subscribers leave fed pods alone. Not safe for concurrent use.
type Feed struct {
	hub   *Hub
	Delay time.Duration
	queue []queued
	head  int
	// resyncUntil is, per pod that lost batches, when it counts as exact again.
	resyncUntil map[string]time.Time
}

type queued struct {
	due    time.Time
	pod    string
	events []Event
	lost   bool
}

// NewFeed returns a feed into h's index with the given delay.
func (h *Hub) NewFeed(delay time.Duration) *Feed {
	return &Feed{hub: h, Delay: delay, resyncUntil: map[string]time.Time{}}
}

// Follow marks pod as fed from an empty cache: exact until a batch is lost.
func (f *Feed) Follow(pod string) { f.follow(pod) }

func (f *Feed) follow(pod string) {
	f.hub.mu.Lock()
	defer f.hub.mu.Unlock()
	if !f.hub.inProcess[pod] {
		f.hub.inProcess[pod] = true
		f.hub.Index().SetExact(pod, true)
	}
}

// Publish queues a copy of one batch of pod's events, produced at at.
func (f *Feed) Publish(pod string, at time.Time, events []Event) {
	f.follow(pod)
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

// Lost records that one batch of pod's, produced at at, never arrives; the
// loss is noticed when it would have arrived.
func (f *Feed) Lost(pod string, at time.Time) {
	f.follow(pod)
	f.queue = append(f.queue, queued{due: at.Add(f.Delay), pod: pod, lost: true})
	if f.Delay == 0 {
		f.Advance(at)
	}
}

// Advance applies every queued batch due at or before now, and ends the
// resync windows that passed.
func (f *Feed) Advance(now time.Time) {
	idx := f.hub.Index()
	for pod, until := range f.resyncUntil {
		if !now.Before(until) {
			delete(f.resyncUntil, pod)
			idx.SetExact(pod, true)
		}
	}
	for f.head < len(f.queue) && !f.queue[f.head].due.After(now) {
		q := &f.queue[f.head]
		if q.lost {
			// As a stream that lost history: what the pod holds is unknown,
			// and new events cannot show what it kept from before.
			idx.ClearPod(q.pod)
			idx.SetExact(q.pod, false)
			f.resyncUntil[q.pod] = q.due.Add(f.hub.resyncWindow())
		} else {
			idx.Apply(q.pod, q.events)
		}
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
