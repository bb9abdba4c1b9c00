package extproctest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/igw-dev/igw/internal/extproc"
)

// scripted is an ext_proc server whose behaviour each test writes as a function.
type scripted struct {
	extprocv3.UnimplementedExternalProcessorServer
	fn func(s extprocv3.ExternalProcessor_ProcessServer) error
}

func (s scripted) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	return s.fn(stream)
}

// recorder keeps what the server received, for assertions after the exchange.
type recorder struct {
	mu   sync.Mutex
	msgs []*extprocv3.ProcessingRequest
}

func (r *recorder) add(m *extprocv3.ProcessingRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *recorder) all() []*extprocv3.ProcessingRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*extprocv3.ProcessingRequest(nil), r.msgs...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func setRaw(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)}}
}

func headersReply(dir direction, cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	hr := &extprocv3.HeadersResponse{Response: cr}
	if dir == responsePath {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: hr}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr}}
}

func bodyReply(dir direction, cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{Response: cr}
	if dir == responsePath {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
}

func streamed(body []byte, eos bool) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: eos}}}
}

// drain reads until the client half-closes.
func drain(s extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// bufferingRouter is what BBR and EPP do in full-duplex mode: hold the whole body,
// then reply with headers (set + clear cache) and the body back in two pieces.
func bufferingRouter(rec *recorder) scripted {
	return scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		var body []byte
		for {
			m, err := s.Recv()
			if err != nil {
				return err
			}
			rec.add(m)
			if b := m.GetRequestBody(); b != nil {
				body = append(body, b.GetBody()...)
				if !b.GetEndOfStream() {
					continue
				}
			} else if !m.GetRequestHeaders().GetEndOfStream() {
				continue
			}
			break
		}
		if err := s.Send(headersReply(requestPath, &extprocv3.CommonResponse{
			HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-picked", "yes")}},
			ClearRouteCache: true,
		})); err != nil {
			return err
		}
		half := len(body) / 2
		for _, part := range []struct {
			b   []byte
			eos bool
		}{{body[:half], false}, {body[half:], true}} {
			if err := s.Send(bodyReply(requestPath, &extprocv3.CommonResponse{BodyMutation: streamed(part.b, part.eos)})); err != nil {
				return err
			}
		}
		return drain(s)
	}}
}

func TestStreamedRequestIsChunkedAndReassembled(t *testing.T) {
	rec := &recorder{}
	c := Start(t, bufferingRouter(rec), Config{ChunkSize: 1000})
	body := bytes.Repeat([]byte("abcdefghij"), 450) // 4500 bytes: five chunks
	res, err := c.Process(ctxT(t), PostJSON("/v1/completions", body))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.RequestHeaders.Get("x-picked"); got != "yes" {
		t.Errorf("x-picked = %q, want yes", got)
	}
	if res.RequestHeaders.Get(":path") != "/v1/completions" {
		t.Errorf("original headers lost: %v", res.RequestHeaders)
	}
	if _, ok := res.RequestHeaders.Lookup("content-length"); ok {
		t.Error("content-length must be dropped in FULL_DUPLEX_STREAMED mode")
	}
	if !bytes.Equal(res.RequestBody, body) {
		t.Errorf("body changed: got %d bytes", len(res.RequestBody))
	}
	if !res.RouteCacheCleared {
		t.Error("route cache not cleared")
	}
	if len(res.Ignored) != 0 {
		t.Errorf("unexpected ignored mutations: %v", res.Ignored)
	}

	msgs := rec.all()
	if len(msgs) != 6 {
		t.Fatalf("server got %d messages, want headers + 5 chunks", len(msgs))
	}
	pc := msgs[0].GetProtocolConfig()
	if pc.GetRequestBodyMode() != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		t.Errorf("first message protocol_config = %v", pc)
	}
	if msgs[1].GetProtocolConfig() != nil {
		t.Error("protocol_config must only be on the first message")
	}
	if msgs[0].GetRequestHeaders().GetEndOfStream() {
		t.Error("headers carry end_of_stream although a body follows")
	}
	for i, m := range msgs[1:] {
		b := m.GetRequestBody()
		wantEOS := i == 4
		if b.GetEndOfStream() != wantEOS || (i < 4 && len(b.GetBody()) != 1000) || (i == 4 && len(b.GetBody()) != 500) {
			t.Errorf("chunk %d: %d bytes eos=%v", i, len(b.GetBody()), b.GetEndOfStream())
		}
	}
	if v := msgs[0].GetRequestHeaders().GetHeaders().GetHeaders()[0]; len(v.GetRawValue()) == 0 || v.GetValue() != "" {
		t.Errorf("headers must travel in raw_value only: %v", v)
	}
}

