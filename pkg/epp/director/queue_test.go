package director_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// queueConfig is the default profile with a queue of two requests or 3,000
// bytes where a request waits up to 1.5 s, the wait bound, and no miss
// budget (it would place requests the queue sheds).
const queueConfig = config.Default + `
admission: {queue: {maxRequests: 2, maxBytes: 3000, maxWaitSeconds: 1.5}, missBudget: 0}
`

// setWaiting gives every endpoint of d a sample with waiting requests at now,
// each counted as a prompt of the request's size. For a 1,000-byte prompt,
// 150 put every endpoint over the 1.5 s wait bound by less than the 1.5 s the
// request may wait in the queue (near the bound: it waits), 500 far over it
// (shed at once); for a 400-byte prompt 500 are near the bound; 0 none.
func setWaiting(d *director.Director, waiting int, now time.Time) {
	for _, k := range keys(d) {
		d.UpdateMetrics(k, datastore.Metrics{Waiting: waiting, KVCacheKnown: true, SampledAt: now}, now)
	}
}

// A request that finds every endpoint overloaded waits in the picker's
// queue and is placed once an endpoint comes within the bounds; past the
// queue's bounds, in requests or bytes, or past its time there, it gets 429
// with Retry-After.
func TestOverloadedRequestsWaitInTheBoundedQueue(t *testing.T) {
	ctx := context.Background()
	d := newDirector(t, queueConfig, 2, director.Options{})
	setWaiting(d, 500, t0)
	first := &scheduling.Request{Model: "m", Prompt: strings.Repeat("a", 1000)}
	if res, place, err := d.ScheduleQueued(ctx, first, false, t0, nil); err == nil || err.Status != 429 || place != nil || res.Reason != director.ReasonShed {
		t.Fatalf("a fleet far over the bounds: %v %+v %v, want 429 without waiting", res.Reason, place, err)
	}
	setWaiting(d, 150, t0)
	res, placeA, err := d.ScheduleQueued(ctx, first, false, t0, nil)
	if err != nil || res.Reason != director.ReasonQueued || placeA == nil || !placeA.Deadline.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("overloaded fleet: %v %+v %v, want queued until +1.5 s", res.Reason, placeA, err)
	}
	// Too many bytes for what is left (2,000 of 3,000 held with this one).
	big := &scheduling.Request{Model: "m", Prompt: strings.Repeat("b", 2500)}
	if res, place, err := d.ScheduleQueued(ctx, big, false, t0, nil); err == nil || err.Status != 429 || place != nil || err.RetryAfterSeconds < 1 {
		t.Fatalf("2,500 bytes beside 1,000 in a 3,000-byte queue: %v %+v %v", res.Reason, place, err)
	}
	second := &scheduling.Request{Model: "m", Prompt: strings.Repeat("c", 1000)}
	_, placeB, err := d.ScheduleQueued(ctx, second, false, t0.Add(100*time.Millisecond), nil)
	if err != nil || placeB == nil {
		t.Fatalf("second request: %v", err)
	}
	third := &scheduling.Request{Model: "m", Prompt: strings.Repeat("d", 1000)}
	if _, place, err := d.ScheduleQueued(ctx, third, false, t0.Add(100*time.Millisecond), nil); err == nil || err.Status != 429 || place != nil {
		t.Fatalf("a third request in a queue of two: %+v %v", place, err)
	}
	// The fleet drains. A newcomer finds the queue full and an endpoint
	// within the bounds: it is placed.
	setWaiting(d, 0, t0.Add(200*time.Millisecond))
	if res, place, err := d.ScheduleQueued(ctx, third, false, t0.Add(200*time.Millisecond), nil); err != nil || place != nil || res.Primary == "" {
		t.Fatalf("a newcomer beside a full queue with an endpoint free: %+v %+v %v", res, place, err)
	}
	res, place, err := d.ScheduleQueued(ctx, first, false, t0.Add(200*time.Millisecond), placeA)
	if err != nil || place != nil || res.Primary == "" {
		t.Fatalf("first waiter once the fleet drained: %+v %+v %v", res, place, err)
	}
	// The fleet is overloaded again and the second waiter's budget runs out.
	setWaiting(d, 150, t0.Add(300*time.Millisecond))
	if _, place, err := d.ScheduleQueued(ctx, second, false, t0.Add(time.Second), placeB); err != nil || place != placeB {
		t.Fatalf("second waiter within its budget: %+v %v", place, err)
	}
	res, place, err = d.ScheduleQueued(ctx, second, false, placeB.Deadline, placeB)
	if err == nil || err.Status != 429 || place != nil || res.Reason != director.ReasonShed {
		t.Fatalf("second waiter at its deadline: %v %+v %v, want 429", res.Reason, place, err)
	}
	if d.Queued() {
		t.Fatal("the queue still counts a request after every one left")
	}
	// Schedule alone never queues.
	if _, err := d.Schedule(ctx, first, false, t0.Add(2*time.Second)); err == nil || err.Status != 429 {
		t.Fatalf("Schedule on an overloaded fleet: %v, want 429", err)
	}
}

