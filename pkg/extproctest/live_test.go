package extproctest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// chunkWriter is a ResponseWriter that hands over what was written at each Flush.
type chunkWriter struct {
	*httptest.ResponseRecorder
	pending bytes.Buffer
	flushed chan string
}

func (w *chunkWriter) Write(b []byte) (int, error) {
	w.pending.Write(b)
	return w.ResponseRecorder.Write(b)
}

func (w *chunkWriter) Flush() {
	w.flushed <- w.pending.String()
	w.pending.Reset()
}

func TestLiveStreamsTheResponseAsItArrives(t *testing.T) {
	rec := &recorder{}
	c := Start(t, passThroughWithResponse(rec), Config{})
	l, err := c.Begin(ctxT(t), PostJSON("/v1/chat/completions", []byte(`{"model":"m"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if l.ImmediateResponse != nil || string(l.RequestBody) != `{"model":"m"}` || l.DynamicMetadata["envoy.lb"]["b"] != "2" {
		t.Fatalf("request path: %+v", l.Result)
	}
	upstream, send := io.Pipe()
	w := &chunkWriter{ResponseRecorder: httptest.NewRecorder(), flushed: make(chan string, 4)}
	done := make(chan error, 1)
	go func() {
		done <- l.Respond(200, NewHeaders("content-type", "text/event-stream", "content-length", "99"), upstream, w)
	}()
	if got := <-w.flushed; got != "" || w.Code != 200 || w.Header().Get("x-served-by") != "pod-1" || w.Header().Get("content-length") != "" {
		t.Fatalf("headers: %d %v, body %q", w.Code, w.Header(), got)
	}
	// Each chunk must reach the client before the upstream sends the next.
	expectEachChunkFlushed(t, send, w, "data: a\n\n", "data: b\n\n")
	endExchange(t, send, done, l)
	if w.Body.String() != "DATA: A\n\nDATA: B\n\n" {
		t.Fatalf("client body %q", w.Body.String())
	}
	last := rec.all()[len(rec.all())-1]
	if !last.GetResponseBody().GetEndOfStream() {
		t.Fatalf("the last message did not end the stream: %v", last)
	}
}

func TestLiveImmediateResponseOnTheRequestPath(t *testing.T) {
	srv := scripted{fn: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		return s.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_NotFound}, Body: []byte(`{"error":{}}`)}}})
	}}
	c := Start(t, srv, Config{})
	l, err := c.Begin(ctxT(t), PostJSON("/v1/completions", []byte(`{"model":"x"}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.ImmediateResponse == nil || l.ImmediateResponse.Status != http.StatusNotFound {
		t.Fatalf("immediate response %+v", l.ImmediateResponse)
	}
	if err := l.Respond(200, nil, bytes.NewReader(nil), httptest.NewRecorder()); err == nil {
		t.Fatal("Respond after an immediate response must fail")
	}
}

// failingBody yields one chunk, then fails as a reset upstream connection does.
type failingBody struct{ sent bool }

func (f *failingBody) Read(p []byte) (int, error) {
	if f.sent {
		return 0, errors.New("connection reset by peer")
	}
	f.sent = true
	return copy(p, "data: a\n\n"), nil
}

func TestLiveUpstreamFailureEndsTheExchange(t *testing.T) {
	c := Start(t, passThroughWithResponse(&recorder{}), Config{})
	l, err := c.Begin(ctxT(t), PostJSON("/v1/chat/completions", []byte(`{"model":"m"}`)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Respond(200, nil, &failingBody{}, httptest.NewRecorder()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connection reset by peer") {
			t.Fatalf("Respond returned %v, want the upstream's error", err)
		}
	case <-time.After(5 * time.Second):
		l.cancel()
		t.Fatal("Respond waits for a server reply that cannot come")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close after a failed response: %v", err)
		}
	case <-time.After(5 * time.Second):
		l.cancel()
		t.Fatal("Close half-closed a broken exchange and waits for the server")
	}
}

// upperCasingStreamedServer answers as a server behind Envoy's BUFFERED
// request and STREAMED response modes: one reply per message, each response
// chunk replaced by its upper case.
func upperCasingStreamedServer() scripted {
	return replyEach(func(m *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		switch {
		case m.GetRequestHeaders() != nil:
			return headersReply(requestPath, &extprocv3.CommonResponse{})
		case m.GetRequestBody() != nil:
			return bodyReply(requestPath, &extprocv3.CommonResponse{})
		case m.GetResponseHeaders() != nil:
			return headersReply(responsePath, &extprocv3.CommonResponse{})
		}
		upper := bytes.ToUpper(m.GetResponseBody().GetBody())
		return bodyReply(responsePath, &extprocv3.CommonResponse{
			BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: upper}}})
	})
}

func TestLiveStreamedResponseModeForwardsEachRepliedChunk(t *testing.T) {
	c := Start(t, upperCasingStreamedServer(), Config{RequestBodyMode: Buffered, ResponseBodyMode: Streamed})
	l, err := c.Begin(ctxT(t), PostJSON("/v1/chat/completions", []byte(`{"model":"m"}`)))
	if err != nil {
		t.Fatal(err)
	}
	upstream, send := io.Pipe()
	w := &chunkWriter{ResponseRecorder: httptest.NewRecorder(), flushed: make(chan string, 4)}
	done := make(chan error, 1)
	go func() {
		done <- l.Respond(200, NewHeaders("content-type", "text/event-stream"), upstream, w)
	}()
	if got := <-w.flushed; got != "" || w.Code != 200 {
		t.Fatalf("headers: %d, body %q", w.Code, got)
	}
	expectEachChunkFlushed(t, send, w, "data: a\n\n", "data: b\n\n")
	endExchange(t, send, done, l)
	if w.Body.String() != "DATA: A\n\nDATA: B\n\n" {
		t.Fatalf("client body %q", w.Body.String())
	}
}

// expectEachChunkFlushed writes each chunk upstream and requires it to reach
// the client, upper-cased by the server, before the next is written.
func expectEachChunkFlushed(t *testing.T, upstream io.Writer, w *chunkWriter, chunks ...string) {
	t.Helper()
	for _, chunk := range chunks {
		if _, err := upstream.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-w.flushed:
			if want := strings.ToUpper(chunk); got != want {
				t.Fatalf("client got %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %q did not reach the client while the upstream was still open", chunk)
		}
	}
}

// endExchange ends the upstream body, then requires Respond (its result on
// done) and the exchange to finish cleanly.
func endExchange(t *testing.T, upstream io.Closer, done <-chan error, l *Live) {
	t.Helper()
	upstream.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
