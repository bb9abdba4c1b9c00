package bbr

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/requestbody/bodytest"
	"github.com/igw-dev/igw/pkg/wire"
)

var bothModes = []struct {
	name   string
	mode   BodyMode
	client extproctest.BodyMode
}{
	{"streamed", Streamed, extproctest.FullDuplexStreamed},
	{"buffered", Buffered, extproctest.Buffered},
}

// startRouter serves an ExtProc over r and returns an Envoy-playing client for mode.
func startRouter(t *testing.T, r *Router, mode BodyMode, client extproctest.BodyMode, chunk int) *extproctest.Client {
	t.Helper()
	return extproctest.Start(t, &ExtProc{Router: r, BodyMode: mode}, extproctest.Config{
		RequestBodyMode: client, ResponseBodyMode: client, ChunkSize: chunk})
}

func process(t *testing.T, c *extproctest.Client, req extproctest.Request) *extproctest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Process(ctx, req)
	if err != nil {
		t.Fatalf("Envoy would fail the request: %v", err)
	}
	if len(res.Ignored) > 0 {
		t.Fatalf("Envoy would ignore part of the replies: %q", res.Ignored)
	}
	return res
}

func TestExtProcRoutesEveryAPI(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 8 << 20})
	r.SetAdapters(testAdapters)
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			c := startRouter(t, r, m.mode, m.client, 4096)
			for _, b := range bodytest.All() {
				t.Run(b.Name, func(t *testing.T) {
					req := extproctest.PostJSON(b.Path, b.Body)
					// A client cannot pick a pool by sending the routing headers itself.
					req.Headers = append(req.Headers,
						extproctest.Header{Key: wire.HeaderModelName, Value: "spoofed"},
						extproctest.Header{Key: wire.HeaderBaseModelName, Value: "spoofed"})
					res := process(t, c, req)
					if res.ImmediateResponse != nil {
						t.Fatalf("refused: %d %s", res.ImmediateResponse.Status, res.ImmediateResponse.Body)
					}
					if got := res.RequestHeaders.Values(wire.HeaderModelName); len(got) != 1 || got[0] != b.Model {
						t.Fatalf("%s = %q, want %q", wire.HeaderModelName, got, b.Model)
					}
					base, hasBase := res.RequestHeaders.Lookup(wire.HeaderBaseModelName)
					if want, adapter := testAdapters[b.Model]; hasBase != adapter || base != want {
						t.Fatalf("%s = %q (present %v), want %q", wire.HeaderBaseModelName, base, hasBase, want)
					}
					if !res.RouteCacheCleared {
						t.Fatal("route cache not cleared: HTTPRoute header matches would not see the model")
					}
					if !bytes.Equal(res.RequestBody, b.Body) {
						t.Fatalf("body changed: %d bytes in, %d out", len(b.Body), len(res.RequestBody))
					}
					if res.RequestHeaders.Get(":path") != b.Path || res.RequestHeaders.Get("content-type") != "application/json" {
						t.Fatalf("other headers changed: %v", res.RequestHeaders)
					}
				})
			}
		})
	}
}

// TestStreamedRepliesAfterTheWholeBody checks the full-duplex order: the headers
// reply (with the decision) waits for the end of the body, and the body comes back
// in the chunks it was sent in.
func TestStreamedRepliesAfterTheWholeBody(t *testing.T) {
	c := startRouter(t, NewRouter(RouterConfig{}), Streamed, extproctest.FullDuplexStreamed, 100)
	body := bodytest.Chat(1000, "llama", true)
	res := process(t, c, extproctest.PostJSON("/v1/chat/completions", body))
	msgs := res.Messages
	wantChunks := (len(body) + 99) / 100
	if len(msgs) != 1+wantChunks {
		t.Fatalf("%d replies, want the headers reply and %d body chunks", len(msgs), wantChunks)
	}
	hr := msgs[0].GetRequestHeaders().GetResponse()
	if hr == nil || len(hr.GetHeaderMutation().GetSetHeaders()) == 0 || !hr.GetClearRouteCache() {
		t.Fatalf("first reply is not the headers reply with the decision: %v", msgs[0])
	}
	for i, m := range msgs[1:] {
		sr := m.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		end := min((i+1)*100, len(body))
		if sr == nil || !bytes.Equal(sr.GetBody(), body[i*100:end]) || sr.GetEndOfStream() != (i == wantChunks-1) {
			t.Fatalf("body reply %d: %v", i, m)
		}
	}
}

