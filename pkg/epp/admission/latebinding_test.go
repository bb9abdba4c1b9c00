package admission

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// lateBinding is the default policy with late binding at one chunk: with
// the prior's 20,000 tokens/s and 8,192-token chunks, an endpoint starts a
// request soon when its queued prefill drains within 0.41 s.
func lateBinding() (Policy, latency.Model) {
	p := DefaultPolicy
	p.LateBinding.StartWithinChunks = 1
	return p, latency.DefaultModel
}

// longPrompt has more to prefill than a quarter chunk (smallPrefillChunks):
// late binding judges it.
const longPrompt = 4000

func TestStartSecondsIsChunksAtTheFastestRate(t *testing.T) {
	p, m := lateBinding()
	slow, fast := view(0, 0), view(0, 0)
	slow.Speed.PrefillTokensPerSecond, fast.Speed.PrefillTokensPerSecond = 4096, 16384
	if got := p.StartSeconds([]*datastore.View{slow, fast}, m); got != 0.5 {
		t.Errorf("StartSeconds = %v, want 0.5 (one 8,192-token chunk at the fastest 16,384 tokens/s)", got)
	}
}

func TestBind(t *testing.T) {
	p, m := lateBinding()
	idle, queued, overloaded := view(2, 0), view(20, 0), view(100, 0) // 0.11 s, 1.02 s and 5.1 s of prefill queued
	stale := view(0, 0)
	stale.Stale = true
	blocked := view(2, 0) // little queued, but a request has waited there for long
	blocked.OldestWait, blocked.Overdue = time.Second, time.Second
	off := DefaultPolicy
	off.LateBinding.StartWithinChunks = 0
	for _, tc := range []struct {
		name    string
		p       Policy
		cands   []*datastore.View
		mayHold bool
		want    Binding
	}{
		{"off", off, []*datastore.View{queued}, true, NotBound},
		{"an endpoint starts it soon", p, []*datastore.View{queued, idle}, true, StartNow},
		{"every endpoint within the bounds has more queued", p, []*datastore.View{queued, overloaded}, true, Hold},
		{"its time is up: admission's call", p, []*datastore.View{queued, idle}, false, NotBound},
		{"every endpoint over the bounds: admission's call", p, []*datastore.View{overloaded}, true, NotBound},
		{"stale telemetry: admission's call", p, []*datastore.View{queued, stale}, true, NotBound},
		{"a request long in line holds the endpoint back", p, []*datastore.View{blocked}, true, Hold},
	} {
		if got, _ := tc.p.Bind(tc.cands, longPrompt, 0, tc.mayHold, m, nil); got != tc.want {
			t.Errorf("%s: Bind = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A held request is decided again when the soonest endpoint's queue is
// predicted to have drained to the start bound; an endpoint held back by a
// request long in line there comes near only when something frees up.
func TestBindRetriesWhenTheQueueWillHaveDrained(t *testing.T) {
	p, m := lateBinding()
	queued := view(20, 0)
	start := p.StartSeconds([]*datastore.View{queued}, m)
	want := PredictedWait(queued, longPrompt, m) - start
	if b, retry := p.Bind([]*datastore.View{queued}, longPrompt, 0, true, m, nil); b != Hold || math.Abs(retry-want) > 1e-9 || retry <= 0 {
		t.Errorf("Bind = %v, retry %v s; want Hold, retry %v s", b, retry, want)
	}
	blocked := view(2, 0)
	blocked.OldestWait, blocked.Overdue = time.Second, time.Second
	if b, retry := p.Bind([]*datastore.View{blocked}, longPrompt, 0, true, m, nil); b != Hold || !math.IsInf(retry, 1) {
		t.Errorf("held back by a request in line: Bind = %v, retry %v s; want Hold, no retry", b, retry)
	}
}

// The time a request was held counts toward its wait: it is held on only
// while it and the soonest wait within the bounds stay under the wait
// bound, and started soon only where they do.
func TestHeldTimeCountsTowardTheWait(t *testing.T) {
	p, m := lateBinding()                   // wait bound 1.5 s, soon within 0.41 s
	idle, queued := view(2, 0), view(20, 0) // 0.11 s and 1.02 s of prefill queued
	if b, _ := p.Bind([]*datastore.View{queued}, longPrompt, 0.4, true, m, nil); b != Hold {
		t.Errorf("held 0.4 s, 1.02 s of queue: Bind = %v, want Hold", b)
	}
	if b, _ := p.Bind([]*datastore.View{queued}, longPrompt, 0.6, true, m, nil); b != NotBound {
		t.Errorf("held 0.6 s, 1.02 s of queue: Bind = %v, want NotBound (admission's: it could no longer start in time)", b)
	}
	if b, _ := p.Bind([]*datastore.View{idle}, longPrompt, 1.3, true, m, nil); b != StartNow {
		t.Errorf("held 1.3 s, 0.11 s of queue: Bind = %v, want StartNow", b)
	}
	if b, _ := p.Bind([]*datastore.View{idle}, longPrompt, 1.45, true, m, nil); b != NotBound {
		t.Errorf("held 1.45 s, 0.11 s of queue: Bind = %v, want NotBound", b)
	}
}

// A request with less than a quarter chunk to prefill somewhere, a short
// prompt or one cached there but for that, is placed at arrival however
// busy the endpoints are: held, it would only wait.
func TestShortPrefillsAreNotHeld(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel // two chunks, 2,048 tokens short
	queued, busier := view(20, 0), view(40, 0)
	if b, _ := p.Bind([]*datastore.View{queued, busier}, longPrompt, 0, true, m, nil); b != Hold {
		t.Fatalf("a 4,000-token prompt with every endpoint busy: Bind = %v, want Hold", b)
	}
	if b, _ := p.Bind([]*datastore.View{queued, busier}, 2000, 0, true, m, nil); b != NotBound {
		t.Errorf("a 2,000-token prompt: Bind = %v, want NotBound (placed at arrival)", b)
	}
	cachedOnBusier := uncached{queued: longPrompt, busier: 1000}
	if b, _ := p.Bind([]*datastore.View{queued, busier}, longPrompt, 0, true, m, cachedOnBusier); b != NotBound {
		t.Errorf("a 4,000-token prompt with all but 1,000 tokens cached on one endpoint: Bind = %v, want NotBound", b)
	}
}

func TestLateBindingValidate(t *testing.T) {
	for _, tc := range []struct {
		l    LateBinding
		want string
	}{
		{DefaultLateBinding, ""},
		{LateBinding{StartWithinChunks: 2, Room: Room{MaxRequests: 1, MaxBytes: 1}}, ""},
		{LateBinding{StartWithinChunks: -1, Room: Room{MaxRequests: 1, MaxBytes: 1}}, "startWithinChunks must be finite and ≥ 0"},
		{LateBinding{StartWithinChunks: math.Inf(1), Room: Room{MaxRequests: 1, MaxBytes: 1}}, "startWithinChunks must be finite"},
		{LateBinding{StartWithinChunks: 2, Room: Room{MaxBytes: 1}}, "maxRequests and lateBinding.maxBytes must be positive"},
	} {
		err := tc.l.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.l, err, tc.want)
		}
	}
}