func TestBufferedRequestHeaderMutationFromBodyReply(t *testing.T) {
	rec := &recorder{}
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		rec.add(m)
		if err := s.Send(headersReply(requestPath, &extprocv3.CommonResponse{})); err != nil {
			return err
		}
		m, err = s.Recv()
		if err != nil {
			return err
		}
		rec.add(m)
		if err := s.Send(bodyReply(requestPath, &extprocv3.CommonResponse{
			HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-model", "m1")}},
			ClearRouteCache: true,
		})); err != nil {
			return err
		}
		return drain(s)
	}}
	c := Start(t, srv, Config{RequestBodyMode: Buffered, ChunkSize: 10})
	body := []byte(`{"model":"m1","prompt":"a long enough prompt to need many chunks"}`)
	res, err := c.Process(ctxT(t), PostJSON("/v1/completions", body))
	if err != nil {
		t.Fatal(err)
	}
	if res.RequestHeaders.Get("x-model") != "m1" || !res.RouteCacheCleared {
		t.Errorf("headers %v cleared=%v", res.RequestHeaders, res.RouteCacheCleared)
	}
	if res.RequestHeaders.Get("content-length") == "" {
		t.Error("BUFFERED mode keeps content-length")
	}
	if !bytes.Equal(res.RequestBody, body) {
		t.Errorf("body = %q", res.RequestBody)
	}
	msgs := rec.all()
	if len(msgs) != 2 || !bytes.Equal(msgs[1].GetRequestBody().GetBody(), body) || !msgs[1].GetRequestBody().GetEndOfStream() {
		t.Errorf("BUFFERED must send the body whole in one message: %v", msgs)
	}
	if msgs[0].GetProtocolConfig().GetRequestBodyMode() != filterv3.ProcessingMode_BUFFERED {
		t.Errorf("protocol_config = %v", msgs[0].GetProtocolConfig())
	}
}

// oneReply answers the request headers with cr and ends the request path.
func oneReply(cr *extprocv3.CommonResponse) scripted {
	return scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		if err := s.Send(headersReply(requestPath, cr)); err != nil {
			return err
		}
		return drain(s)
	}}
}

func getRequest() Request {
	return Request{Headers: NewHeaders(":method", "GET", ":path", "/v1/models", "host", "gw",
		"a", "1", "a", "2", "b", "keep", "c", "old", "x-envoy-foo", "e")}
}

