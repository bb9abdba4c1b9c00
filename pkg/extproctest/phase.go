package extproctest

import (
	"fmt"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

type direction int

const (
	requestPath direction = iota
	responsePath
)

func (d direction) String() string {
	if d == responsePath {
		return "response"
	}
	return "request"
}

// phase is one direction of the exchange: headers, body, trailers, and what the
// server's replies did to them.
type phase struct {
	dir         direction
	mode        BodyMode
	headers     Headers
	chunks      [][]byte // the body as Envoy sends it
	trailers    Headers
	hasTrailers bool
	metadata    *corev3.Metadata
	attributes  map[string]*structpb.Struct // sent with the headers
	pace        time.Duration               // pause before each streamed message after the first

	// body is what Envoy forwards: in Buffered mode the held original as mutated,
	// in FullDuplexStreamed mode the concatenation of the server's streamed replies.
	body     []byte
	returned []Chunk

	headersDone, bodyDone, trailersDone bool
	stopSending                         func()
}

func (p *phase) done() bool { return p.headersDone && p.bodyDone && p.trailersDone }

// outgoing is a message and the reply state that must be reached before Envoy
// sends the next one in Buffered mode.
type outgoing struct {
	msg     *extprocv3.ProcessingRequest
	waitFor *bool
}

// messages builds everything Envoy sends for this phase. They are built up front so
// the streaming sender never reads state the receiver mutates.
func (p *phase) messages() []outgoing {
	out := []outgoing{{headersMessage(p.dir, p.headers, len(p.chunks) == 0 && !p.hasTrailers), &p.headersDone}}
	chunkReplied := &p.bodyDone
	if p.mode == Streamed {
		chunkReplied = new(true) // chunks go as they arrive; the replies are awaited after the last
	}
	for i, c := range p.chunks {
		out = append(out, outgoing{bodyMessage(p.dir, c, i == len(p.chunks)-1 && !p.hasTrailers), chunkReplied})
	}
	if p.hasTrailers {
		out = append(out, outgoing{trailersMessage(p.dir, p.trailers), &p.trailersDone})
	}
	for _, o := range out {
		o.msg.MetadataContext = p.metadata
	}
	out[0].msg.Attributes = p.attributes
	return out
}

// run plays the phase; on return either the phase is done or the server answered
// with an immediate response.
func (x *exchange) run(p *phase) error {
	p.bodyDone = len(p.chunks) == 0
	p.trailersDone = !p.hasTrailers
	if p.mode == Buffered {
		for _, c := range p.chunks {
			p.body = append(p.body, c...)
		}
	}
	msgs := p.messages()
	var err error
	if p.mode != FullDuplexStreamed {
		err = x.runBuffered(p, msgs)
	} else {
		err = x.runStreamed(p, msgs)
	}
	if err == nil && x.res.ImmediateResponse == nil && p.mode == FullDuplexStreamed {
		p.headers.remove("content-length")
	}
	return err
}

// runBuffered sends each part and waits for its reply before the next, as Envoy
// does; Streamed chunks are not waited for one by one, but before the phase ends.
func (x *exchange) runBuffered(p *phase, msgs []outgoing) error {
	p.stopSending = func() {}
	for _, o := range msgs {
		if p.done() {
			break // CONTINUE_AND_REPLACE ended the phase early
		}
		if err := x.send(o.msg); err != nil {
			if _, rerr := x.recv(); rerr != nil {
				return rerr
			}
			return fmt.Errorf("extproctest: send: %w", err)
		}
		for !*o.waitFor {
			m, err := x.recv()
			if err != nil {
				return err
			}
			if err := x.handle(p, m); err != nil || x.res.ImmediateResponse != nil {
				return err
			}
		}
	}
	for !p.done() {
		m, err := x.recv()
		if err != nil {
			return err
		}
		if err := x.handle(p, m); err != nil || x.res.ImmediateResponse != nil {
			return err
		}
	}
	return nil
}

// runStreamed sends everything without waiting, as FULL_DUPLEX_STREAMED does, while
// reading replies until the phase completes.
func (x *exchange) runStreamed(p *phase, msgs []outgoing) error {
	stop := make(chan struct{})
	sent := make(chan struct{})
	stopped := false
	p.stopSending = func() {
		if !stopped {
			stopped = true
			close(stop)
		}
	}
	go func() {
		defer close(sent)
		for i, o := range msgs {
			if i > 0 && p.pace > 0 {
				select {
				case <-stop:
					return
				case <-time.After(p.pace):
				}
			}
			select {
			case <-stop:
				return
			default:
			}
			if x.send(o.msg) != nil {
				return // the receive side reports why the stream broke
			}
		}
	}()
	for !p.done() && x.res.ImmediateResponse == nil {
		m, err := x.recv()
		if err == nil {
			err = x.handle(p, m)
		}
		if err != nil {
			p.stopSending()
			return err // the caller cancels the stream, which releases the sender
		}
	}
	p.stopSending()
	<-sent
	return nil
}

func (x *exchange) handle(p *phase, m *extprocv3.ProcessingResponse) error {
	switch r := m.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		ir, err := immediateFrom(r.ImmediateResponse, &x.res.Ignored)
		x.res.ImmediateResponse = ir
		p.stopSending()
		return err
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return x.onHeaders(p, requestPath, r.RequestHeaders.GetResponse())
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return x.onHeaders(p, responsePath, r.ResponseHeaders.GetResponse())
	case *extprocv3.ProcessingResponse_RequestBody:
		return x.onBody(p, requestPath, r.RequestBody.GetResponse())
	case *extprocv3.ProcessingResponse_ResponseBody:
		return x.onBody(p, responsePath, r.ResponseBody.GetResponse())
	case *extprocv3.ProcessingResponse_RequestTrailers:
		return x.onTrailers(p, requestPath, r.RequestTrailers)
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return x.onTrailers(p, responsePath, r.ResponseTrailers)
	case *extprocv3.ProcessingResponse_StreamedImmediateResponse:
		return fmt.Errorf("extproctest: streamed_immediate_response is not supported")
	default:
		return fmt.Errorf("extproctest: reply with no response set: %v", m)
	}
}