// wantImmediate checks an OpenAI-style JSON error was sent to the client.
func wantImmediate(t *testing.T, res *extproctest.Result, status int, code string) {
	t.Helper()
	ir := res.ImmediateResponse
	if ir == nil {
		t.Fatalf("no immediate response; want %d %s (headers %v)", status, code, res.RequestHeaders)
	}
	if ir.Status != status || ir.Headers.Get("content-type") != "application/json" {
		t.Fatalf("immediate response %d %v; want %d with application/json", ir.Status, ir.Headers, status)
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ir.Body, &body); err != nil || body.Error.Code != code || body.Error.Message == "" || body.Error.Type == "" {
		t.Fatalf("error body %s (%v), want code %q", ir.Body, err, code)
	}
}

func TestExtProcErrors(t *testing.T) {
	const limit = 64 << 10
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: limit})
	big := bodytest.Chat(limit, "llama", true)
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			c := startRouter(t, r, m.mode, m.client, 1000)
			withoutLength := extproctest.PostJSON("/v1/chat/completions", big)
			withoutLength.Headers = slicesDelete(withoutLength.Headers, "content-length")
			for _, tc := range []struct {
				name   string
				req    extproctest.Request
				status int
				code   string
			}{
				{"invalid JSON", extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"a"`)), 400, "invalid_json"},
				{"invalid JSON late in a large body", extproctest.PostJSON("/v1/completions", append(bytes.Clone(big[:limit-100]), '}')), 400, "invalid_json"},
				{"missing model", extproctest.PostJSON("/v1/embeddings", []byte(`{"input":"hi"}`)), 400, "missing_model"},
				{"model not a string", extproctest.PostJSON("/v1/embeddings", []byte(`{"model":42,"input":"hi"}`)), 400, "invalid_type"},
				{"declared over the limit", extproctest.PostJSON("/v1/chat/completions", big), 413, "request_too_large"},
				{"over the limit, no content-length", withoutLength, 413, "request_too_large"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					wantImmediate(t, process(t, c, tc.req), tc.status, tc.code)
				})
			}
		})
	}
}

func slicesDelete(h extproctest.Headers, key string) extproctest.Headers {
	var out extproctest.Headers
	for _, e := range h {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return out
}

func TestDefaultModelThroughExtProc(t *testing.T) {
	r := NewRouter(RouterConfig{DefaultModel: "sql-lora"})
	r.SetAdapters(testAdapters)
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			c := startRouter(t, r, m.mode, m.client, 0)
			res := process(t, c, extproctest.PostJSON("/v1/embeddings", []byte(`{"input":"hi"}`)))
			if res.ImmediateResponse != nil || res.RequestHeaders.Get(wire.HeaderModelName) != "sql-lora" ||
				res.RequestHeaders.Get(wire.HeaderBaseModelName) != testAdapters["sql-lora"] || !res.RouteCacheCleared {
				t.Fatalf("default model not applied: %v", res.RequestHeaders)
			}
		})
	}
}

// TestPassThroughIsUntouched: other APIs share the gateway; what is not a JSON
// body goes on exactly as it came, without a route recomputation.
func TestPassThroughIsUntouched(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 1000})
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			c := startRouter(t, r, m.mode, m.client, 500)
			for _, tc := range passThroughRequests() {
				t.Run(tc.name, func(t *testing.T) {
					res := process(t, c, tc.req)
					if res.ImmediateResponse != nil {
						t.Fatalf("refused: %d %s", res.ImmediateResponse.Status, res.ImmediateResponse.Body)
					}
					want := tc.req.Headers
					if m.mode == Streamed {
						want = slicesDelete(want, "content-length") // Envoy drops it itself
					}
					if !slices.Equal(res.RequestHeaders, want) || !bytes.Equal(res.RequestBody, tc.req.Body) {
						t.Fatalf("request changed:\n%v\nwant\n%v", res.RequestHeaders, want)
					}
					if res.RouteCacheCleared || string(res.ResponseBody) != "response" {
						t.Fatalf("route cache cleared %v, response %q", res.RouteCacheCleared, res.ResponseBody)
					}
					for _, msg := range res.Messages {
						if hasMutation(msg) {
							t.Fatalf("a pass-through request was mutated: %v", msg)
						}
					}
				})
			}
		})
	}
}

// passThroughRequests are requests the router does not route on their body,
// each with a response to play.
func passThroughRequests() []struct {
	name string
	req  extproctest.Request
} {
	multipart := []byte("--x\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--x--\r\n" + strings.Repeat("a", 3000))
	tcs := []struct {
		name string
		req  extproctest.Request
	}{
		{"multipart over the JSON limit", request("POST", "/v1/audio/transcriptions", "multipart/form-data; boundary=x", multipart)},
		{"text that is not JSON", request("POST", "/upload", "text/plain", []byte("{not json"))},
		{"no content type", request("POST", "/v1/chat/completions", "", []byte(`{"model":"m"}`))},
		{"GET without a body", request("GET", "/v1/models", "application/json", nil)},
		{"JSON content type, empty body", request("POST", "/v1/models", "application/json", nil)},
	}
	for i := range tcs {
		tcs[i].req.Response = &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200"),
			Chunks: [][]byte{[]byte("resp"), []byte("onse")}}
	}
	return tcs
}

// TestClientReservedHeadersAreRemoved: whatever the request, JSON or not,
// routed or passed through, it leaves the router without the reserved headers
// (x-gateway-*, x-igw-*) the client sent, except those the router sets itself;
// the route is recomputed so that no HTTPRoute matched on a client's value.
func TestClientReservedHeadersAreRemoved(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 1000})
	r.SetAdapters(map[string]string{"lora-a": "base"})
	spoofed := []extproctest.Header{
		{Key: wire.HeaderModelName, Value: "other-model"},
		{Key: wire.HeaderBaseModelName, Value: "other-base"},
		{Key: wire.HeaderDestinationEndpoint, Value: "10.0.0.9:8000"},
		{Key: wire.HeaderDebug, Value: "1"},
		{Key: wire.HeaderPriority, Value: "100"},
		{Key: "x-igw-anything", Value: "x"},           // any name under the prefixes
		{Key: "x-gateway-model-name", Value: "again"}, // and repeated
	}
	type routed struct {
		name string
		req  extproctest.Request
		// model and base are what the router sets ("" for nothing).
		model, base string
	}
	cases := []routed{
		{name: "JSON, a base model", req: extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"p"}`)), model: "m"},
		{name: "JSON, an adapter", req: extproctest.PostJSON("/v1/completions", []byte(`{"model":"lora-a","prompt":"p"}`)), model: "lora-a", base: "base"},
	}
	for _, tc := range passThroughRequests() {
		cases = append(cases, routed{name: tc.name, req: tc.req})
	}
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			c := startRouter(t, r, m.mode, m.client, 64)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					clean := tc.req.Headers
					tc.req.Headers = append(slices.Clone(clean), spoofed...)
					res := process(t, c, tc.req)
					if res.ImmediateResponse != nil {
						t.Fatalf("refused: %d %s", res.ImmediateResponse.Status, res.ImmediateResponse.Body)
					}
					for _, h := range res.RequestHeaders {
						if !wire.IsReservedHeader(h.Key) {
							continue
						}
						want := map[string]string{wire.HeaderModelName: tc.model, wire.HeaderBaseModelName: tc.base}[h.Key]
						if h.Value != want {
							t.Fatalf("%s: %q reaches the routes, want %q (headers %v)", h.Key, h.Value, want, res.RequestHeaders)
						}
					}
					if got := res.RequestHeaders.Values(wire.HeaderModelName); tc.model != "" && len(got) != 1 {
						t.Fatalf("%s = %q, want [%q]", wire.HeaderModelName, got, tc.model)
					}
					if !res.RouteCacheCleared {
						t.Fatal("route cache not cleared: a route matched on the client's header would stand")
					}
					if !bytes.Equal(res.RequestBody, tc.req.Body) {
						t.Fatalf("body changed: %d bytes in, %d out", len(tc.req.Body), len(res.RequestBody))
					}
					for _, h := range clean {
						if h.Key != "content-length" && res.RequestHeaders.Get(h.Key) != h.Value {
							t.Fatalf("%s changed: %q, want %q", h.Key, res.RequestHeaders.Get(h.Key), h.Value)
						}
					}
				})
			}
		})
	}
}