func TestHeaderMutationFollowsEnvoyRules(t *testing.T) {
	mut := &extprocv3.HeaderMutation{
		RemoveHeaders: []string{"B", ":path", "host"},
		SetHeaders: []*corev3.HeaderValueOption{
			setRaw("a", "set"), // default: overwrite every "a"
			{Header: &corev3.HeaderValue{Key: "c", RawValue: []byte("appended")}, Append: wrapperspb.Bool(true)},
			{Header: &corev3.HeaderValue{Key: "d", RawValue: []byte("new")}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
			{Header: &corev3.HeaderValue{Key: "c", RawValue: []byte("no")}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
			{Header: &corev3.HeaderValue{Key: "zz", RawValue: []byte("no")}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS},
			setRaw(":authority", "evil"),
			setRaw("x-envoy-foo", "changed"),
			{Header: &corev3.HeaderValue{Key: "v", Value: "in-value-field"}},
			setRaw("X-Upper", "lowered"),
		},
	}
	c := Start(t, oneReply(&extprocv3.CommonResponse{HeaderMutation: mut}), Config{})
	res, err := c.Process(ctxT(t), getRequest())
	if err != nil {
		t.Fatal(err)
	}
	h := res.RequestHeaders
	check := func(key string, want ...string) {
		t.Helper()
		if got := h.Values(key); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	check("a", "set")
	check("b")
	check(":path", "/v1/models") // pseudo-headers cannot be removed
	check("host", "gw")
	check("c", "old", "appended")
	check("d", "new")
	check("zz")
	check(":authority")
	check("x-envoy-foo", "e")
	check("v", "") // Envoy reads raw_value only
	check("x-upper", "lowered")
	if len(res.Ignored) != 5 {
		t.Errorf("want 5 ignored mutations (:path, host, :authority, x-envoy-foo, value field), got %q", res.Ignored)
	}
	if res.RouteCacheCleared {
		t.Error("route cache cleared without clear_route_cache")
	}
}

func TestRejectedMutationsFailTheRequest(t *testing.T) {
	cases := map[string]*extprocv3.HeaderMutation{
		"value and raw_value": {SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "k", Value: "a", RawValue: []byte("a")}}}},
		"newline in value":    {SetHeaders: []*corev3.HeaderValueOption{setRaw("k", "a\nb")}},
		"space in name":       {SetHeaders: []*corev3.HeaderValueOption{setRaw("bad name", "v")}},
		"bad remove":          {RemoveHeaders: []string{"bad\x00"}},
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			c := Start(t, oneReply(&extprocv3.CommonResponse{HeaderMutation: mut}), Config{})
			if _, err := c.Process(ctxT(t), getRequest()); err == nil {
				t.Error("want an error: Envoy rejects this mutation")
			}
		})
	}
}

func TestClearRouteCacheNeedsHeaderMutation(t *testing.T) {
	c := Start(t, oneReply(&extprocv3.CommonResponse{ClearRouteCache: true}), Config{})
	res, err := c.Process(ctxT(t), getRequest())
	if err != nil {
		t.Fatal(err)
	}
	if res.RouteCacheCleared || len(res.Ignored) != 1 {
		t.Errorf("cleared=%v ignored=%v: Envoy ignores clear_route_cache without header_mutation", res.RouteCacheCleared, res.Ignored)
	}
}

func TestImmediateResponseMidStream(t *testing.T) {
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		for i := 0; i < 2; i++ { // headers and the first chunk
			if _, err := s.Recv(); err != nil {
				return err
			}
		}
		return s.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocv3.ImmediateResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_PayloadTooLarge},
				Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("content-type", "application/json")}},
				Body:    []byte(`{"error":{}}`),
				Details: "too_large",
			}}})
	}}
	c := Start(t, srv, Config{ChunkSize: 100})
	res, err := c.Process(ctxT(t), PostJSON("/v1/completions", bytes.Repeat([]byte("x"), 100_000)))
	if err != nil {
		t.Fatal(err)
	}
	ir := res.ImmediateResponse
	if ir == nil || ir.Status != 413 || ir.Headers.Get("content-type") != "application/json" || string(ir.Body) != `{"error":{}}` || ir.Details != "too_large" {
		t.Fatalf("immediate response = %+v", ir)
	}
	if len(ir.Headers.Values("content-type")) != 1 {
		t.Errorf("content-type must be replaced, not appended: %v", ir.Headers)
	}
}

