package hub

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/wire"
)

const testToken = "hub-test-token-0123456789"

// fakeMember is a member cluster's gateway on loopback: its summary
// (behind the token) and the inference paths, which can fail on purpose.
type fakeMember struct {
	*httptest.Server
	name   string
	models []string
	// fail: "" answers, "500" answers 500, "429" sheds, "reset" closes the connection.
	mu      sync.Mutex
	fail    string
	garbage bool
	served  atomic.Int64
}

func startFakeMember(t *testing.T, name, region string, models ...string) *fakeMember {
	t.Helper()
	m := &fakeMember{name: name, models: models}
	auth, err := globalsummary.NewTokenFile(tokenFile(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	summary, err := globalsummary.NewHandler(func(now time.Time) *globalsummary.Summary {
		return memberSummary(name, region, now, models...)
	}, globalsummary.HandlerOptions{Auth: auth, MinInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		fail, garbage := m.fail, m.garbage
		m.mu.Unlock()
		if r.URL.Path == wire.GlobalSummaryPath {
			if garbage {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"version":1,"cluster":"`+name+`","generatedAt":"2026-01-01T00:00:00Z","models":[{"model":"x","endpoints":-1}]}`)
				return
			}
			summary.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		switch fail {
		case "500":
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusInternalServerError)
			return
		case "429":
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"message":"saturated","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
			return
		case "slow":
			// Half an answer, then a pause the client does not wait out.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		case "cut":
			// The first event, then the connection reset mid-stream.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			conn, _, _ := http.NewResponseController(w).Hijack()
			_ = conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			return
		case "reset":
			conn, _, _ := http.NewResponseController(w).Hijack()
			_ = conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			return
		}
		m.served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","member":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`, name)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *fakeMember) setFail(fail string) {
	m.mu.Lock()
	m.fail = fail
	m.mu.Unlock()
}

func (m *fakeMember) setGarbage(g bool) {
	m.mu.Lock()
	m.garbage = g
	m.mu.Unlock()
}

func (m *fakeMember) addr() string { return m.Listener.Addr().String() }

func memberSummary(name, region string, now time.Time, models ...string) *globalsummary.Summary {
	s := &globalsummary.Summary{Version: globalsummary.Version, Cluster: name, Region: region, GeneratedAt: now, Models: []globalsummary.Model{}}
	for _, model := range models {
		s.Models = append(s.Models, globalsummary.Model{Model: model, Endpoints: 2, ReadyEndpoints: 2, Running: 1,
			PrefillTokensPerSecond: 20000, EndpointPrefillTokensPerSecond: 10000, DecodeStepSeconds: 0.02})
	}
	return s
}

func tokenFile(t testing.TB) string {
	t.Helper()
	return testfile.Write(t, "", "token", testToken+"\n")
}

// memberYAML is a member's entry in the hub's configuration.
func memberYAML(t *testing.T, name, region string, servers ...*fakeMember) string {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, fmt.Sprintf("%q", s.URL+wire.GlobalSummaryPath))
	}
	return fmt.Sprintf("- {name: %s, region: %s, address: %q, summaryURLs: [%s], tokenFile: %q}\n",
		name, region, servers[0].addr(), strings.Join(urls, ", "), tokenFile(t))
}

// startHub runs a hub over config (members appended) with the front on,
// after changes to its options.
func startHub(t *testing.T, config string, changes ...func(*Options)) *Hub {
	t.Helper()
	path := testfile.Write(t, "", "config.yaml", config)
	o := NewOptions()
	// Port 0 turns the front off, so it gets a free port of its own.
	o.ConfigFile, o.GRPCPort, o.HTTPPort, o.MetricsPort, o.BindAddress = path, 0, servetest.FreePort(t), 0, "127.0.0.1"
	for _, change := range changes {
		change(o)
	}
	h := servetest.Build(t, o, New)
	servetest.Serve(t, "hub", h.Run)
	return h
}

// waitInRotation waits until the hub has every member named in rotation.
func waitInRotation(t *testing.T, h *Hub, names ...string) {
	t.Helper()
	servetest.WaitFor(t, "members in rotation: "+strings.Join(names, ", "), 10*time.Second, func() bool {
		in := map[string]bool{}
		for _, m := range h.Status().Members {
			in[m.Name] = m.InRotation
		}
		for _, n := range names {
			if !in[n] {
				return false
			}
		}
		return true
	})
}

func chat(t *testing.T, h *Hub, model string, headers ...string) (status int, member string, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.Addr("http")+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hello"}]}`))
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
	return resp.StatusCode, resp.Header.Get(wire.HeaderGlobalMember), string(b)
}

// A member that fails before the first byte (a 5xx, a reset connection) is
// retried on the other, invisibly to the client.
func TestFrontRetriesOnAnotherMemberBeforeTheFirstByte(t *testing.T) {
	a := startFakeMember(t, "a", "us-east-1", "llama")
	b := startFakeMember(t, "b", "us-east-1", "llama")
	h := startHub(t, "region: us-east-1\nhealth: {consecutiveErrors: 100}\nmembers:\n"+
		memberYAML(t, "a", "us-east-1", a)+memberYAML(t, "b", "us-east-1", b))
	waitInRotation(t, h, "a", "b")
	for _, fail := range []string{"500", "reset"} {
		a.setFail(fail)
		b.setFail("")
		for range 10 {
			status, member, body := chat(t, h, "llama")
			if status != http.StatusOK || member != "b" || !strings.Contains(body, `"member":"b"`) {
				t.Fatalf("a failing with %s: %d from %q: %s", fail, status, member, body)
			}
		}
	}
	if n := a.served.Load(); n != 0 {
		t.Errorf("a answered %d requests while failing", n)
	}
	// Both failing: the retry's failure is the client's, as an OpenAI error.
	// Whether a is still in rotation by now depends on timing (the failures
	// above may have ejected it): then b's failure leaves no member to retry
	// on, else the retry on a fails too. Either way a 503 says why.
	a.setFail("reset")
	b.setFail("reset")
	status, _, body := chat(t, h, "llama")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) ||
		!(strings.Contains(body, "a request is retried once") || strings.Contains(body, "failed before the first byte and no other can take the request")) {
		t.Errorf("both failing: %d %s, want a 503 saying the retry failed or no other member is left", status, body)
	}
}

// nearestFirst is a hub pipeline that picks the nearest member first: from
// us-east-1, a member in eu-west-1 (80 ms away) is every pick's fallback.
const nearestFirst = `pipeline: |
  plugins:
  - {name: near, type: region-proximity, parameters: {delays: [{from: us-east-1, to: eu-west-1, delay: 80ms}], sameRegion: 1ms}}
  filters: [member-health, member-serves-model]
  scorers: [{plugin: near, weight: 1}]
  picker: max-score-picker
  fallbacks: 1
`

// startNearAndFar starts a hub in us-east-1 with the nearestFirst pipeline
// and more configuration, and two llama members in rotation: a beside it and
// b in eu-west-1, every pick's fallback.
func startNearAndFar(t *testing.T, config string, changes ...func(*Options)) (h *Hub, a, b *fakeMember) {
	a = startFakeMember(t, "a", "us-east-1", "llama")
	b = startFakeMember(t, "b", "eu-west-1", "llama")
	h = startHub(t, "region: us-east-1\n"+nearestFirst+config+"members:\n"+
		memberYAML(t, "a", "us-east-1", a)+memberYAML(t, "b", "eu-west-1", b), changes...)
	waitInRotation(t, h, "a", "b")
	return h, a, b
}

// A member that sheds (429: saturated) sends the request to another member,
// and however often it sheds it stays in rotation: a shed is no fault. When
// every member sheds, the client gets the member's own 429.
func TestFrontSpillsAShedRequestOverToAnotherMember(t *testing.T) {
	h, a, b := startNearAndFar(t, "")
	a.setFail("429")
	for range 20 {
		status, member, body := chat(t, h, "llama")
		if status != http.StatusOK || member != "b" {
			t.Fatalf("a shedding: %d from %q: %s", status, member, body)
		}
	}
	if st := statusOf(t, h)["a"]; !st.InRotation {
		t.Fatalf("a shed every request it was sent and left rotation: %+v", st)
	}
	if n := requestsOf(h)["a/"+outcome(health.Shed)]; n != 20 {
		t.Errorf("a shed %d requests, want 20: %v", n, requestsOf(h))
	}
	b.setFail("429")
	status, _, body := chat(t, h, "llama")
	if status != http.StatusTooManyRequests || !strings.Contains(body, "saturated") {
		t.Errorf("both shedding: %d %s, want the member's 429", status, body)
	}
}

// A pinned model never leaves its region, even when the member there is out;
// then the client gets a 503 naming the pin.
func TestRegionPinHoldsThroughFailover(t *testing.T) {
	eu := startFakeMember(t, "euw1", "eu-west-1", "llama-eu", "llama")
	us := startFakeMember(t, "use1", "us-east-1", "llama-eu", "llama")
	h := startHub(t, "region: us-east-1\nmodels: [{name: llama-eu, regions: [eu-west-1]}]\nmembers:\n"+
		memberYAML(t, "euw1", "eu-west-1", eu)+memberYAML(t, "use1", "us-east-1", us))
	waitInRotation(t, h, "euw1", "use1")
	for range 10 {
		if status, member, body := chat(t, h, "llama-eu"); status != http.StatusOK || member != "euw1" {
			t.Fatalf("pinned model: %d from %q: %s", status, member, body)
		}
	}
	eu.setFail("reset")
	status, member, body := chat(t, h, "llama-eu")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "pinned to regions [eu-west-1]") {
		t.Errorf("pinned model with its region failing: %d from %q: %s, want a 503 naming the pin", status, member, body)
	}
	if us.served.Load() != 0 {
		t.Errorf("use1 served %d requests of the pinned model", us.served.Load())
	}
	if status, member, _ := chat(t, h, "llama"); status != http.StatusOK || member != "use1" {
		t.Errorf("unpinned model: %d from %q, want use1", status, member)
	}
}