// oneBusyEndpoint returns a director over one endpoint that runs a request
// and reports 500 waiting, near the wait bound for a 400-byte prompt, and
// free, which drains the endpoint and ends the running request.
func oneBusyEndpoint(t *testing.T, clock func() time.Time) (d *director.Director, free func()) {
	d = newDirector(t, queueConfig, 1, director.Options{})
	setWaiting(d, 0, clock())
	running := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat("x", 400)}, clock())
	setWaiting(d, 500, clock())
	return d, func() {
		setWaiting(d, 0, clock())
		d.ObserveCompletion(running, 10, clock())
	}
}

// ScheduleWaiting holds the request until a pick ends on an endpoint that
// is then within the bounds, and sheds it at its deadline if none does.
func TestScheduleWaitingWakesWhenAnEndpointFrees(t *testing.T) {
	ctx := context.Background()
	clock := func() time.Time { return time.Now() }
	d, free := oneBusyEndpoint(t, clock)
	type outcome struct {
		res  *director.Result
		code int
		took time.Duration
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := d.ScheduleWaiting(ctx, &scheduling.Request{Model: "m", Prompt: strings.Repeat("y", 400)}, false, clock)
		o := outcome{res: res, took: time.Since(start)}
		if err != nil {
			o.code = err.Status
		}
		done <- o
	}()
	for !d.Queued() {
		select {
		case o := <-done:
			t.Fatalf("not queued on an overloaded fleet: %+v", o)
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case o := <-done:
		t.Fatalf("placed while every endpoint was overloaded: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	o := <-done
	if o.code != 0 || o.res.Primary == "" {
		t.Fatalf("after a pick ended on a drained endpoint: %+v", o)
	}

	setWaiting(d, 500, clock())
	start = time.Now()
	_, err := d.ScheduleWaiting(ctx, &scheduling.Request{Model: "m", Prompt: strings.Repeat("z", 400)}, false, clock)
	if took := time.Since(start); err == nil || err.Status != 429 || took < 1400*time.Millisecond {
		t.Fatalf("never freed: %v after %v, want 429 at the 1.5 s budget", err, took)
	}
}

// An endpoint that frees up after a request decided to wait but before it
// waits still wakes it: the request does not wait out its deadline.
func TestScheduleWaitingMissesNoWakeUpBeforeItWaits(t *testing.T) {
	ctx := context.Background()
	clock := func() time.Time { return time.Now() }
	d, free := oneBusyEndpoint(t, clock)
	var freed bool
	defer director.SetAfterQueuedDecision(func() {
		if !freed {
			freed = true
			free()
		}
	})()
	start := time.Now()
	res, err := d.ScheduleWaiting(ctx, &scheduling.Request{Model: "m", Prompt: strings.Repeat("y", 400)}, false, clock)
	took := time.Since(start)
	if err != nil || res.Primary == "" {
		t.Fatalf("after the endpoint freed up: %v, %+v", err, res)
	}
	if !freed {
		t.Fatal("the request never decided to wait")
	}
	// The queue's budget is 1.5 s; a lost wake-up shows as a wait that long.
	if took > 750*time.Millisecond {
		t.Fatalf("placed after %v: the wake-up before the wait was lost", took)
	}
}
