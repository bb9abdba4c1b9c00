package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/wire"
)

// dial opens a raw connection to the gateway.
func dial(t *testing.T, g *Gateway) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readRaw reads one response from c within timeout.
func readRaw(c net.Conn, timeout time.Duration) (response, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}, err
}

// wantError fails t unless r is an OpenAI error with status and code.
func wantError(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if _, got, _ := openAIError(t, r); r.status != status || got != code {
		t.Errorf("%s: %d %s, want %d %s", what, r.status, got, status, code)
	}
}

// wantRetry is wantError for an answer to a full gateway, which says when to retry.
func wantRetry(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	wantError(t, what, r, status, code)
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("%s: Retry-After %q, want 1", what, r.header.Get("Retry-After"))
	}
}

func TestBindsLoopbackUnlessToldOtherwise(t *testing.T) {
	g := newGateway(t, nil, "--port", "0", "--endpoints-file", endpointsFile(t))
	serveGateway(t, g)
	if host, _, _ := net.SplitHostPort(g.Addr()); host != "127.0.0.1" {
		t.Errorf("listening on %s by default, want loopback", g.Addr())
	}
	g.opts.BindAddress = ""
	if err := g.opts.Validate(); err == nil || !strings.Contains(err.Error(), "--bind-address") {
		t.Errorf("an empty --bind-address passed validation: %v", err)
	}
}

// TestSlowUploadIsCutWith408: a body that does not arrive within the
// body-read timeout, whether its Content-Length is never reached or its
// chunks trickle, is answered 408 and the connection closed; no server sees it.
func TestSlowUploadIsCutWith408(t *testing.T) {
	u := startUpstream(t, "a")
	const timeout = 300 * time.Millisecond
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--body-read-timeout", timeout.String())
	for _, tc := range []struct{ name, framing, first, more string }{
		{"short content-length", "Content-Length: 100\r\n", `{"model":"m",`, ""},
		{"trickling chunks", "Transfer-Encoding: chunked\r\n", "1\r\n{\r\n", "1\r\n \r\n"},
	} {
		c := dial(t, g)
		t0 := time.Now()
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n%s\r\n%s", tc.framing, tc.first)
		stop := make(chan struct{})
		if tc.more != "" {
			go trickle(c, tc.more, 50*time.Millisecond, stop)
		}
		r, err := readRaw(c, 5*time.Second)
		took := time.Since(t0)
		close(stop)
		if err != nil {
			t.Fatalf("%s: no answer: %v", tc.name, err)
		}
		wantError(t, tc.name, r, http.StatusRequestTimeout, "request_timeout")
		if took < timeout || took > timeout+2*time.Second {
			t.Errorf("%s: cut after %v, want just after %v", tc.name, took, timeout)
		}
		if _, err := readRaw(c, 2*time.Second); err == nil {
			t.Errorf("%s: the connection still serves after the 408", tc.name)
		}
	}
	if n := len(u.got()); n != 0 {
		t.Errorf("%d cut uploads reached the server", n)
	}
}

// trickle writes chunk on c every interval until stop closes or a write fails.
func trickle(c net.Conn, chunk string, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
	}
}

// TestStreamOutlivesTheBodyReadTimeout: the body-read deadline ends with the
// body; a response streaming for longer is not cut by it.
func TestStreamOutlivesTheBodyReadTimeout(t *testing.T) {
	u := startUpstream(t, "a")
	u.hold = func(*http.Request) { time.Sleep(600 * time.Millisecond) }
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--body-read-timeout", "150ms")
	r := post(t, g, "/v1/completions", `{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`)
	if r.status != http.StatusOK || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("a stream longer than the body-read timeout: %d %q", r.status, r.body)
	}
}

func TestHeaderAndIdleTimeoutsCloseConnections(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m",
		"--read-header-timeout", "200ms", "--idle-timeout", "300ms")

	slow := dial(t, g)
	t0 := time.Now()
	_, _ = io.WriteString(slow, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\n") // and never the rest
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow.Read(make([]byte, 1)); err != io.EOF || time.Since(t0) > 3*time.Second {
		t.Errorf("headers never finished: read %v after %v, want the connection closed after 200ms", err, time.Since(t0))
	}

	idle := dial(t, g)
	_, _ = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
	if r, err := readRaw(idle, 5*time.Second); err != nil || r.status != http.StatusOK {
		t.Fatalf("healthz: %v %v", r.status, err)
	}
	t0 = time.Now()
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF || time.Since(t0) > 3*time.Second {
		t.Errorf("idle keep-alive connection: read %v after %v, want it closed after 300ms", err, time.Since(t0))
	}
}

// holdStreams starts n streaming requests that the upstream holds after
// their first event until release closes, and waits until all are picked.
func holdStreams(t *testing.T, g *Gateway, u *upstream, n int, release chan struct{}, prompt string) *sync.WaitGroup {
	t.Helper()
	u.mu.Lock()
	u.hold = func(*http.Request) { <-release }
	u.mu.Unlock()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":3,"stream":true}`, prompt)
			if r := post(t, g, "/v1/completions", body); r.status != http.StatusOK {
				t.Errorf("held stream: %d %s", r.status, r.body)
			}
		})
	}
	waitFor(t, "the streams are in flight", func() bool { return inFlight(g, u) == n })
	return &wg
}

