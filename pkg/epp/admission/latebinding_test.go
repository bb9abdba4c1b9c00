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
	for _, tc := range []struct {
		name    string
		p       Policy
		cands   []*datastore.View
		mayHold bool
		want    Binding
	}{
		{"off", DefaultPolicy, []*datastore.View{queued}, true, NotBound},
		{"an endpoint starts it soon", p, []*datastore.View{queued, idle}, true, StartNow},
		{"every endpoint within the bounds has more queued", p, []*datastore.View{queued, overloaded}, true, Hold},
		{"its time is up", p, []*datastore.View{queued, idle}, false, PlaceLate},
		{"every endpoint over the bounds: admission's call", p, []*datastore.View{overloaded}, true, NotBound},
		{"stale telemetry: admission's call", p, []*datastore.View{queued, stale}, true, NotBound},
		{"a request long in line holds the endpoint back", p, []*datastore.View{blocked}, true, Hold},
	} {
		if got, _ := tc.p.Bind(tc.cands, 1000, tc.mayHold, m, nil); got != tc.want {
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
	want := predictedWait(queued, 1000, m) - start
	if b, retry := p.Bind([]*datastore.View{queued}, 1000, true, m, nil); b != Hold || math.Abs(retry-want) > 1e-9 || retry <= 0 {
		t.Errorf("Bind = %v, retry %v s; want Hold, retry %v s", b, retry, want)
	}
	blocked := view(2, 0)
	blocked.OldestWait, blocked.Overdue = time.Second, time.Second
	if b, retry := p.Bind([]*datastore.View{blocked}, 1000, true, m, nil); b != Hold || !math.IsInf(retry, 1) {
		t.Errorf("held back by a request in line: Bind = %v, retry %v s; want Hold, no retry", b, retry)
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