func spurious(what string, dir direction, p *phase) error {
	return fmt.Errorf("extproctest: spurious %s %s reply during the %s path (Envoy fails the request)", dir, what, p.dir)
}

func (x *exchange) onHeaders(p *phase, dir direction, cr *extprocv3.CommonResponse) error {
	if dir != p.dir || p.headersDone {
		return spurious("headers", dir, p)
	}
	if err := applyHeaderMutation(&p.headers, cr.GetHeaderMutation(), &x.res.Ignored); err != nil {
		return fmt.Errorf("extproctest: %s headers reply: %w", dir, err)
	}
	x.clearRouteCache(p, cr)
	p.headersDone = true
	if cr.GetTrailers() != nil {
		x.res.Ignored = append(x.res.Ignored, "headers reply: trailers are not implemented by Envoy")
	}
	if cr.GetStatus() != extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
		if cr.GetBodyMutation() != nil {
			x.res.Ignored = append(x.res.Ignored, "headers reply: body_mutation needs status CONTINUE_AND_REPLACE")
		}
		return nil
	}
	// The server replaces the whole message; Envoy sends nothing more for it.
	if bm := cr.GetBodyMutation(); bm != nil {
		if bm.GetStreamedResponse() != nil {
			return fmt.Errorf("extproctest: CONTINUE_AND_REPLACE with a streamed_response body mutation")
		}
		p.body = mutateBody(p.body, bm)
		p.headers.remove("content-length")
	}
	p.bodyDone, p.trailersDone = true, true
	p.stopSending()
	return nil
}

func (x *exchange) onBody(p *phase, dir direction, cr *extprocv3.CommonResponse) error {
	if dir != p.dir || !p.headersDone || p.bodyDone {
		return spurious("body", dir, p)
	}
	if p.mode == Buffered {
		// Envoy still holds the headers while it buffers, so header mutations apply.
		if err := applyHeaderMutation(&p.headers, cr.GetHeaderMutation(), &x.res.Ignored); err != nil {
			return fmt.Errorf("extproctest: %s body reply: %w", dir, err)
		}
		if bm := cr.GetBodyMutation(); bm != nil {
			if bm.GetStreamedResponse() != nil {
				return fmt.Errorf("extproctest: streamed_response received in BUFFERED mode (Envoy rejects it)")
			}
			if cl, ok := p.headers.Lookup("content-length"); ok {
				if n, err := strconv.Atoi(cl); err == nil && n != len(bm.GetBody()) {
					return fmt.Errorf("extproctest: content-length %d does not match the mutated body of %d bytes (Envoy rejects it)", n, len(bm.GetBody()))
				}
			}
			p.body = mutateBody(p.body, bm)
		}
		x.clearRouteCache(p, cr)
		p.returned = append(p.returned, Chunk{Body: p.body, EndOfStream: !p.hasTrailers})
		p.bodyDone = true
		return nil
	}
	if p.mode == Streamed {
		return x.onStreamedChunk(p, dir, cr)
	}
	sr := cr.GetBodyMutation().GetStreamedResponse()
	if sr == nil {
		return fmt.Errorf("extproctest: %s body reply without streamed_response in FULL_DUPLEX_STREAMED mode (Envoy rejects it)", dir)
	}
	if cr.GetHeaderMutation() != nil {
		x.res.Ignored = append(x.res.Ignored, fmt.Sprintf("%s body reply: header_mutation is ignored in FULL_DUPLEX_STREAMED mode, the headers are already forwarded", dir))
	}
	x.clearRouteCache(p, cr)
	p.body = append(p.body, sr.GetBody()...)
	p.returned = append(p.returned, Chunk{Body: sr.GetBody(), EndOfStream: sr.GetEndOfStream()})
	if sr.GetEndOfStream() {
		p.bodyDone = true
	}
	return nil
}