func TestConcurrencyCapAnswers429(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--max-concurrent-requests", "2")
	release := make(chan struct{})
	held := holdStreams(t, g, u, 2, release, "hello")
	wantRetry(t, "third request", post(t, g, "/v1/completions", completion), http.StatusTooManyRequests, "too_many_concurrent_requests")
	close(release)
	held.Wait()
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusOK {
		t.Errorf("after the streams ended: %d %s", r.status, r.body)
	}
}

func TestConnectionCapAnswers503(t *testing.T) {
	g := startGateway(t, "--endpoints-file", endpointsFile(t), "--served-model-name", "m", "--max-connections", "2")
	healthz := func(c net.Conn) (response, error) {
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
		return readRaw(c, 5*time.Second)
	}
	first, second := dial(t, g), dial(t, g)
	for _, c := range []net.Conn{first, second} {
		if r, err := healthz(c); err != nil || r.status != http.StatusOK {
			t.Fatalf("a connection within the cap: %d %v", r.status, err)
		}
	}
	third := dial(t, g)
	r, err := healthz(third)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	wantRetry(t, "third connection", r, http.StatusServiceUnavailable, "too_many_connections")
	first.Close()
	waitFor(t, "the closed connection's slot is free", func() bool { return g.OpenConnections() == 1 })
	if r, err := healthz(dial(t, g)); err != nil || r.status != http.StatusOK {
		t.Errorf("a connection after one closed: %d %v", r.status, err)
	}
}

// TestBufferBudgetAnswers503: bodies count twice (body and prompt) against
// --max-buffered-bytes while their requests last; one that does not fit in
// what is left is refused with a 503 and Retry-After, and the budget is
// whole again once requests end. Bodies of unknown length count as they grow.
func TestBufferBudgetAnswers503(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m",
		"--max-body-bytes", "1000", "--max-buffered-bytes", "2000")
	release := make(chan struct{})
	// A 980-byte body takes 1960 of the 2000.
	prompt := strings.Repeat("x", 980-len(`{"model":"m","prompt":"","max_tokens":3,"stream":true}`))
	held := holdStreams(t, g, u, 1, release, prompt)
	if used := g.door.Buffered(); used != 1960 {
		t.Errorf("budget used %d during the held request, want 1960", used)
	}
	wantRetry(t, "a body over what is left", post(t, g, "/v1/completions", completion), http.StatusServiceUnavailable, "buffer_budget_exhausted")
	close(release)
	held.Wait()
	waitFor(t, "the budget is whole", func() bool { return g.door.Buffered() == 0 })

	chunked := func(body string) response {
		// A body of unknown length goes chunked.
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr()+"/v1/completions", io.NopCloser(strings.NewReader(body)))
		req.Header.Set("Content-Type", "application/json")
		return send(t, http.DefaultClient, req)
	}
	if r := chunked(completion); r.status != http.StatusOK {
		t.Errorf("a small chunked body: %d %s", r.status, r.body)
	}
	wantError(t, "a chunked body over the limit", chunked(`{"model":"m","prompt":"`+strings.Repeat("x", 1000)+`"}`),
		http.StatusRequestEntityTooLarge, "request_too_large")
	waitFor(t, "the budget is whole", func() bool { return g.door.Buffered() == 0 })
}

// TestEveryFrontDoorErrorIsOpenAIJSON covers the errors the gateway writes
// that other tests do not: 431, 415, 405, 502 and 504.
func TestEveryFrontDoorErrorIsOpenAIJSON(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--max-header-bytes", "1024")
	wantError(t, "headers over the limit", post(t, g, "/v1/completions", completion, "X-Pad", strings.Repeat("p", 1500)),
		http.StatusRequestHeaderFieldsTooLarge, "request_header_fields_too_large")
	wantError(t, "a text body", post(t, g, "/v1/completions", completion, "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType, "unsupported_media_type")
	wantError(t, "no content type", post(t, g, "/v1/completions", completion, "Content-Type", ""),
		http.StatusUnsupportedMediaType, "unsupported_media_type")
	get, _ := http.NewRequest(http.MethodGet, "http://"+g.Addr()+"/v1/completions", nil)
	wantError(t, "GET on a POST route", send(t, http.DefaultClient, get), http.StatusMethodNotAllowed, "method_not_allowed")
	if n := len(u.got()); n != 0 {
		t.Errorf("the server got %d of these requests", n)
	}

	slow := &upstream{name: "slow"}
	slow.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" {
			time.Sleep(time.Second)
		}
		slow.serve(w, r)
	}))
	t.Cleanup(slow.Close)
	g = startGateway(t, "--endpoints-file", endpointsFile(t, slow), "--served-model-name", "m", "--request-timeout", "200ms")
	wantError(t, "an answer slower than --request-timeout", post(t, g, "/v1/completions", completion),
		http.StatusGatewayTimeout, "upstream_timeout")

	dead := startUpstream(t, "dead")
	dead.Close()
	g = startGateway(t, "--endpoints-file", endpointsFile(t, dead), "--served-model-name", "m")
	wantError(t, "an unreachable server", post(t, g, "/v1/completions", completion), http.StatusBadGateway, "upstream_unavailable")
}

