package director_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// lateConfig is the default profile with late binding at one chunk: with
// the prior's 20,000 tokens/s, an endpoint starts a request soon when its
// queued prefill drains within 0.41 s. For a 1,000-byte prompt (250
// tokens a waiting request), 20 waiting are soon (0.26 s), 60 within the
// 1.5 s wait bound but not soon (0.77 s), 500 far over the bound.
const lateConfig = config.Default + `
admission:
  lateBinding: {startWithinChunks: 1}
  missBudget: 0
`

// A request that no endpoint would start soon waits in the picker until
// one would, for at most the wait bound, and is then placed; it is to be
// decided again when the queue it waits for is predicted to have drained.
func TestLateBindingHoldsUntilAnEndpointWouldStartSoon(t *testing.T) {
	ctx := context.Background()
	d := newDirector(t, lateConfig, 2, director.Options{})
	req := &scheduling.Request{Model: "m", Prompt: strings.Repeat("a", 1000)}

	setWaiting(d, 20, t0)
	if res, place, err := d.ScheduleQueued(ctx, req, false, t0, nil); err != nil || place != nil || res.Primary == "" {
		t.Fatalf("an endpoint starts it soon: %+v %+v %v, want a pick", res, place, err)
	}
	setWaiting(d, 60, t0)
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
	// Still no endpoint near: held on, with the same deadline.
	if _, again, err := d.ScheduleQueued(ctx, req, false, t0.Add(time.Second), place); err != nil || again != place {
		t.Fatalf("held on: %+v %v", again, err)
	}
	setWaiting(d, 20, t0.Add(1100*time.Millisecond))
	if res, again, err := d.ScheduleQueued(ctx, req, false, t0.Add(1100*time.Millisecond), place); err != nil || again != nil || res.Primary == "" {
		t.Fatalf("an endpoint came near: %+v %+v %v, want a pick", res, again, err)
	}

	// A fleet of its own: the picks above never got their first tokens,
	// and by now would count as waiting too long.
	d = newDirector(t, lateConfig, 2, director.Options{})
	setWaiting(d, 60, t0.Add(2*time.Second))
	_, place, err = d.ScheduleQueued(ctx, req, false, t0.Add(2*time.Second), nil)
	if err != nil || place == nil {
		t.Fatalf("held again: %v", err)
	}
	if res, again, err := d.ScheduleQueued(ctx, req, false, place.Deadline, place); err != nil || again != nil || res.Primary == "" {
		t.Fatalf("at the wait bound: %+v %+v %v, want placed, not shed", res, again, err)
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
	req := &scheduling.Request{Model: "m", Prompt: strings.Repeat("a", 1000)}
	setWaiting(d, 60, t0)
	_, place, err := d.ScheduleQueued(ctx, req, false, t0, nil)
	if err != nil || place == nil {
		t.Fatalf("held: %v", err)
	}
	now := place.RetryBy().Add(time.Millisecond)
	setWaiting(d, 125, now) // 1.6 s of queue: over the bound by less than the queue's wait bound
	res, again, err := d.ScheduleQueued(ctx, req, false, now, place)
	if err != nil || again == nil || res.Reason != director.ReasonQueued {
		t.Fatalf("overloaded while held: %v %+v %v, want waiting in the queue", res.Reason, again, err)
	}
	if again.RetryBy().Before(now) {
		t.Fatalf("to be decided again %v ago", now.Sub(again.RetryBy()))
	}
}

// ScheduleWaiting holds a request late binding holds, deciding it again as
// the queue it waits for is predicted to drain, and places it at the wait
// bound when no endpoint came near.
func TestScheduleWaitingPlacesAHeldRequestAtTheWaitBound(t *testing.T) {
	d := newDirector(t, lateConfig, 1, director.Options{})
	clock := func() time.Time { return time.Now() }
	setWaiting(d, 60, clock())
	start := time.Now()
	res, err := d.ScheduleWaiting(context.Background(), &scheduling.Request{Model: "m", Prompt: strings.Repeat("a", 1000)}, false, clock)
	took := time.Since(start)
	if err != nil || res.Primary == "" {
		t.Fatalf("held to the wait bound: %+v %v, want placed", res, err)
	}
	if took < 1400*time.Millisecond {
		t.Fatalf("placed after %v while no endpoint came near, want the 1.5 s wait bound", took)
	}
	if d.Queued() {
		t.Fatal("the queue still counts the request")
	}
}
