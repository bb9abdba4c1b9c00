package gateway

import (
	"bufio"
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

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/wire"
)

// upstream is a fake model server: it names itself in x-upstream, counts
// its requests and answers completions (streamed or not) with usage. before,
// when set, is called before any byte of the answer; hold between the first
// and the remaining events.
type upstream struct {
	*httptest.Server
	name    string
	metrics string // the /metrics body; empty: 404
	models  string // the /v1/models body; empty: 404

	modelReads atomic.Int64

	mu       sync.Mutex
	requests []map[string]any
	headers  []http.Header // each request's, in order
	before   func(r *http.Request)
	hold     func(r *http.Request)
	// status, when set, is the answer to every request, with an error body.
	status int
}

func startUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	return startUpstreamAt(t, name, "127.0.0.1:0")
}

// startUpstreamAt is an upstream listening on addr (ip:port).
func startUpstreamAt(t *testing.T, name, addr string) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{name: name}
	u.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(u.serve)}}
	u.Start()
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
	u.headers = append(u.headers, r.Header.Clone())
	before, hold, status := u.before, u.hold, u.status
	u.mu.Unlock()
	if before != nil {
		before(r)
	}
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
	g := newGateway(t, reg, append([]string{"--port", "0", "--bind-address", "127.0.0.1"}, args...)...)
	serveGateway(t, g)
	return g
}

// newGateway builds a gateway from exactly args, as the command does.
func newGateway(t *testing.T, reg *Registry, args ...string) *Gateway {
	t.Helper()
	o := NewOptions()
	o.Policies = reg
	fs := pflag.NewFlagSet("igw-gateway", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(o, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serveGateway runs g until the test ends.
func serveGateway(t *testing.T, g *Gateway) { servetest.Serve(t, "gateway", g.Run) }

func endpointsFile(t *testing.T, ups ...*upstream) string {
	t.Helper()
	var b strings.Builder
	for _, u := range ups {
		b.WriteString("- " + u.endpoint() + "\n")
	}
	if len(ups) == 0 {
		b.WriteString("[]\n")
	}
	return testfile.Write(t, "", "endpoints.yaml", b.String())
}

type response struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, g *Gateway, path, body string, headers ...string) response {
	t.Helper()
	return postVia(t, http.DefaultClient, g, path, body, headers...)
}

// postVia is post through client (one dialing from another source address, say).
func postVia(t *testing.T, client *http.Client, g *Gateway, path, body string, headers ...string) response {
	t.Helper()
	req := servetest.NewRequest(t, http.MethodPost, "http://"+g.Addr()+path, body)
	req.Header.Set("Content-Type", "application/json") // on an empty body too
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return send(t, client, req)
}

// send sends req through client and reads the whole answer.
func send(t *testing.T, client *http.Client, req *http.Request) response {
	t.Helper()
	a := servetest.Do(t, client, req)
	return response{a.Status, a.Header, string(a.Body)}
}

// openStream posts a streamed completion to the gateway at baseURL and
// returns the response once its first event has arrived, with the reader of
// the rest; the body is closed when the test ends.
func openStream(t *testing.T, baseURL string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, baseURL+"/v1/completions",
		strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	lines := bufio.NewReader(resp.Body)
	if first, _ := lines.ReadString('\n'); !strings.Contains(first, `"text":"a"`) {
		t.Fatalf("first line %q, want the first event", first)
	}
	return lines
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