// TestReservedHeadersRemovedInStreamedMode: in Envoy's STREAMED body mode the
// router cannot route, but the headers reply still removes the client's
// reserved headers.
func TestReservedHeadersRemovedInStreamedMode(t *testing.T) {
	c := startRouter(t, NewRouter(RouterConfig{}), Streamed, extproctest.Streamed, 8)
	req := extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"p"}`))
	req.Headers = append(req.Headers, extproctest.Header{Key: wire.HeaderModelName, Value: "spoofed"})
	res := process(t, c, req)
	if v, ok := res.RequestHeaders.Lookup(wire.HeaderModelName); ok || !res.RouteCacheCleared {
		t.Fatalf("%s = %q (present %v), route cache cleared %v", wire.HeaderModelName, v, ok, res.RouteCacheCleared)
	}
}

func request(method, path, contentType string, body []byte) extproctest.Request {
	h := extproctest.NewHeaders(":method", method, ":path", path, ":scheme", "http", ":authority", "gw")
	if contentType != "" {
		h = append(h, extproctest.Header{Key: "content-type", Value: contentType})
	}
	if body != nil {
		h = append(h, extproctest.Header{Key: "content-length", Value: strconv.Itoa(len(body))})
	}
	return extproctest.Request{Headers: h, Body: body}
}

func hasMutation(m *extprocv3.ProcessingResponse) bool {
	var cr *extprocv3.CommonResponse
	switch {
	case m.GetRequestHeaders() != nil:
		cr = m.GetRequestHeaders().GetResponse()
	case m.GetRequestBody() != nil:
		cr = m.GetRequestBody().GetResponse()
	case m.GetResponseHeaders() != nil:
		cr = m.GetResponseHeaders().GetResponse()
	case m.GetResponseBody() != nil:
		cr = m.GetResponseBody().GetResponse()
	}
	return cr.GetHeaderMutation() != nil || cr.GetClearRouteCache() ||
		(cr.GetBodyMutation() != nil && cr.GetBodyMutation().GetStreamedResponse() == nil)
}

func TestTrailersAfterTheBody(t *testing.T) {
	r := NewRouter(RouterConfig{})
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			c := startRouter(t, r, m.mode, m.client, 8)
			req := extproctest.PostJSON("/v1/completions", []byte(`{"prompt":"hello","model":"m"}`))
			req.Trailers = extproctest.NewHeaders("x-checksum", "abc")
			res := process(t, c, req)
			if res.RequestHeaders.Get(wire.HeaderModelName) != "m" || !res.RouteCacheCleared ||
				string(res.RequestBody) != string(req.Body) || res.RequestTrailers.Get("x-checksum") != "abc" {
				t.Fatalf("headers %v body %q trailers %v", res.RequestHeaders, res.RequestBody, res.RequestTrailers)
			}
		})
	}
}

// TestEnvoysAnnouncedModeWins: a --body-mode that does not match Envoy's filter
// must not hang or break requests.
func TestEnvoysAnnouncedModeWins(t *testing.T) {
	r := NewRouter(RouterConfig{})
	for _, m := range bothModes {
		configured := Buffered
		if m.mode == Buffered {
			configured = Streamed
		}
		t.Run("envoy "+m.name+", configured "+string(configured), func(t *testing.T) {
			c := startRouter(t, r, configured, m.client, 4)
			res := process(t, c, extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"p"}`)))
			if res.RequestHeaders.Get(wire.HeaderModelName) != "m" || !res.RouteCacheCleared {
				t.Fatalf("headers %v", res.RequestHeaders)
			}
		})
	}
}

