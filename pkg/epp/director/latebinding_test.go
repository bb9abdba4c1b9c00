package director_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// lateConfig is the default profile with late binding at one chunk: with
// the prior's 20,000 tokens/s, an endpoint starts a request soon when its
// queued prefill drains within 0.41 s. For a 10,000-byte prompt (2,500
// tokens, more than late binding places at arrival; as many a waiting
// request), 2 waiting are soon (0.26 s), 6 within the 1.5 s wait bound but
// not soon (0.77 s).
// longRequest is a request of 10,000 bytes of c: requests of different c
// share no prefix, which would leave them little to prefill.
func longRequest(c string) *scheduling.Request {
	return &scheduling.Request{Model: "m", Prompt: strings.Repeat(c, 10000)}
}

const lateConfig = config.Default + `
admission:
  lateBinding: {startWithinChunks: 1}
  missBudget: 0
`

// A request that no endpoint would start soon waits in the picker until
// one would, and is then placed; it is to be decided again when the queue
// it waits for is predicted to have drained. The time held counts toward
// its wait: once it could no longer start within the wait bound, it is
// admission's, and shed with no endpoint near.
func TestLateBindingHoldsUntilAnEndpointWouldStartSoon(t *testing.T) {
	ctx := context.Background()
	d := newDirector(t, lateConfig, 2, director.Options{})
	req := longRequest("b")

	setWaiting(d, 2, t0)
	if res, place, err := d.ScheduleQueued(ctx, longRequest("a"), false, t0, nil); err != nil || place != nil || res.Primary == "" {
		t.Fatalf("an endpoint starts it soon: %+v %+v %v, want a pick", res, place, err)
	}
	setWaiting(d, 6, t0)
	res, place, err := d.ScheduleQueued(ctx, req, false, t0, nil)
	if err != nil || res.Reason != director.ReasonQueued || place == nil {
		t.Fatalf("no endpoint starts it soon: %v %+v %v, want held", res.Reason, place, err)
	}
	if !place.Deadline.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Errorf("held until %v, want the 1.5 s wait bound", place.Deadline.Sub(t0))
	}
	if retry := place.RetryBy().Sub(t0); retry < 300*time.Millisecond || retry > 400*time.Millisecond {
		t.Errorf("decided again after %v, want when 0.77 s of queue drains to 0.41 s (0.36 s)", retry)
	}
	// Still no endpoint near, but time to start within the bound: held
	// on, with the same deadline.
	if _, again, err := d.ScheduleQueued(ctx, req, false, t0.Add(300*time.Millisecond), place); err != nil || again != place {
		t.Fatalf("held on: %+v %v", again, err)
	}
	setWaiting(d, 2, t0.Add(400*time.Millisecond))
	if res, again, err := d.ScheduleQueued(ctx, req, false, t0.Add(400*time.Millisecond), place); err != nil || again != nil || res.Primary == "" {
		t.Fatalf("an endpoint came near: %+v %+v %v, want a pick", res, again, err)
	}

	// A fleet of its own: the picks above never got their first tokens,
	// and by now would count as waiting too long.
	d = newDirector(t, lateConfig, 2, director.Options{})
	setWaiting(d, 6, t0.Add(2*time.Second))
	_, place, err = d.ScheduleQueued(ctx, req, false, t0.Add(2*time.Second), nil)
	if err != nil || place == nil {
		t.Fatalf("held again: %v", err)
	}
	// Held 0.8 s with 0.77 s of queue everywhere: its first token could no
	// longer come within the 1.5 s bound.
	if res, again, err := d.ScheduleQueued(ctx, req, false, t0.Add(2800*time.Millisecond), place); err == nil || again != nil || res.Reason != director.ReasonShed {
		t.Fatalf("held past the bound: %+v %+v %v, want shed", res, again, err)
	}
	if d.Queued() {
		t.Fatal("the queue still counts a held request after every one left")
	}
}

// A held request that then finds every endpoint over the bounds is
// admission's: it waits in the overload queue or is shed. Waiting there,
// it is not to be decided again at the time its hold had set, which may
// have passed (a caller would decide it again at once, forever).
func TestHeldRequestOverloadedKeepsNoPastRetry(t *testing.T) {
	ctx := context.Background()
	// The overload queue takes a request for as long as the wait bound.
	d := newDirector(t, lateConfig+"  queue: {maxWaitSeconds: 1.5}\n", 1, director.Options{})
	req := longRequest("a")
	setWaiting(d, 6, t0)
	_, place, err := d.ScheduleQueued(ctx, req, false, t0, nil)
	if err != nil || place == nil {
		t.Fatalf("held: %v", err)
	}
	now := place.RetryBy().Add(time.Millisecond)
	setWaiting(d, 13, now) // 1.6 s of queue: over the bound by less than the queue's wait bound
	res, again, err := d.ScheduleQueued(ctx, req, false, now, place)
	if err != nil || again == nil || res.Reason != director.ReasonQueued {
		t.Fatalf("overloaded while held: %v %+v %v, want waiting in the queue", res.Reason, again, err)
	}
	if again.RetryBy().Before(now) {
		t.Fatalf("to be decided again %v ago", now.Sub(again.RetryBy()))
	}
}

// ScheduleWaiting holds a request late binding holds, deciding it again as
// the queue it waits for is predicted to drain, until it could no longer
// start within the wait bound; with no endpoint near by then, it is shed.
func TestScheduleWaitingHoldsARequestWhileItCanStartInTime(t *testing.T) {
	d := newDirector(t, lateConfig, 1, director.Options{})
	clock := func() time.Time { return time.Now() }
	setWaiting(d, 6, clock())
	start := time.Now()
	res, err := d.ScheduleWaiting(context.Background(), longRequest("a"), false, clock)
	took := time.Since(start)
	if err == nil || res.Reason != director.ReasonShed {
		t.Fatalf("held with 0.77 s of queue ahead that never drains: %+v %v, want shed", res, err)
	}
	if took < 600*time.Millisecond {
		t.Fatalf("shed after %v, want held until 0.77 s of queue and the time held reach the 1.5 s bound (0.73 s)", took)
	}
	if d.Queued() {
		t.Fatal("the queue still counts the request")
	}
}

// Placed where it starts soon, a request keeps the profile's fallbacks: the
// endpoints that would start it later follow, soonest first, so that a
// destination failing before the first byte still leaves somewhere to go.
func TestStartingSoonKeepsFallbacks(t *testing.T) {
	d := newDirector(t, lateConfig, 3, director.Options{})
	ks := keys(d)
	for i, waiting := range []int{5, 0, 3} { // 0.64 s, none and 0.38 s queued: only the second and third start soon
		d.UpdateMetrics(ks[i], datastore.Metrics{Waiting: waiting, KVCacheKnown: true, SampledAt: t0}, t0)
	}
	res, place, err := d.ScheduleQueued(context.Background(), longRequest("a"), false, t0, nil)
	if err != nil || place != nil {
		t.Fatalf("%+v %v, want a pick", place, err)
	}
	if res.Primary != ks[1] || !slices.Equal(res.Fallbacks, []string{ks[2], ks[0]}) {
		t.Errorf("picked %s then %v, want %s then %v", res.Primary, res.Fallbacks, ks[1], []string{ks[2], ks[0]})
	}
}
