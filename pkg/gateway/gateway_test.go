package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/wire"
)

// upstream is a fake model server: it names itself in x-upstream, counts
// its requests and answers completions (streamed or not) with usage. hold,
// when set, is called between the first and the remaining events.
type upstream struct {
	*httptest.Server
	name    string
	metrics string // the /metrics body; empty: 404
	models  string // the /v1/models body; empty: 404

	modelReads atomic.Int64

	mu       sync.Mutex
	requests []map[string]any
	hold     func(r *http.Request)
	// status, when set, is the answer to every request, with an error body.
	status int
}

func startUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	u := &upstream{name: name}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) endpoint() string {
	_, port, _ := net.SplitHostPort(u.Listener.Addr().String())
	return fmt.Sprintf("{address: 127.0.0.1, port: %s, labels: {name: %s}}", port, u.name)
}

func (u *upstream) key() string { return u.Listener.Addr().String() }

func (u *upstream) got() []map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]map[string]any(nil), u.requests...)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == wire.ModelsPath && r.Method == http.MethodGet {
		u.modelReads.Add(1)
		if u.models == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, u.models)
		return
	}
	if r.URL.Path == "/metrics" {
		if u.metrics == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, u.metrics)
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	body["_model_header"] = r.Header.Get(wire.HeaderModelName)
	body["_base_header"] = r.Header.Get(wire.HeaderBaseModelName)
	u.mu.Lock()
	u.requests = append(u.requests, body)
	hold, status := u.hold, u.status
	u.mu.Unlock()
	w.Header().Set("x-upstream", u.name)
	if status != 0 {
		http.Error(w, `{"error":{"message":"failing on purpose"}}`, status)
		return
	}
	if stream, _ := body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"abc"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(text string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":%q}]}\n\n", text)
		w.(http.Flusher).Flush()
	}
	event("a")
	if hold != nil {
		hold(r)
	}
	event("b")
	event("c")
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3,\"total_tokens\":6}}\n\ndata: [DONE]\n\n")
}

// startGateway runs a gateway from command-line flags until the test ends.
func startGateway(t *testing.T, args ...string) *Gateway {
	t.Helper()
	return startGatewayWith(t, nil, args...)
}