// TestReadyzNeedsALiveEndpoint: /readyz is 503 until an endpoint answers
// its scrapes and again once none does; /healthz stays 200.
func TestReadyzNeedsALiveEndpoint(t *testing.T) {
	get := func(g *Gateway, path string) (int, map[string]any) {
		resp, err := http.Get("http://" + g.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if path == "/readyz" {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, body
	}
	silent := startUpstream(t, "silent") // no metrics
	g := startGateway(t, "--endpoints-file", endpointsFile(t, silent), "--served-model-name", "m", "--scrape-interval", "10ms")
	time.Sleep(100 * time.Millisecond) // several scrapes
	if code, body := get(g, "/readyz"); code != http.StatusServiceUnavailable || body["ready"] != false {
		t.Errorf("only an endpoint without telemetry: readyz %d %v, want 503", code, body)
	}

	u := startUpstream(t, "a")
	u.metrics = "vllm:num_requests_waiting{model_name=\"m\"} 0\nvllm:num_requests_running{model_name=\"m\"} 0\n"
	g = startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--scrape-interval", "10ms")
	waitFor(t, "readyz turns 200", func() bool { code, _ := get(g, "/readyz"); return code == http.StatusOK })
	u.Close()
	waitFor(t, "readyz turns 503 once the endpoint is gone", func() bool {
		code, _ := get(g, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if code, _ := get(g, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz %d, want 200 whatever the endpoints", code)
	}
	g.draining.Store(true)
	if code, body := get(g, "/readyz"); code != http.StatusServiceUnavailable || body["draining"] != true {
		t.Errorf("draining: readyz %d %v, want 503 with draining", code, body)
	}
}

// TestReservedHeadersOnlyFromTrustedSources: loopback has many addresses;
// the gateway trusts 127.0.0.2 alone. From 127.0.0.1 every x-igw-* and
// x-gateway-* header is removed before picking and proxying (no debug
// breakdown, priority -1 not shed); from 127.0.0.2 they are kept and
// x-igw-debug is answered, but only with --allow-debug-header.
func TestReservedHeadersOnlyFromTrustedSources(t *testing.T) {
	u := startUpstream(t, "a")
	u.metrics = "vllm:num_requests_waiting{model_name=\"m\"} 50\nvllm:num_requests_running{model_name=\"m\"} 10\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n"
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--scrape-interval", "10ms",
		"--trusted-cidrs", "127.0.0.2/32", "--allow-debug-header")
	from := func(addr string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	untrusted, trusted := from("127.0.0.1"), from("127.0.0.2")
	reserved := []string{wire.HeaderDebug, "1", wire.HeaderPriority, "-1", wire.HeaderDestinationEndpoint, "10.0.0.1:8000",
		"X-Igw-Anything", "v", wire.HeaderBaseModelName, "other"}

	var r response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r = postVia(t, trusted, g, "/v1/completions", completion, reserved...); r.status == http.StatusTooManyRequests {
			break // the saturated telemetry has landed
		}
	}
	wantError(t, "trusted priority -1 on a saturated fleet", r, http.StatusTooManyRequests, "fleet_saturated")

	r = postVia(t, untrusted, g, "/v1/completions", completion, reserved...)
	if r.status != http.StatusOK {
		t.Fatalf("untrusted client with priority -1: %d %s, want 200 (the priority is not taken)", r.status, r.body)
	}
	if b := r.header.Get(wire.HeaderScoreBreakdown); b != "" {
		t.Errorf("untrusted client got a breakdown: %q", b)
	}
	u.mu.Lock()
	h := u.headers[len(u.headers)-1]
	u.mu.Unlock()
	for name := range h {
		if wire.IsReservedHeader(name) && name != "X-Gateway-Model-Name" {
			t.Errorf("the untrusted client's %s reached the server", name)
		}
	}
	if h.Get(wire.HeaderModelName) != "m" {
		t.Errorf("model header %q at the server, want the gateway's own", h.Get(wire.HeaderModelName))
	}

	r = postVia(t, trusted, g, "/v1/completions", completion, wire.HeaderDebug, "1", "X-Igw-Anything", "v")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get(wire.HeaderScoreBreakdown), "endpoint=") {
		t.Errorf("trusted client with x-igw-debug: %d, breakdown %q", r.status, r.header.Get(wire.HeaderScoreBreakdown))
	}
	u.mu.Lock()
	h = u.headers[len(u.headers)-1]
	u.mu.Unlock()
	if h.Get("X-Igw-Anything") != "v" {
		t.Error("the trusted client's reserved header did not reach the server")
	}

	quiet := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--trusted-cidrs", "127.0.0.2")
	if r := postVia(t, trusted, quiet, "/v1/completions", completion, wire.HeaderDebug, "1"); r.header.Get(wire.HeaderScoreBreakdown) != "" {
		t.Error("x-igw-debug answered without --allow-debug-header")
	}
}