// /status reports a member that sends garbage as reachable with an invalid
// summary, out of rotation, and one that does not answer as unreachable;
// requests go to the healthy member.
func TestStatusMarksGarbageAndUnreachableMembers(t *testing.T) {
	good := startFakeMember(t, "good", "us-east-1", "llama")
	bad := startFakeMember(t, "bad", "us-east-1", "llama")
	gone := startFakeMember(t, "gone", "us-west-2", "llama")
	h := startHub(t, "region: us-east-1\nmembers:\n"+memberYAML(t, "good", "us-east-1", good)+
		memberYAML(t, "bad", "us-east-1", bad)+memberYAML(t, "gone", "us-west-2", gone))
	waitInRotation(t, h, "good", "bad", "gone")
	bad.setGarbage(true)
	gone.Close()
	servetest.WaitFor(t, "bad and gone out of rotation", 10*time.Second, func() bool {
		st := statusOf(t, h)
		return !st["bad"].InRotation && !st["gone"].InRotation
	})
	st := statusOf(t, h)
	if m := st["bad"]; !m.Reachable || m.SummaryValid || !strings.Contains(m.LastError, "endpoints") {
		t.Errorf("garbage member: %+v, want reachable, summary invalid, the field named", m)
	}
	if m := st["gone"]; m.Reachable || m.SummaryValid || m.LastError == "" || m.Reason == "" {
		t.Errorf("unreachable member: %+v", m)
	}
	if m := st["good"]; !m.Reachable || !m.SummaryValid || !m.InRotation || m.RTTSeconds <= 0 || m.SummaryAgeSeconds < 0 || m.SummaryAgeSeconds > 2 {
		t.Errorf("good member: %+v", m)
	}
	for range 10 {
		if status, member, body := chat(t, h, "llama"); status != http.StatusOK || member != "good" {
			t.Fatalf("%d from %q: %s", status, member, body)
		}
	}
}

