package gateway

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/wire"
)

// TestStreamPassesThroughAsItArrives: the client sees the first event while
// the server still holds the rest back, so nothing is buffered on the way.
func TestStreamPassesThroughAsItArrives(t *testing.T) {
	u := startUpstream(t, "a")
	release := make(chan struct{})
	u.hold = func(*http.Request) { <-release }
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m")

	// The first event arrives while the server holds back the rest.
	lines := bufio.NewScanner(openStream(t, "http://"+g.Addr()))
	close(release)
	var events []string
	for lines.Scan() {
		if l := lines.Text(); l != "" {
			events = append(events, l)
		}
	}
	if len(events) != 4 || events[3] != "data: [DONE]" {
		t.Errorf("rest of the stream %q, want events b, c, usage and [DONE]", events)
	}
}

// TestResponsePathTeachesThePicker: a streamed response reaches the
// director's observations (a prefill sample, decode samples) and ends the
// pick's in-flight accounting.
func TestResponsePathTeachesThePicker(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m")
	if r := post(t, g, "/v1/completions", `{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`); r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	st := g.pools[0].picker.(*eppPicker).d.Store().Get(u.key())
	waitFor(t, "in-flight accounting ends", func() bool { return inFlight(g, u) == 0 })
	if sp := st.Speed(); sp.PrefillSamples != 1 || sp.DecodeSamples < 1 {
		t.Errorf("learned %+v; want one prefill sample (first token) and decode samples (later tokens)", sp)
	}
}

// TestClientLeavingEndsThePick: a client that goes away mid-stream ends the
// pick's accounting, so the endpoint does not look busy forever.
func TestClientLeavingEndsThePick(t *testing.T) {
	u := startUpstream(t, "a")
	left := make(chan struct{})
	u.hold = func(r *http.Request) { <-r.Context().Done(); close(left) }
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.Addr()+"/v1/completions",
		strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bufio.NewScanner(resp.Body).Scan() {
		t.Fatal("no first event")
	}
	if n := inFlight(g, u); n != 1 {
		t.Fatalf("in flight during the stream: %d, want 1", n)
	}
	cancel()
	resp.Body.Close()
	<-left // the server saw the cancellation through the gateway
	waitFor(t, "the abandoned pick ends", func() bool { return inFlight(g, u) == 0 })
}

// TestConnectFailureRetriesOnFallback: an endpoint that refuses connections
// costs no request: the gateway retries on the pick's fallback and moves
// the accounting there.
func TestConnectFailureRetriesOnFallback(t *testing.T) {
	live := startUpstream(t, "live")
	dead := startUpstream(t, "dead")
	dead.Close() // its port now refuses connections
	g := startGateway(t, "--endpoints-file", endpointsFile(t, live, dead), "--served-model-name", "m",
		"--metrics-staleness", "0", "--seed", "3", "--trusted-cidrs", "127.0.0.0/8", "--allow-debug-header")
	rerouted := 0
	for range 20 {
		r := post(t, g, "/v1/completions", completion, wire.HeaderDebug, "1")
		if r.status != http.StatusOK || r.header.Get("x-upstream") != "live" {
			t.Fatalf("status %d from %q: %s", r.status, r.header.Get("x-upstream"), r.body)
		}
		b := r.header.Get(wire.HeaderScoreBreakdown)
		if strings.HasPrefix(b, "endpoint="+dead.key()+";") {
			if !strings.HasSuffix(b, ";rerouted="+live.key()) {
				t.Errorf("breakdown %q names the dead endpoint without the reroute", b)
			}
			rerouted++
		}
	}
	if rerouted == 0 {
		t.Fatal("the dead endpoint was never picked first: the test proves nothing")
	}
	waitFor(t, "accounting ends", func() bool { return inFlight(g, live) == 0 })
	var v datastore.View
	g.pools[0].picker.(*eppPicker).d.Store().Get(dead.key()).View(time.Now(), 0, &v)
	if v.InFlight != 0 {
		t.Errorf("the dead endpoint still counts %d requests in flight", v.InFlight)
	}
}

func TestDebugHeaderExplainsThePick(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m",
		"--trusted-cidrs", "127.0.0.1/32", "--allow-debug-header")
	r := post(t, g, "/v1/completions", completion, wire.HeaderDebug, "1")
	if b := r.header.Get(wire.HeaderScoreBreakdown); !strings.HasPrefix(b, "endpoint="+u.key()+";reason=scored;") || !strings.Contains(b, "predicted-latency=") {
		t.Errorf("breakdown %q, want the endpoint, the reason and each scorer's term", b)
	}
	if r := post(t, g, "/v1/completions", completion); r.header.Get(wire.HeaderScoreBreakdown) != "" {
		t.Error("breakdown sent without x-igw-debug")
	}
}