// startGatewayWith runs a gateway that knows the policies of reg besides igw.
func startGatewayWith(t *testing.T, reg *Registry, args ...string) *Gateway {
	t.Helper()
	o := NewOptions()
	o.Policies = reg
	fs := pflag.NewFlagSet("igw-gateway", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(append([]string{"--port", "0", "--bind-address", "127.0.0.1"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("gateway did not start: %v", err)
	}
	return g
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func endpointsFile(t *testing.T, ups ...*upstream) string {
	t.Helper()
	var b strings.Builder
	for _, u := range ups {
		b.WriteString("- " + u.endpoint() + "\n")
	}
	if len(ups) == 0 {
		b.WriteString("[]\n")
	}
	return writeFile(t, "endpoints.yaml", b.String())
}

type response struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, g *Gateway, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+g.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// openAIError decodes the OpenAI error shape, failing the test on any other shape.
func openAIError(t *testing.T, r response) (typ, code, param string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == nil || e.Error.Message == "" {
		t.Fatalf("not an OpenAI error (status %d): %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error content type %q, want application/json", ct)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Type, code, param
}

const completion = `{"model":"m","prompt":"hello","max_tokens":3}`

func TestRoutesByModelAcrossPools(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("- "+a.endpoint()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("- "+b.endpoint()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(`
pools:
- {name: llama, models: [llama], endpointsFile: a.yaml}
- {name: qwen, models: [qwen, qwen-alias], adapters: {sql-lora: qwen}, endpointsFile: b.yaml}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "--config", cfg)

	for _, tc := range []struct{ model, upstream, base string }{
		{"llama", "a", ""}, {"qwen", "b", ""}, {"qwen-alias", "b", ""}, {"sql-lora", "b", "qwen"},
	} {
		r := post(t, g, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":3}`, tc.model))
		if r.status != http.StatusOK || r.header.Get("x-upstream") != tc.upstream {
			t.Errorf("model %s: status %d from %q, want 200 from %s: %s", tc.model, r.status, r.header.Get("x-upstream"), tc.upstream, r.body)
		}
	}
	last := b.got()[len(b.got())-1]
	if last["_model_header"] != "sql-lora" || last["_base_header"] != "qwen" || last["model"] != "sql-lora" {
		t.Errorf("adapter request reached the server as %v; want the body unchanged and the BBR's model and base-model headers", last)
	}

	r := post(t, g, "/v1/chat/completions", `{"model":"gpt-unknown","messages":[]}`)
	if typ, code, param := openAIError(t, r); r.status != http.StatusNotFound || typ != "invalid_request_error" || code != "model_not_found" || param != "model" {
		t.Errorf("unknown model: %d %s %s %s, want 404 invalid_request_error model_not_found model", r.status, typ, code, param)
	}
	if n := len(a.got()) + len(b.got()); n != 4 {
		t.Errorf("servers got %d requests, want 4: the unknown model must not reach one", n)
	}

	resp, err := http.Get("http://" + g.Addr() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string
		Data   []struct {
			ID     string  `json:"id"`
			Object string  `json:"object"`
			Parent *string `json:"parent"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		id := m.ID
		if m.Parent != nil {
			id += "<" + *m.Parent
		}
		ids = append(ids, id)
	}
	if got := strings.Join(ids, ","); list.Object != "list" || got != "llama,qwen,qwen-alias,sql-lora<qwen" {
		t.Errorf("/v1/models: object %q, models %s; want list of llama,qwen,qwen-alias,sql-lora<qwen", list.Object, got)
	}
	r = post(t, g, "/v1/models", `{"model":"llama"}`)
	if _, code, _ := openAIError(t, r); r.status != http.StatusMethodNotAllowed || code != "method_not_allowed" || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /v1/models: %d %s (Allow %q), want the OpenAI-style 405", r.status, code, r.header.Get("Allow"))
	}
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--max-body-bytes", "1000")
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed JSON", `{"model":"m",`, 400, "invalid_json"},
		{"no model", `{"prompt":"x"}`, 400, "missing_model"},
		{"model not a string", `{"model":7}`, 400, "invalid_type"},
		{"too large", `{"model":"m","prompt":"` + strings.Repeat("x", 2000) + `"}`, 413, "request_too_large"},
	} {
		r := post(t, g, "/v1/completions", tc.body)
		if _, code, _ := openAIError(t, r); r.status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, code, tc.status, tc.code)
		}
	}
	if n := len(u.got()); n != 0 {
		t.Errorf("%d bad requests reached the server", n)
	}
}

func TestNoEndpointIs503(t *testing.T) {
	g := startGateway(t, "--endpoints-file", endpointsFile(t), "--served-model-name", "m")
	r := post(t, g, "/v1/completions", completion)
	if typ, code, _ := openAIError(t, r); r.status != http.StatusServiceUnavailable || typ != "server_error" || code != "no_healthy_upstream" {
		t.Errorf("no endpoints: %d %s %s, want 503 server_error no_healthy_upstream", r.status, typ, code)
	}
}

// TestSaturatedFleetSheds429: when telemetry shows every server's queue over
// the admission threshold, low-priority requests are shed with a 429 and a
// Retry-After, while default-priority ones still go through.
func TestSaturatedFleetSheds429(t *testing.T) {
	u := startUpstream(t, "a")
	u.metrics = "vllm:num_requests_waiting{model_name=\"m\"} 50\nvllm:num_requests_running{model_name=\"m\"} 10\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n"
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--scrape-interval", "10ms")
	var r response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if r = post(t, g, "/v1/completions", completion, wire.HeaderPriority, "-1"); r.status == http.StatusTooManyRequests {
			break
		}
		time.Sleep(10 * time.Millisecond) // until the first scrape lands
	}
	if typ, code, _ := openAIError(t, r); r.status != http.StatusTooManyRequests || typ != "rate_limit_exceeded" || code != "fleet_saturated" {
		t.Fatalf("saturated fleet, priority -1: %d %s %s, want 429 rate_limit_exceeded fleet_saturated", r.status, typ, code)
	}
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
	}
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusOK {
		t.Errorf("default priority on a saturated fleet: %d, want 200 (only priorities below 0 are shed)", r.status)
	}
}

// TestStreamPassesThroughAsItArrives: the client sees the first event while
// the server still holds the rest back, so nothing is buffered on the way.
func TestStreamPassesThroughAsItArrives(t *testing.T) {
	u := startUpstream(t, "a")
	release := make(chan struct{})
	u.hold = func(*http.Request) { <-release }
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m")

	req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr()+"/v1/completions",
		strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"text":"a"`) {
		t.Fatalf("first line %q, want the first event before the server sends the rest", lines.Text())
	}
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
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
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

func inFlight(g *Gateway, u *upstream) int {
	var v datastore.View
	g.pools[0].picker.(*eppPicker).d.Store().Get(u.key()).View(time.Now(), 0, &v)
	return v.InFlight
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
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
		"--metrics-staleness", "0", "--seed", "3")
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
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m")
	r := post(t, g, "/v1/completions", completion, wire.HeaderDebug, "1")
	if b := r.header.Get(wire.HeaderScoreBreakdown); !strings.HasPrefix(b, "endpoint="+u.key()+";reason=scored;") || !strings.Contains(b, "predicted-latency=") {
		t.Errorf("breakdown %q, want the endpoint, the reason and each scorer's term", b)
	}
	if r := post(t, g, "/v1/completions", completion); r.header.Get(wire.HeaderScoreBreakdown) != "" {
		t.Error("breakdown sent without x-igw-debug")
	}
}

// An adapter registered on one server only must not be sent to the other:
// the igw policy reads each server's model list and keeps adapter requests
// on the servers that list the adapter.
func TestAdapterGoesToServerThatListsIt(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	a.models = `{"object":"list","data":[{"id":"m","object":"model"}]}`
	b.models = `{"object":"list","data":[{"id":"m","object":"model"},{"id":"sql","object":"model","parent":"m"}]}`
	g := startGateway(t, "--endpoints-file", endpointsFile(t, a, b), "--served-model-name", "m", "--adapter", "sql=m",
		"--models-interval", "20ms")
	// A second read of each list means the first one was stored.
	deadline := time.Now().Add(10 * time.Second)
	for a.modelReads.Load() < 2 || b.modelReads.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("model lists read %d and %d times, want 2 each", a.modelReads.Load(), b.modelReads.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 8 {
		r := post(t, g, "/v1/completions", `{"model":"sql","prompt":"hello","max_tokens":3}`)
		if r.status != http.StatusOK || r.header.Get("x-upstream") != "b" {
			t.Fatalf("adapter request %d: status %d from %q, want 200 from b", i, r.status, r.header.Get("x-upstream"))
		}
	}
	// The base model still spreads over both servers.
	seen := map[string]bool{}
	for range 32 {
		seen[post(t, g, "/v1/completions", completion).header.Get("x-upstream")] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Errorf("base model requests reached %v, want both servers", seen)
	}
}

func TestUnknownPathIsOpenAI404(t *testing.T) {
	g := startGateway(t, "--endpoints-file", endpointsFile(t), "--served-model-name", "m")
	r := post(t, g, "/v1/images/generations", completion)
	if _, code, _ := openAIError(t, r); r.status != 404 || code != "unknown_url" {
		t.Errorf("unknown path: %d %s", r.status, code)
	}
}

// recorder is a registered policy's picker that sends every request to the
// pool's first endpoint and records the lifecycle the gateway reports.
type recorder struct {
	store *datastore.Store
	mu    sync.Mutex
	log   []string
}

func (r *recorder) record(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, a...))
}

// ended reports whether the latest pick recorded has ended.
func (r *recorder) ended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.log)
	return n > 0 && (strings.HasPrefix(r.log[n-1], "completion") || strings.HasPrefix(r.log[n-1], "failure"))
}

// take returns what was recorded so far and starts again.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}

func (r *recorder) Resolve(model, _ string) (string, string) { return model, "" }

func (r *recorder) Pick(_ context.Context, _ *scheduling.Request, _ bool, _ time.Time) (*Pick, *apierror.Error) {
	eps := r.store.Endpoints(nil)
	if len(eps) == 0 {
		return nil, apierror.Unavailable("no endpoints")
	}
	r.record("pick")
	return &Pick{Endpoint: eps[0].Key()}, nil
}

func (r *recorder) Reroute(*Pick, string, time.Time)          { r.record("reroute") }
func (r *recorder) ObserveFirstToken(*Pick, time.Time)        { r.record("first token") }
func (r *recorder) ObserveTokens(_ *Pick, n int, _ time.Time) { r.record("tokens %d", n) }
func (r *recorder) ObserveCompletion(_ *Pick, out int, _ time.Time) {
	r.record("completion %d", out)
}
func (r *recorder) ObserveFailure(_ *Pick, f director.Failure, _ time.Time) {
	r.record("failure %d", f.Status)
}
func (r *recorder) UpdateMetrics(string, datastore.Metrics, time.Time) bool { return true }

// TestRegisteredPolicyFollowsThePickLifecycle: a policy registered besides
// igw serves a pool, and the gateway reports every pick's life to it: first
// token, later tokens and completion with the usage for a whole stream; a
// failure with the status for an error answer, and with none for a server
// that cannot be reached.
func TestRegisteredPolicyFollowsThePickLifecycle(t *testing.T) {
	var rec *recorder
	reg := NewRegistry()
	if err := reg.Register("first", Policy{New: func(env PolicyEnv) (Picker, error) {
		rec = &recorder{store: env.Store}
		return rec, nil
	}}); err != nil {
		t.Fatal(err)
	}
	u := startUpstream(t, "a")
	g := startGatewayWith(t, reg, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--policy", "first")
	lifecycle := func(what string, want ...string) {
		t.Helper()
		waitFor(t, what+" ends its pick", rec.ended)
		if got := rec.take(); strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Fatalf("%s: lifecycle %q, want %q", what, got, want)
		}
	}

	if r := post(t, g, "/v1/completions", `{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`); r.status != http.StatusOK {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	lifecycle("a whole stream", "pick", "first token", "tokens 2", "completion 3")

	u.mu.Lock()
	u.status = http.StatusInternalServerError
	u.mu.Unlock()
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusInternalServerError {
		t.Fatalf("failing server: %d, want its 500 passed on", r.status)
	}
	lifecycle("an error answer", "pick", "failure 500")

	u.Close()
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusBadGateway {
		t.Fatalf("unreachable server: %d, want 502", r.status)
	}
	lifecycle("an unreachable server", "pick", "failure 0")
}

// TestPolicyMustBeKnown: a gateway runs igw and the policies registered with
// it, nothing else; the error names what it knows.
func TestPolicyMustBeKnown(t *testing.T) {
	reg := NewRegistry()
	if err := reg.Register("first", Policy{New: func(PolicyEnv) (Picker, error) { return &recorder{}, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{PolicyIGW, "first"} {
		if err := reg.Register(bad, Policy{New: func(PolicyEnv) (Picker, error) { return &recorder{}, nil }}); err == nil {
			t.Errorf("registering %q again succeeded", bad)
		}
	}
	eps := endpointsFile(t)
	for _, tc := range []struct {
		reg  *Registry
		args []string
		want string
	}{
		{nil, []string{"--endpoints-file", eps, "--policy", "round-robin"}, `--policy must be one of igw, got "round-robin"`},
		{reg, []string{"--endpoints-file", eps, "--policy", "random"}, `--policy must be one of igw, first, got "random"`},
		{nil, []string{"--config", writeFile(t, "gateway.yaml", "pools:\n- {name: p, endpointsFile: "+eps+", policy: first}\n")},
			`pool "p": unknown policy "first" (known: igw)`},
	} {
		o := NewOptions()
		o.Policies = tc.reg
		fs := pflag.NewFlagSet("igw-gateway", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.Complete()
		if err == nil {
			err = o.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
