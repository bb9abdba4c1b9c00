package director

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// ReasonQueued counts a decision that left the request waiting in the
// picker's queue (it is decided again when an endpoint frees up).
const ReasonQueued = "queued"

// Place is a request's place in the picker's queue: it waits there, its
// body held, for an endpoint to come within the admission bounds, until its
// Deadline, when it is shed (its first token could no longer come in time);
// or, held by late binding (admission.LateBinding), for an endpoint that
// would start it soon, until its Deadline, when it is placed.
type Place struct {
	// Since is when the request entered the queue; Deadline when it must leave.
	Since, Deadline time.Time
	// retry is when a held request is to be decided again (RetryBy).
	retry time.Time
	bytes int64
	kind  placeKind
	q     *waitQueue
}

// placeKind says why a request waits: every endpoint was over the
// admission bounds (overloaded), or none would start it soon (held).
type placeKind int

const (
	overloaded placeKind = iota
	held
)

// Leave gives the place up (a nil place or one left already is a no-op).
func (pl *Place) Leave() {
	if pl == nil || pl.q == nil {
		return
	}
	pl.q.leave(pl.kind, pl.bytes)
	pl.q = nil
}

// mayHold reports whether a request with place pl may be held on by late
// binding at now: it was not held yet, or its deadline has not passed.
func (pl *Place) mayHold(now time.Time) bool {
	return pl == nil || pl.kind == held && now.Before(pl.Deadline)
}

// RetryBy is when the request is to be decided again at the latest: its
// Deadline or, held by late binding, when an endpoint is predicted to come
// near enough to start it.
func (pl *Place) RetryBy() time.Time {
	if !pl.retry.IsZero() && pl.retry.Before(pl.Deadline) {
		return pl.retry
	}
	return pl.Deadline
}

// waitQueue counts the requests waiting in the picker and their bytes, of
// each kind (each kind has its own bounds), and wakes them when an
// endpoint frees up.
type waitQueue struct {
	mu sync.Mutex
	// requests and bytes are per placeKind.
	requests [2]int
	bytes    [2]int64
	// waiting mirrors requests for the response path, which wakes the
	// queue only while someone waits there.
	waiting atomic.Int32
	// freed is closed (and replaced) when an endpoint frees up.
	freed chan struct{}
	// wakeups counts wake calls, so that a request can tell that an
	// endpoint freed up between its decision and its wait (a wake-up that
	// came before it took the freed channel would otherwise be lost, and
	// the request would wait out its deadline with a free endpoint).
	wakeups atomic.Uint64
}

// enter takes a place of kind for a request of bytes at now, within room
// for that kind; nil when it would breach it.
func (q *waitQueue) enter(kind placeKind, bytes int64, room admission.Room, now time.Time, maxWait time.Duration) *Place {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.requests[kind]+1 > room.MaxRequests || q.bytes[kind]+bytes > room.MaxBytes {
		return nil
	}
	q.requests[kind]++
	q.bytes[kind] += bytes
	q.waiting.Store(int32(q.requests[overloaded] + q.requests[held]))
	return &Place{Since: now, Deadline: now.Add(maxWait), bytes: bytes, kind: kind, q: q}
}

func (q *waitQueue) leave(kind placeKind, bytes int64) {
	q.mu.Lock()
	q.requests[kind]--
	q.bytes[kind] -= bytes
	q.waiting.Store(int32(q.requests[overloaded] + q.requests[held]))
	q.mu.Unlock()
}

// occupied reports whether any request waits.
func (q *waitQueue) occupied() bool { return q.waiting.Load() > 0 }

// wake tells the waiting requests an endpoint freed up.
func (q *waitQueue) wake() {
	q.wakeups.Add(1)
	if !q.occupied() {
		return
	}
	q.mu.Lock()
	if q.freed != nil {
		close(q.freed)
		q.freed = nil
	}
	q.mu.Unlock()
}

// wait blocks until an endpoint frees up after the seen'th wake-up, timer
// fires or ctx ends; it returns at once when a wake-up came since seen.
func (q *waitQueue) wait(ctx context.Context, seen uint64, timer <-chan time.Time) {
	q.mu.Lock()
	if q.wakeups.Load() != seen {
		q.mu.Unlock()
		return
	}
	if q.freed == nil {
		q.freed = make(chan struct{})
	}
	freed := q.freed
	q.mu.Unlock()
	select {
	case <-freed:
	case <-timer:
	case <-ctx.Done():
	}
}