// rawStream opens an ext_proc stream for message-level tests; its messages carry
// no protocol_config, as from an Envoy that does not announce its mode.
func rawStream(t *testing.T, mode BodyMode, maxBody int64) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	c := startRouter(t, NewRouter(RouterConfig{MaxRequestBodyBytes: maxBody}), mode, extproctest.FullDuplexStreamed, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := c.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func send(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, msgs ...*extprocv3.ProcessingRequest) {
	t.Helper()
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
}

func recv(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient) *extprocv3.ProcessingResponse {
	t.Helper()
	m, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var postHeaders = extproctest.NewHeaders(":method", "POST", ":path", "/v1/completions", "content-type", "application/json")

// TestStreamedRefusesBeforeTheBodyEnds: a body over the limit, or one that can no
// longer be JSON, is refused on the chunk that shows it, not at the end.
func TestStreamedRefusesBeforeTheBodyEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		status int
	}{
		{"413 on crossing the limit", []string{`{"model":"m","prompt":"` + strings.Repeat("a", 60), strings.Repeat("a", 50)}, 413},
		{"400 on the first impossible byte", []string{`{"model":"m",`, `"prompt":"a"]`}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rawStream(t, Streamed, 100)
			send(t, s, extproctest.RequestHeadersMessage(postHeaders, false))
			for _, c := range tc.chunks {
				send(t, s, extproctest.RequestBodyMessage([]byte(c), false)) // never end_of_stream
			}
			m := recv(t, s)
			if ir := m.GetImmediateResponse(); ir == nil || int(ir.GetStatus().GetCode()) != tc.status {
				t.Fatalf("want an immediate %d before the end of the body, got %v", tc.status, m)
			}
		})
	}
}

