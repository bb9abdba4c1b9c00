package director_test

import (
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

func inFlight(d *director.Director, key string) int {
	var v datastore.View
	d.Store().Get(key).View(t0, 0, &v)
	return v.InFlight
}

// A failed pick ends the endpoint's accounting, before or after its first
// token, and teaches nothing of its timing.
func TestFailureEndsThePickWithoutLearning(t *testing.T) {
	d := newDirector(t, "scorers: [{plugin: queue, weight: 1}]", 1, director.Options{})
	key := keys(d)[0]
	before := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat("x", 4000)}, t0)
	after := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat("y", 4000)}, t0)
	d.ObserveFailure(before, director.Failure{}, t0.Add(time.Second))
	d.ObserveFirstToken(after, t0.Add(time.Second))
	d.ObserveFailure(after, director.Failure{Status: 200}, t0.Add(2*time.Second))
	if n := inFlight(d, key); n != 0 {
		t.Fatalf("%d requests in flight after both failed", n)
	}
	if sp := d.Store().Get(key).Speed(); sp.RequestSamples != 0 || sp.DecodeSamples != 0 {
		t.Fatalf("failures were learned from: %+v", sp)
	}
	if !(director.Failure{}).BeforeFirstByte() || (director.Failure{Status: 503}).BeforeFirstByte() {
		t.Fatal("BeforeFirstByte disagrees with the status")
	}
}

// Reroute fails the pick on the endpoint that could not be reached and
// counts the request, its whole prompt uncached, against the fallback.
func TestRerouteMovesThePickToTheFallback(t *testing.T) {
	d := newDirector(t, "scorers: [{plugin: queue, weight: 1}]\nfallbacks: 1", 2, director.Options{})
	res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat("x", 4000)}, t0)
	moved := d.Reroute(res, director.Failure{}, res.Fallbacks[0], t0)
	if moved == nil || moved.Primary != res.Fallbacks[0] || moved.Request.UncachedTokens != res.Request.PromptTokens {
		t.Fatalf("rerouted pick %+v, want one on %s with the whole prompt uncached", moved, res.Fallbacks[0])
	}
	if inFlight(d, res.Primary) != 0 || inFlight(d, moved.Primary) != 1 {
		t.Fatalf("in flight: %d on the unreachable endpoint, %d on the fallback; want 0 and 1",
			inFlight(d, res.Primary), inFlight(d, moved.Primary))
	}
	d.ObserveCompletion(moved, 10, t0.Add(time.Second))
	if inFlight(d, moved.Primary) != 0 {
		t.Fatal("the rerouted pick did not end")
	}
	if again := d.Reroute(moved, director.Failure{}, "10.9.9.9:8000", t0); again != nil {
		t.Fatalf("rerouted to an endpoint the store does not know: %+v", again)
	}
}