// afterQueuedDecision, when set by a test, runs between a request's
// decision to wait and its wait.
var afterQueuedDecision func()

// Queued reports whether a request waits in the picker's queue.
func (d *Director) Queued() bool { return d.queue.occupied() }

// ScheduleQueued is Schedule for a caller that can hold a request while it
// waits in the picker's queue. place is nil on the first call. When every
// endpoint is over the admission bounds, the request has time left to wait
// and the queue has room for it, or late binding holds it (no endpoint
// would start it soon), the result's Reason is ReasonQueued and the
// returned place is the request's: the caller calls again with it when an
// endpoint frees up (ScheduleWaiting) or at its RetryBy time. Otherwise the
// request leaves the queue and the result is Schedule's: a pick, or an
// error (429 when the queue is full or the request waited its time out). A
// request arriving while others wait is decided as they are: the queue
// holds what the fleet cannot take now, it does not hold back what it can.
func (d *Director) ScheduleQueued(ctx context.Context, req *scheduling.Request, explain bool, now time.Time, place *Place) (*Result, *Place, *apierror.Error) {
	res, err := d.schedule(ctx, req, explain, now, place, true)
	if res != nil && res.Reason == ReasonQueued {
		return res, res.place, nil
	}
	if res != nil {
		res.place.Leave()
		res.place = nil
	}
	place.Leave()
	return res, nil, err
}

// ScheduleWaiting schedules req, holding it in the picker's queue while
// every endpoint is overloaded (ScheduleQueued), woken when an endpoint
// frees up and at its deadline; now is the clock (its durations are taken
// as the wall clock's for the deadline's timer).
func (d *Director) ScheduleWaiting(ctx context.Context, req *scheduling.Request, explain bool, now func() time.Time) (*Result, *apierror.Error) {
	var place *Place
	for {
		seen := d.queue.wakeups.Load()
		res, next, err := d.ScheduleQueued(ctx, req, explain, now(), place)
		if next == nil {
			return res, err
		}
		place = next
		if afterQueuedDecision != nil {
			afterQueuedDecision()
		}
		timer := time.NewTimer(place.RetryBy().Sub(now()))
		d.queue.wait(ctx, seen, timer.C)
		timer.Stop()
	}
}

// queueOrShed is the decision for a request that every endpoint is over
// the bounds for: a place in the queue when the decision allows it and
// there is room, else a 429.
func (d *Director) queueOrShed(p *Pipeline, dec admission.Decision, req *scheduling.Request, now time.Time, place *Place, queuing bool) (*Result, *apierror.Error) {
	if queuing && dec.Queue {
		if place == nil {
			place = d.enterQueue(p, req, now)
		}
		if place != nil {
			return &Result{Reason: ReasonQueued, place: place}, nil
		}
		return &Result{Reason: ReasonShed}, apierror.RateLimited(dec.RetryAfterSeconds,
			"every model server is over its load bounds and the picker's queue is full; retry in %d s", dec.RetryAfterSeconds)
	}
	if place != nil {
		return &Result{Reason: ReasonShed}, apierror.RateLimited(dec.RetryAfterSeconds,
			"no model server came within its load bounds in time for the first token; retry in %d s", dec.RetryAfterSeconds)
	}
	return &Result{Reason: ReasonShed}, apierror.RateLimited(dec.RetryAfterSeconds,
		"every model server is saturated; requests of priority %d are shed, retry in %d s", req.Priority, dec.RetryAfterSeconds)
}

// enterQueue takes a place in the queue for req at now, nil when there is no room.
func (d *Director) enterQueue(p *Pipeline, req *scheduling.Request, now time.Time) *Place {
	return d.queue.enter(overloaded, requestBytes(req), p.Admission.Queue.Room, now, seconds(p.Admission.QueueWaitSeconds()))
}

// requestBytes is what the picker holds of a waiting request.
func requestBytes(req *scheduling.Request) int64 { return int64(max(len(req.Body), len(req.Prompt))) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