func TestProtocolViolationsAreErrors(t *testing.T) {
	cases := map[string]struct {
		cfg Config
		fn  func(s extprocv3.ExternalProcessor_ProcessServer) error
	}{
		"body reply before headers reply": {Config{}, func(s extprocv3.ExternalProcessor_ProcessServer) error {
			if _, err := s.Recv(); err != nil {
				return err
			}
			return s.Send(bodyReply(requestPath, &extprocv3.CommonResponse{BodyMutation: streamed([]byte("x"), true)}))
		}},
		"plain body mutation in full duplex": {Config{}, func(s extprocv3.ExternalProcessor_ProcessServer) error {
			return answerBody(s, false, &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte("x")}})
		}},
		"streamed response in buffered mode": {Config{RequestBodyMode: Buffered}, func(s extprocv3.ExternalProcessor_ProcessServer) error {
			return answerBody(s, true, streamed([]byte("x"), true))
		}},
		"streamed response in streamed mode": {Config{RequestBodyMode: Streamed}, func(s extprocv3.ExternalProcessor_ProcessServer) error {
			return answerBody(s, true, streamed([]byte("x"), true))
		}},
		"content-length mismatch in buffered mode": {Config{RequestBodyMode: Buffered}, func(s extprocv3.ExternalProcessor_ProcessServer) error {
			return answerBody(s, true, &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte("shorter")}})
		}},
		"server closes early": {Config{}, func(s extprocv3.ExternalProcessor_ProcessServer) error { return nil }},
		"message after completion": {Config{}, func(s extprocv3.ExternalProcessor_ProcessServer) error {
			for {
				m, err := s.Recv()
				if err != nil {
					return err
				}
				if m.GetRequestBody().GetEndOfStream() {
					break
				}
			}
			for _, r := range []*extprocv3.ProcessingResponse{
				headersReply(requestPath, &extprocv3.CommonResponse{}),
				bodyReply(requestPath, &extprocv3.CommonResponse{BodyMutation: streamed([]byte(`{}`), true)}),
				headersReply(requestPath, &extprocv3.CommonResponse{}),
			} {
				if err := s.Send(r); err != nil {
					return err
				}
			}
			return drain(s)
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Start(t, scripted{fn: tc.fn}, tc.cfg)
			if _, err := c.Process(ctxT(t), PostJSON("/v1/completions", []byte(`{}`))); err == nil {
				t.Error("want a protocol error")
			}
		})
	}
}