// TestConfiguredModeWithoutAnnouncement: an Envoy that does not announce its mode
// gets the protocol of --body-mode.
func TestConfiguredModeWithoutAnnouncement(t *testing.T) {
	body := []byte(`{"model":"m"}`)
	t.Run("streamed holds the headers reply", func(t *testing.T) {
		s := rawStream(t, Streamed, 0)
		send(t, s, extproctest.RequestHeadersMessage(postHeaders, false),
			extproctest.RequestBodyMessage(body[:5], false), extproctest.RequestBodyMessage(body[5:], true))
		hr := recv(t, s).GetRequestHeaders().GetResponse()
		if hr.GetHeaderMutation().GetSetHeaders()[0].GetHeader().GetKey() != wire.HeaderModelName || !hr.GetClearRouteCache() {
			t.Fatalf("headers reply %v", hr)
		}
		var got []byte
		for range 2 {
			got = append(got, recv(t, s).GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()...)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("body %q", got)
		}
	})
	t.Run("buffered answers the headers at once", func(t *testing.T) {
		s := rawStream(t, Buffered, 0)
		send(t, s, extproctest.RequestHeadersMessage(postHeaders, false))
		if hr := recv(t, s).GetRequestHeaders(); hr == nil || hr.GetResponse().GetHeaderMutation() != nil {
			t.Fatalf("headers reply %v", hr)
		}
		send(t, s, extproctest.RequestBodyMessage(body, true))
		br := recv(t, s).GetRequestBody().GetResponse()
		if br.GetHeaderMutation().GetSetHeaders()[0].GetHeader().GetKey() != wire.HeaderModelName || !br.GetClearRouteCache() || br.GetBodyMutation() != nil {
			t.Fatalf("body reply %v", br)
		}
	})
}
