package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/wire"
)

const streamedCompletion = `{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`

// retryGateway runs a gateway over ups that explains its picks, so a test
// sees where each request went first.
func retryGateway(t *testing.T, ups []*upstream, args ...string) *Gateway {
	t.Helper()
	return startGateway(t, append([]string{"--endpoints-file", endpointsFile(t, ups...), "--served-model-name", "m",
		"--metrics-staleness", "0", "--seed", "3", "--trusted-cidrs", "127.0.0.0/8", "--allow-debug-header"}, args...)...)
}

// pickedFirst is the endpoint a response's breakdown names as the pick.
func pickedFirst(r response) string {
	b := strings.TrimPrefix(r.header.Get(wire.HeaderScoreBreakdown), "endpoint=")
	first, _, _ := strings.Cut(b, ";")
	return first
}

// TestFailureBeforeFirstByteRetriesOnAnotherPod: a pod that answers a
// server error, resets the connection or sends no first byte in time costs
// the client nothing: the request is retried on the pick's fallback, and
// the failure reaches the failing pod's health, which ejects it.
func TestFailureBeforeFirstByteRetriesOnAnotherPod(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		fault func(u *upstream, released <-chan struct{})
		args  []string
	}{
		{"server error", completion, func(u *upstream, _ <-chan struct{}) { u.status = http.StatusInternalServerError }, nil},
		{"unavailable", streamedCompletion, func(u *upstream, _ <-chan struct{}) { u.status = http.StatusServiceUnavailable }, nil},
		{"reset", completion, func(u *upstream, _ <-chan struct{}) {
			u.before = func(*http.Request) { panic(http.ErrAbortHandler) }
		}, nil},
		{"hang", streamedCompletion, func(u *upstream, released <-chan struct{}) {
			u.before = func(r *http.Request) {
				select {
				case <-r.Context().Done(): // the gateway gave up on it
				case <-released:
				}
			}
		}, []string{"--first-byte-timeout", "200ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, bad := startUpstream(t, "live"), startUpstream(t, "bad")
			released := make(chan struct{})
			t.Cleanup(func() { close(released) }) // before the servers close
			tc.fault(bad, released)
			g := retryGateway(t, []*upstream{live, bad}, tc.args...)
			retried := 0
			for range 12 {
				r := post(t, g, "/v1/completions", tc.body, wire.HeaderDebug, "1")
				if r.status != http.StatusOK || r.header.Get("x-upstream") != "live" {
					t.Fatalf("status %d from %q: %s", r.status, r.header.Get("x-upstream"), r.body)
				}
				if pickedFirst(r) == bad.key() {
					if b := r.header.Get(wire.HeaderScoreBreakdown); !strings.HasSuffix(b, ";rerouted="+live.key()) {
						t.Errorf("breakdown %q names the failing pod without the retry", b)
					}
					retried++
				}
			}
			if retried == 0 || len(bad.got()) == 0 {
				t.Fatal("the failing pod was never picked first: the test proves nothing")
			}
			waitFor(t, "accounting ends", func() bool { return inFlight(g, live) == 0 && inFlight(g, bad) == 0 })
			if st := g.pools[0].picker.(*eppPicker).d.Store().Get(bad.key()); retried >= 3 && !st.Ejected(time.Now()) {
				t.Errorf("%d failures before the first byte did not eject the pod", retried)
			}
		})
	}
}

// TestRetryIsOnce: when the retry fails too, the client gets that failure;
// a third pod is not tried, though the pick had it as a fallback.
func TestRetryIsOnce(t *testing.T) {
	ups := []*upstream{startUpstream(t, "a"), startUpstream(t, "b"), startUpstream(t, "c")}
	for _, u := range ups {
		u.status = http.StatusInternalServerError
	}
	g := retryGateway(t, ups)
	sent := func() int {
		n := 0
		for _, u := range ups {
			n += len(u.got())
		}
		return n
	}
	for i := range 6 {
		before := sent()
		if r := post(t, g, "/v1/completions", completion); r.status != http.StatusInternalServerError {
			t.Fatalf("status %d, want the retry's 500: %s", r.status, r.body)
		}
		// The first pick has both other pods as fallbacks; once pods are
		// ejected, the picker may offer fewer.
		if d := sent() - before; d > 2 || (i == 0 && d != 2) {
			t.Fatalf("request %d reached %d pods, want 2 (the pick and one retry)", i, d)
		}
	}
}

// TestNoRetryAfterTheFirstByte: a stream that breaks after its first event
// reached the client is not retried (the client already has part of an
// answer); it ends broken.
func TestNoRetryAfterTheFirstByte(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	for _, u := range []*upstream{a, b} {
		u.hold = func(*http.Request) { panic(http.ErrAbortHandler) }
	}
	g := retryGateway(t, []*upstream{a, b}, "--first-byte-timeout", "200ms")
	const n = 4
	for range n {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr()+"/v1/completions", strings.NewReader(streamedCompletion))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"text":"a"`) || strings.Contains(string(body), "[DONE]") {
			t.Fatalf("status %d, body %q: want the first event and a broken stream", resp.StatusCode, body)
		}
	}
	if sent := len(a.got()) + len(b.got()); sent != n {
		t.Errorf("the pods saw %d requests for %d client requests: a stream was retried after its first byte", sent, n)
	}
}

// TestSlowAnswerIsNotCut: the first-byte timeout moves a request to another
// pod; with none to go to, or for an answer that is not streamed (it comes
// whole, after the whole generation), the gateway waits for it.
func TestSlowAnswerIsNotCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods int
		body string
	}{
		{"last pod, streamed", 1, streamedCompletion},
		{"not streamed", 2, completion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ups []*upstream
			for i := range tc.pods {
				u := startUpstream(t, fmt.Sprint("slow", i))
				u.before = func(*http.Request) { time.Sleep(300 * time.Millisecond) }
				ups = append(ups, u)
			}
			g := retryGateway(t, ups, "--first-byte-timeout", "50ms")
			if r := post(t, g, "/v1/completions", tc.body, wire.HeaderDebug, "1"); r.status != http.StatusOK ||
				strings.Contains(r.header.Get(wire.HeaderScoreBreakdown), "rerouted") {
				t.Fatalf("status %d, breakdown %q: %s", r.status, r.header.Get(wire.HeaderScoreBreakdown), r.body)
			}
			sent := 0
			for _, u := range ups {
				sent += len(u.got())
			}
			if sent != 1 {
				t.Errorf("the pods saw %d requests, want 1", sent)
			}
		})
	}
}