func TestHeaderMutationInStreamedBodyReplyIsIgnored(t *testing.T) {
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		var body []byte
		for {
			m, err := s.Recv()
			if err != nil {
				return err
			}
			body = append(body, m.GetRequestBody().GetBody()...)
			if m.GetRequestBody().GetEndOfStream() {
				break
			}
		}
		if err := s.Send(headersReply(requestPath, &extprocv3.CommonResponse{})); err != nil {
			return err
		}
		if err := s.Send(bodyReply(requestPath, &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-late", "1")}},
			BodyMutation:   streamed(body, true),
		})); err != nil {
			return err
		}
		return drain(s)
	}}
	c := Start(t, srv, Config{})
	res, err := c.Process(ctxT(t), PostJSON("/v1/completions", []byte(`{"a":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	if res.RequestHeaders.Get("x-late") != "" || len(res.Ignored) != 1 {
		t.Errorf("header set from a streamed body reply must be ignored: %v %v", res.RequestHeaders, res.Ignored)
	}
}

func TestTrailersCloseTheStreamedBody(t *testing.T) {
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		if err := passHeaders(s); err != nil {
			return err
		}
		for {
			m, err := s.Recv()
			if err != nil {
				return err
			}
			if b := m.GetRequestBody(); b != nil {
				if b.GetEndOfStream() {
					return errors.New("end_of_stream set on a body followed by trailers")
				}
				if err := s.Send(bodyReply(requestPath, &extprocv3.CommonResponse{BodyMutation: streamed(b.GetBody(), false)})); err != nil {
					return err
				}
				continue
			}
			if m.GetRequestTrailers() == nil {
				return errors.New("want trailers")
			}
			if err := s.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
				RequestTrailers: &extprocv3.TrailersResponse{HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{setRaw("t2", "added")}}}}}); err != nil {
				return err
			}
			return drain(s)
		}
	}}
	c := Start(t, srv, Config{ChunkSize: 3})
	req := PostJSON("/x", []byte("0123456789"))
	req.Trailers = NewHeaders("t1", "v")
	res, err := c.Process(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.RequestBody) != "0123456789" || res.RequestTrailers.Get("t1") != "v" || res.RequestTrailers.Get("t2") != "added" {
		t.Errorf("body %q trailers %v", res.RequestBody, res.RequestTrailers)
	}
}

// passThroughWithResponse answers the request at once and plays back the response
// body in upper case, one reply per chunk, setting metadata along the way.
func passThroughWithResponse(rec *recorder) scripted {
	return replyEach(func(m *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		rec.add(m)
		var reply *extprocv3.ProcessingResponse
		switch {
		case m.GetRequestHeaders() != nil:
			reply = headersReply(requestPath, &extprocv3.CommonResponse{})
			reply.DynamicMetadata, _ = structpb.NewStruct(map[string]any{"envoy.lb": map[string]any{"a": "1"}})
		case m.GetRequestBody() != nil:
			b := m.GetRequestBody()
			reply = bodyReply(requestPath, &extprocv3.CommonResponse{BodyMutation: streamed(b.GetBody(), b.GetEndOfStream())})
			reply.DynamicMetadata, _ = structpb.NewStruct(map[string]any{"envoy.lb": map[string]any{"b": "2"}})
		case m.GetResponseHeaders() != nil:
			reply = headersReply(responsePath, &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
				SetHeaders: []*corev3.HeaderValueOption{setRaw("x-served-by", "pod-1")}}})
		case m.GetResponseBody() != nil:
			b := m.GetResponseBody()
			reply = bodyReply(responsePath, &extprocv3.CommonResponse{BodyMutation: streamed(bytes.ToUpper(b.GetBody()), b.GetEndOfStream())})
		}
		return reply
	})
}

// replyEach is a server that answers every message it receives with what
// reply makes of it, until the client half-closes.
func replyEach(reply func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse) scripted {
	return scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		return extproc.Serve(s, nil, func(m *extprocv3.ProcessingRequest) error { return s.Send(reply(m)) })
	}}
}

func TestResponsePathAndMetadata(t *testing.T) {
	rec := &recorder{}
	c := Start(t, passThroughWithResponse(rec), Config{})
	subset, _ := structpb.NewStruct(map[string]any{"x-gateway-destination-endpoint-subset": []any{"10.0.0.1:8000"}})
	req := PostJSON("/v1/chat/completions", []byte(`{"model":"m"}`))
	req.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb.subset_hint": subset}}
	req.Response = &Response{
		Headers: NewHeaders(":status", "200", "content-type", "text/event-stream"),
		Chunks:  [][]byte{[]byte("data: a\n\n"), []byte("data: b\n\n"), []byte("data: [DONE]\n\n")},
	}
	res, err := c.Process(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.DynamicMetadata["envoy.lb"]; got["a"] != "1" || got["b"] != "2" {
		t.Errorf("metadata not merged: %v", res.DynamicMetadata)
	}
	if res.ResponseHeaders.Get("x-served-by") != "pod-1" || res.ResponseHeaders.Get(":status") != "200" {
		t.Errorf("response headers %v", res.ResponseHeaders)
	}
	if len(res.ResponseChunks) != 3 || string(res.ResponseChunks[1].Body) != "DATA: B\n\n" || !res.ResponseChunks[2].EndOfStream {
		t.Errorf("response chunks %+v", res.ResponseChunks)
	}
	if string(res.ResponseBody) != "DATA: A\n\nDATA: B\n\nDATA: [DONE]\n\n" {
		t.Errorf("response body %q", res.ResponseBody)
	}
	for _, m := range rec.all() {
		if m.GetMetadataContext().GetFilterMetadata()["envoy.lb.subset_hint"] == nil {
			t.Fatalf("metadata_context missing from %v", m)
		}
	}
}

func TestBufferedResponseIsOneMessage(t *testing.T) {
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		steps := []func(m *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse{
			func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
				return headersReply(requestPath, &extprocv3.CommonResponse{})
			},
			func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
				return headersReply(responsePath, &extprocv3.CommonResponse{})
			},
			func(m *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
				if !m.GetResponseBody().GetEndOfStream() {
					return nil
				}
				return bodyReply(responsePath, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
					Mutation: &extprocv3.BodyMutation_Body{Body: append([]byte("got:"), m.GetResponseBody().GetBody()...)}}})
			},
		}
		for _, step := range steps {
			m, err := s.Recv()
			if err != nil {
				return err
			}
			r := step(m)
			if r == nil {
				return errors.New("unexpected message")
			}
			if err := s.Send(r); err != nil {
				return err
			}
		}
		return drain(s)
	}}
	c := Start(t, srv, Config{ResponseBodyMode: Buffered})
	req := Request{Headers: NewHeaders(":method", "GET", ":path", "/")}
	req.Response = &Response{Headers: NewHeaders(":status", "200"), Chunks: [][]byte{[]byte("ab"), []byte("cd")}}
	res, err := c.Process(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.ResponseBody) != "got:abcd" || len(res.ResponseChunks) != 1 {
		t.Errorf("response body %q chunks %d", res.ResponseBody, len(res.ResponseChunks))
	}
}

func TestNewHeadersLowercasesAndKeepsOrder(t *testing.T) {
	h := NewHeaders("Content-Type", "a", "X-B", "1", "x-b", "2")
	if h.Get("content-type") != "a" || strings.Join(h.Values("X-B"), ",") != "1,2" {
		t.Errorf("%v", h)
	}
	if _, ok := h.Lookup("missing"); ok {
		t.Error("missing key reported present")
	}
}

// passHeaders receives the request headers and lets them through unchanged.
func passHeaders(s extprocv3.ExternalProcessor_ProcessServer) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	return s.Send(headersReply(requestPath, &extprocv3.CommonResponse{}))
}

// answerBody passes the request headers, receives the body first when it
// comes buffered (a full-duplex server may answer before it), and answers the
// body with m.
func answerBody(s extprocv3.ExternalProcessor_ProcessServer, buffered bool, m *extprocv3.BodyMutation) error {
	if err := passHeaders(s); err != nil {
		return err
	}
	if buffered {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
	return s.Send(bodyReply(requestPath, &extprocv3.CommonResponse{BodyMutation: m}))
}

func TestStreamedResponseChunksAreAnsweredOneByOne(t *testing.T) {
	var announced atomic.Int32 // set by the server goroutine
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		for {
			m, err := s.Recv()
			if err != nil {
				return nil // the client half-closed
			}
			if pc := m.GetProtocolConfig(); pc != nil {
				announced.Store(int32(pc.GetResponseBodyMode()))
			}
			var r *extprocv3.ProcessingResponse
			switch {
			case m.GetRequestHeaders() != nil:
				r = headersReply(requestPath, &extprocv3.CommonResponse{})
			case m.GetResponseHeaders() != nil:
				r = headersReply(responsePath, &extprocv3.CommonResponse{})
			case string(m.GetResponseBody().GetBody()) == "cd":
				r = bodyReply(responsePath, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
					Mutation: &extprocv3.BodyMutation_Body{Body: []byte("CD")}}})
			default:
				r = bodyReply(responsePath, &extprocv3.CommonResponse{})
			}
			if err := s.Send(r); err != nil {
				return err
			}
		}
	}}
	c := Start(t, srv, Config{ResponseBodyMode: Streamed})
	req := Request{Headers: NewHeaders(":method", "GET", ":path", "/")}
	req.Response = &Response{Headers: NewHeaders(":status", "200"), Chunks: [][]byte{[]byte("ab"), []byte("cd"), []byte("ef")}}
	res, err := c.Process(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := filterv3.ProcessingMode_BodySendMode(announced.Load()); got != filterv3.ProcessingMode_STREAMED {
		t.Errorf("announced response body mode %v", got)
	}
	if string(res.ResponseBody) != "abCDef" || len(res.ResponseChunks) != 3 || !res.ResponseChunks[2].EndOfStream || res.ResponseChunks[1].EndOfStream {
		t.Errorf("response body %q chunks %+v", res.ResponseBody, res.ResponseChunks)
	}
}