// onStreamedChunk takes the reply to the next chunk Envoy holds in STREAMED mode.
func (x *exchange) onStreamedChunk(p *phase, dir direction, cr *extprocv3.CommonResponse) error {
	i := len(p.returned)
	if i >= len(p.chunks) {
		return spurious("body", dir, p)
	}
	chunk := p.chunks[i]
	if bm := cr.GetBodyMutation(); bm != nil {
		if bm.GetStreamedResponse() != nil {
			return fmt.Errorf("extproctest: streamed_response received in STREAMED mode (Envoy rejects it)")
		}
		chunk = mutateBody(chunk, bm)
	}
	if cr.GetHeaderMutation() != nil {
		x.res.Ignored = append(x.res.Ignored, fmt.Sprintf("%s body reply: header_mutation is ignored in STREAMED mode, the headers are already forwarded", dir))
	}
	p.body = append(p.body, chunk...)
	last := i == len(p.chunks)-1
	p.returned = append(p.returned, Chunk{Body: chunk, EndOfStream: last && !p.hasTrailers})
	p.bodyDone = last
	return nil
}

func (x *exchange) onTrailers(p *phase, dir direction, tr *extprocv3.TrailersResponse) error {
	if dir != p.dir || !p.hasTrailers || !p.headersDone || p.trailersDone {
		return spurious("trailers", dir, p)
	}
	if err := applyHeaderMutation(&p.trailers, tr.GetHeaderMutation(), &x.res.Ignored); err != nil {
		return fmt.Errorf("extproctest: %s trailers reply: %w", dir, err)
	}
	p.trailersDone = true
	p.bodyDone = true // the server answers trailers only after the body it streamed back
	return nil
}

// clearRouteCache records a route recomputation when Envoy would do one.
func (x *exchange) clearRouteCache(p *phase, cr *extprocv3.CommonResponse) {
	switch {
	case !cr.GetClearRouteCache():
	case p.dir == responsePath:
		x.res.Ignored = append(x.res.Ignored, "clear_route_cache is ignored on the response path")
	case cr.GetHeaderMutation() == nil:
		x.res.Ignored = append(x.res.Ignored, "clear_route_cache is ignored without a header_mutation in the same reply")
	default:
		x.res.RouteCacheCleared = true
	}
}

func mutateBody(body []byte, bm *extprocv3.BodyMutation) []byte {
	switch m := bm.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return append([]byte(nil), m.Body...)
	case *extprocv3.BodyMutation_ClearBody:
		if m.ClearBody {
			return nil
		}
	}
	return body
}

// RequestHeadersMessage is the message Envoy sends for request headers; endOfStream
// says the request has no body. For Client.Stream tests.
func RequestHeadersMessage(h Headers, endOfStream bool) *extprocv3.ProcessingRequest {
	return headersMessage(requestPath, h, endOfStream)
}

// RequestBodyMessage is the message Envoy sends for one request body chunk.
func RequestBodyMessage(chunk []byte, endOfStream bool) *extprocv3.ProcessingRequest {
	return bodyMessage(requestPath, chunk, endOfStream)
}

func headersMessage(dir direction, h Headers, eos bool) *extprocv3.ProcessingRequest {
	hh := &extprocv3.HttpHeaders{Headers: h.proto(), EndOfStream: eos}
	if dir == responsePath {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hh}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hh}}
}

func bodyMessage(dir direction, chunk []byte, eos bool) *extprocv3.ProcessingRequest {
	b := &extprocv3.HttpBody{Body: chunk, EndOfStream: eos}
	if dir == responsePath {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: b}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: b}}
}

func trailersMessage(dir direction, h Headers) *extprocv3.ProcessingRequest {
	t := &extprocv3.HttpTrailers{Trailers: h.proto()}
	if dir == responsePath {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: t}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: t}}
}