// statusOf reads GET /status over HTTP, by member.
func statusOf(t *testing.T, h *Hub) map[string]MemberStatus {
	t.Helper()
	resp, err := http.Get("http://" + h.Addr("metrics") + wire.GlobalStatusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.GeneratedAt.IsZero() {
		t.Error("status without generatedAt")
	}
	out := map[string]MemberStatus{}
	for _, m := range st.Members {
		out[m.Name] = m
	}
	return out
}

// A member with one picker per model lists several summary URLs; the hub
// merges them, so both models route there.
func TestMemberSummariesAreMerged(t *testing.T) {
	llama := startFakeMember(t, "m", "us-east-1", "llama")
	qwen := startFakeMember(t, "m-qwen", "us-east-1", "qwen")
	h := startHub(t, "region: us-east-1\nmembers:\n"+memberYAML(t, "m", "us-east-1", llama, qwen))
	waitInRotation(t, h, "m")
	if got := statusOf(t, h)["m"].Models; strings.Join(got, ",") != "llama,qwen" {
		t.Errorf("models %v, want llama and qwen from the two summaries", got)
	}
	for _, model := range []string{"llama", "qwen"} {
		if status, member, body := chat(t, h, model); status != http.StatusOK || member != "m" {
			t.Errorf("%s: %d from %q: %s", model, status, member, body)
		}
	}
	// The same model in two of a member's summaries is garbage: out of rotation.
	dup := startFakeMember(t, "m2", "us-east-1", "llama")
	h2 := startHub(t, "region: us-east-1\nmembers:\n"+memberYAML(t, "m2", "us-east-1", dup, llama))
	servetest.WaitFor(t, "the conflicting member marked", 10*time.Second, func() bool {
		return strings.Contains(statusOf(t, h2)["m2"].LastError, "two pickers")
	})
	if m := statusOf(t, h2)["m2"]; m.InRotation || !m.Reachable || m.SummaryValid {
		t.Errorf("conflicting summaries: %+v", m)
	}
}

// ext_proc: the destination header names the picked member and one
// fallback, the body passes unchanged; a pinned model with no member in its
// region is an immediate 503 in OpenAI's shape.
func TestExtProcSetsPrimaryAndFallback(t *testing.T) {
	a := startFakeMember(t, "a", "us-east-1", "llama", "llama-eu")
	b := startFakeMember(t, "b", "us-east-1", "llama", "llama-eu")
	h := startHub(t, "region: us-east-1\nmodels: [{name: llama-eu, regions: [eu-west-1]}]\nmembers:\n"+
		memberYAML(t, "a", "us-east-1", a)+memberYAML(t, "b", "us-east-1", b)+
		"- {name: euw1, region: eu-west-1, address: \"127.0.0.1:1\", summaryURLs: [\"http://127.0.0.1:1/x\"], tokenFile: /nonexistent}\n")
	waitInRotation(t, h, "a", "b")
	body := []byte(`{"model":"llama","messages":[{"role":"user","content":"hello"}]}`)
	for _, mode := range []extproctest.BodyMode{extproctest.FullDuplexStreamed, extproctest.Buffered} {
		res, err := extproctest.ProcessOnce(h.Addr("grpc"), extproctest.Config{RequestBodyMode: mode, ResponseBodyMode: mode, ChunkSize: 16},
			extproctest.Request{Headers: extproctest.NewHeaders(":method", "POST", ":path", "/v1/chat/completions"), Body: body,
				Response: &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200"), Chunks: [][]byte{[]byte(`{"ok":1}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		dest := res.RequestHeaders.Get(wire.HeaderDestinationEndpoint)
		parts := strings.Split(dest, ",")
		if len(parts) != 2 || parts[0] == parts[1] || !strings.Contains(a.addr()+","+b.addr(), parts[0]) || !strings.Contains(a.addr()+","+b.addr(), parts[1]) {
			t.Errorf("%v: destination %q, want both members, primary first", mode, dest)
		}
		if !res.RouteCacheCleared || string(res.RequestBody) != string(body) || string(res.ResponseBody) != `{"ok":1}` || len(res.Ignored) > 0 {
			t.Errorf("%v: cleared %v, body %q, response %q, ignored %v", mode, res.RouteCacheCleared, res.RequestBody, res.ResponseBody, res.Ignored)
		}
		if got := res.DynamicMetadata[wire.MetadataNamespaceLB][wire.MetadataKeyDestinationEndpoint]; got != dest {
			t.Errorf("%v: metadata %v, want %q", mode, got, dest)
		}
	}
	res, err := extproctest.ProcessOnce(h.Addr("grpc"), extproctest.Config{},
		extproctest.Request{Headers: extproctest.NewHeaders(":method", "POST", ":path", "/v1/chat/completions"),
			Body: []byte(`{"model":"llama-eu","messages":[{"role":"user","content":"hello"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	ir := res.ImmediateResponse
	if ir == nil || ir.Status != http.StatusServiceUnavailable || !strings.Contains(string(ir.Body), "pinned to regions [eu-west-1]") ||
		ir.Headers.Get("content-type") != "application/json" {
		t.Errorf("pinned model without a member: %+v, want an OpenAI 503 naming the pin", ir)
	}
}

// Clients that leave mid-response (or close right after reading it) are not
// the member's failures: the member stays in rotation.
func TestClientLeavingIsNoMemberFailure(t *testing.T) {
	a := startFakeMember(t, "a", "us-east-1", "llama")
	h := startHub(t, "region: us-east-1\nhealth: {consecutiveErrors: 2}\nmembers:\n"+memberYAML(t, "a", "us-east-1", a))
	waitInRotation(t, h, "a")
	a.setFail("slow")
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.Addr("http")+"/v1/chat/completions",
			strings.NewReader(`{"model":"llama","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
	}
	time.Sleep(100 * time.Millisecond) // the hub sees each client leave
	if m := statusOf(t, h)["a"]; !m.InRotation {
		t.Errorf("after clients left mid-response: %+v, want a still in rotation", m)
	}
}

// A member whose stream breaks after the first byte is not retried (the
// client has part of the answer): the client's response is cut as well, and
// the member's failure counts against its health.
func TestStreamCutAfterTheFirstByteReachesTheClient(t *testing.T) {
	a := startFakeMember(t, "a", "us-east-1", "llama")
	b := startFakeMember(t, "b", "us-east-1", "llama")
	h := startHub(t, "region: us-east-1\nmembers:\n"+memberYAML(t, "a", "us-east-1", a)+memberYAML(t, "b", "us-east-1", b))
	waitInRotation(t, h, "a", "b")
	a.setFail("cut")
	b.setFail("cut")
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.Addr("http")+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "data: {}\n\n" || err == nil {
		t.Errorf("%d %q, error %v; want the first event, then a broken body", resp.StatusCode, body, err)
	}
	if n := attemptsOf(h); n != 1 {
		t.Errorf("%d attempts, want 1: a stream that began is not retried", n)
	}
}

// attemptsOf counts the requests sent to members, failures included.
func attemptsOf(h *Hub) int {
	mfs, _ := h.metrics.registry.Gather()
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == wire.GlobalRequests {
			for _, m := range mf.GetMetric() {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n
}

// GET /v1/models on the front lists the models the members serve, in the
// OpenAI list shape member gateways answer with; one model by id, an
// unknown one OpenAI's 404, another method a JSON 405.
func TestFrontListsTheGloballyServedModels(t *testing.T) {
	a := startFakeMember(t, "a", "us-east-1", "llama")
	b := startFakeMember(t, "b", "eu-west-1", "llama", "qwen")
	h := startHub(t, "region: us-east-1\nmembers:\n"+memberYAML(t, "a", "us-east-1", a)+memberYAML(t, "b", "eu-west-1", b))
	waitInRotation(t, h, "a", "b")
	get := func(method, path string) (int, string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+h.Addr("http")+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}
	status, ctype, body := get(http.MethodGet, wire.ModelsPath)
	var list openaimodels.List
	if err := json.Unmarshal(body, &list); err != nil || status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET %s: %d %s %q (%v)", wire.ModelsPath, status, ctype, body, err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy != openaimodels.OwnedBy || m.Created == 0 {
			t.Errorf("entry %+v, want an OpenAI model object", m)
		}
	}
	if list.Object != "list" || strings.Join(ids, ",") != "llama,qwen" {
		t.Errorf("list %+v, want llama and qwen", list)
	}
	if status, _, body := get(http.MethodGet, wire.ModelsPath+"/qwen"); status != http.StatusOK || !strings.Contains(string(body), `"id":"qwen"`) {
		t.Errorf("GET one model: %d %q", status, body)
	}
	if status, _, body := get(http.MethodGet, wire.ModelsPath+"/mistral"); status != http.StatusNotFound || !strings.Contains(string(body), "model_not_found") {
		t.Errorf("GET an unknown model: %d %q", status, body)
	}
	if status, ctype, _ := get(http.MethodPost, wire.ModelsPath); status != http.StatusMethodNotAllowed || ctype != "application/json" {
		t.Errorf("POST %s: %d %s, want a JSON 405", wire.ModelsPath, status, ctype)
	}
}

// requestsOf reads igw_global_requests_total by member and outcome.
func requestsOf(h *Hub) map[string]int {
	mfs, _ := h.metrics.registry.Gather()
	out := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != wire.GlobalRequests {
			continue
		}
		for _, m := range mf.GetMetric() {
			var member, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "member":
					member = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			out[member+"/"+outcome] = int(m.GetCounter().GetValue())
		}
	}
	return out
}

// ext_proc: a request Envoy retried on the fallback (the response's
// upstream.address is the fallback's) is the primary's failure and the
// fallback's success or failure, not the primary's; an answer from the
// primary stays the primary's. b, in another region, is always the fallback.
func TestExtProcCreditsTheMemberThatAnswered(t *testing.T) {
	h, a, b := startNearAndFar(t, "health: {consecutiveErrors: 100}\n")
	body := []byte(`{"model":"llama","messages":[{"role":"user","content":"hello"}]}`)
	send := func(attrs map[string]any, status string) {
		t.Helper()
		res, err := extproctest.ProcessOnce(h.Addr("grpc"), extproctest.Config{},
			extproctest.Request{Headers: extproctest.NewHeaders(":method", "POST", ":path", "/v1/chat/completions"), Body: body,
				Response: &extproctest.Response{Headers: extproctest.NewHeaders(":status", status), Chunks: [][]byte{[]byte(`{}`)}, Attributes: attrs}})
		if err != nil {
			t.Fatal(err)
		}
		if dest := res.RequestHeaders.Get(wire.HeaderDestinationEndpoint); dest != a.addr()+","+b.addr() {
			t.Fatalf("destination %q, want a then b", dest)
		}
	}
	for _, c := range []struct {
		name   string
		attrs  map[string]any
		status string
		want   map[string]int
	}{
		{"answered by the primary", map[string]any{wire.AttributeUpstreamAddress: a.addr(), wire.AttributeUpstreamAttempts: 1}, "200",
			map[string]int{"a/ok": 1}},
		{"retried on the fallback", map[string]any{wire.AttributeUpstreamAddress: b.addr(), wire.AttributeUpstreamAttempts: 2}, "200",
			map[string]int{"a/" + outcome(health.Reset): 1, "b/ok": 1}},
		{"retried on the fallback, no attempt count", map[string]any{wire.AttributeUpstreamAddress: b.addr()}, "200",
			map[string]int{"a/" + outcome(health.Reset): 1, "b/ok": 1}},
		{"the fallback failed too", map[string]any{wire.AttributeUpstreamAddress: b.addr(), wire.AttributeUpstreamAttempts: 2}, "503",
			map[string]int{"a/" + outcome(health.Reset): 1, "b/" + outcome(health.Status5xx): 1}},
		{"sent elsewhere by Envoy's own balancing", map[string]any{wire.AttributeUpstreamAddress: b.addr(), wire.AttributeUpstreamAttempts: 1}, "200",
			map[string]int{"b/ok": 1}},
		{"no attributes", nil, "200", map[string]int{"a/ok": 1}},
		{"shed by the primary", map[string]any{wire.AttributeUpstreamAddress: a.addr(), wire.AttributeUpstreamAttempts: 1}, "429",
			map[string]int{"a/" + outcome(health.Shed): 1}},
	} {
		before := requestsOf(h)
		send(c.attrs, c.status)
		after := requestsOf(h)
		got := map[string]int{}
		for k, v := range after {
			if v != before[k] {
				got[k] = v - before[k]
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: outcomes %v, want %v", c.name, got, c.want)
		}
	}
}

// The standalone front keeps a client's reserved headers only from a
// trusted source: x-igw-client-region, which steers the pick to the
// client's region, is the hub's edge's to set, not the client's.
func TestFrontKeepsTheClientRegionOnlyFromATrustedSource(t *testing.T) {
	for _, tc := range []struct {
		trusted []string
		want    string
	}{
		{nil, "a"},                   // removed: the hub's own region, us-east-1, is the origin
		{[]string{"127.0.0.1"}, "b"}, // kept: eu-west-1's member is the nearest
	} {
		h, _, _ := startNearAndFar(t, "", func(o *Options) { o.TrustedCIDRs = tc.trusted })
		status, member, body := chat(t, h, "llama", wire.HeaderClientRegion, "eu-west-1")
		if status != http.StatusOK || member != tc.want {
			t.Errorf("trusted %v: %d from %q (%s), want member %s", tc.trusted, status, member, body, tc.want)
		}
	}
}

// A body that does not arrive within the body-read timeout is answered 408
// in the OpenAI shape and its connection closed, rather than holding the
// connection and its goroutine for as long as the client trickles.
func TestFrontCutsASlowUpload(t *testing.T) {
	h, a, b := startNearAndFar(t, "", func(o *Options) { o.BodyReadTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", h.Addr("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{\"model\":\"llama\""); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled upload: %v", err)
	}
	var answer struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != http.StatusRequestTimeout || answer.Error.Code != "request_timeout" || !resp.Close {
		t.Errorf("stalled upload: %d %+v close=%v, want 408 request_timeout and the connection closed", resp.StatusCode, answer, resp.Close)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("answered after %v, want about the 300ms body-read timeout", waited)
	}
	if a.served.Load()+b.served.Load() != 0 {
		t.Error("a request whose body never came reached a member")
	}
}

// Requests over the concurrency cap get 429 with Retry-After at once; the
// requests in flight are not disturbed.
func TestFrontAnswersOverTheConcurrencyCapAt429(t *testing.T) {
	h, a, b := startNearAndFar(t, "", func(o *Options) { o.MaxConcurrentRequests = 1 })
	a.setFail("slow")
	b.setFail("slow")
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.Addr("http")+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	held, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	status, _, body := chat(t, h, "llama")
	if status != http.StatusTooManyRequests || !strings.Contains(body, "too_many_concurrent_requests") {
		t.Errorf("over the cap: %d %s, want 429 too_many_concurrent_requests", status, body)
	}
	if held.StatusCode != http.StatusOK {
		t.Errorf("the request in flight got %d", held.StatusCode)
	}
}
