package bbr

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/igw-dev/igw/internal/extproc"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/wire"
)

// BodyMode is how Envoy's ext_proc filter sends request bodies to the router.
type BodyMode string

const (
	// Buffered: Envoy waits for the headers reply, then sends the whole body in
	// one message; the body reply carries the header mutation.
	Buffered BodyMode = "buffered"
	// Streamed is FULL_DUPLEX_STREAMED: Envoy sends the body in chunks without
	// waiting; the router holds the headers reply until the body is complete, then
	// sends it with the header mutation and returns the body as streamed chunks.
	Streamed BodyMode = "streamed"
)

// ParseBodyMode reads a --body-mode value.
func ParseBodyMode(s string) (BodyMode, error) {
	switch m := BodyMode(s); m {
	case Buffered, Streamed:
		return m, nil
	}
	return "", fmt.Errorf("body mode must be %q or %q, got %q", Buffered, Streamed, s)
}

// ExtProc is the router's Envoy ext_proc server. It acts on the request path
// only; anything it is sent of the response passes through unchanged.
type ExtProc struct {
	extprocv3.UnimplementedExternalProcessorServer

	Router *Router
	// BodyMode is the mode Envoy is configured with. Envoy announces its mode in
	// the first message of each stream (protocol_config); when it does, the
	// announced mode is followed and a mismatch is logged.
	BodyMode BodyMode
	Log      *slog.Logger // optional

	modeWarned atomic.Bool // a mode mismatch is logged once, not per request
}

// Process handles one HTTP request's ext_proc stream.
func (s *ExtProc) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	x := exchange{srv: srv, s: s, mode: s.BodyMode, responseStreamed: s.BodyMode == Streamed}
	defer func() {
		if x.session != nil {
			x.session.Close() // a stream that broke mid-body leaves its scan suspended
		}
	}()
	return extproc.Serve(srv, x.followAnnouncedModes, x.handle)
}

// exchange is one request's state across its stream.
type exchange struct {
	srv  extprocv3.ExternalProcessor_ProcessServer
	s    *ExtProc
	mode BodyMode
	// responseStreamed: response bodies come FULL_DUPLEX_STREAMED, so each needs a
	// streamed reply (the router is normally not sent the response at all).
	responseStreamed bool
	// ignoreBody: Envoy streams in a mode the router cannot route in; every
	// message is answered unchanged.
	ignoreBody bool

	session *Session
	// clientReserved are the reserved headers (pkg/wire.IsReservedHeader) the
	// request came with: every request loses them, routed or not, so that no
	// client steers the HTTPRoute match or the picker; the router sets its own.
	clientReserved []string
	// chunkEnds are the offsets in session.Body() where Envoy's chunks ended, so
	// the body goes back in the pieces it came in (each fits Envoy's limits).
	chunkEnds []int
	// headersAnswered: the request headers reply is sent; from then on streamed
	// chunks are answered as they come.
	headersAnswered bool
	// bodySeen: a request body message arrived; in streamed mode it must be returned.
	bodySeen bool
	// trailers: the request ends with trailers rather than with the body.
	trailers bool
	// routed: the body is complete and the decision sent.
	routed bool
	done   bool // an immediate response ended the exchange
}

func (x *exchange) followAnnouncedModes(pc *extprocv3.ProtocolConfiguration) {
	x.responseStreamed = pc.GetResponseBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	m := pc.GetRequestBodyMode()
	announced := Buffered
	switch m {
	case filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		announced = Streamed
	case filterv3.ProcessingMode_STREAMED:
		// Headers must be answered before the body and body replies cannot change
		// them: there is no way to route.
		x.ignoreBody = true
		x.s.warnModeOnce("Envoy sends request bodies in STREAMED mode, in which headers cannot be set from the body; passing requests through (use BUFFERED or FULL_DUPLEX_STREAMED)")
	}
	if announced != x.mode && !x.ignoreBody {
		x.s.warnModeOnce("Envoy's request body mode differs from --body-mode; following Envoy", "envoy", m.String(), "configured", string(x.mode))
	}
	x.mode = announced
}

func (x *exchange) handle(req *extprocv3.ProcessingRequest) error {
	if x.done {
		return nil // Envoy has sent the immediate response; what follows does not matter
	}
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return x.onHeaders(r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return x.onBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return x.onTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return x.send(extproc.ResponseHeaders(nil))
	case *extprocv3.ProcessingRequest_ResponseBody:
		if x.responseStreamed {
			return x.send(extproc.ResponseChunk(r.ResponseBody.GetBody(), r.ResponseBody.GetEndOfStream()))
		}
		return x.send(extproc.ResponseBody())
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return x.send(extproc.ResponseTrailers())
	}
	return status.Errorf(codes.InvalidArgument, "unexpected ext_proc message %T", req.Request)
}

func (x *exchange) onHeaders(h *extprocv3.HttpHeaders) error {
	x.clientReserved = reservedHeaders(h.GetHeaders().GetHeaders())
	if x.ignoreBody {
		x.session = &Session{passThrough: true}
		return x.answerHeaders(nil)
	}
	session, e := x.s.Router.Begin(envoyHeaders(h.GetHeaders().GetHeaders()))
	if e != nil {
		return x.reject(e)
	}
	x.session = session
	switch {
	case h.GetEndOfStream():
		// No body: nothing to route on.
		return x.decide()
	case x.mode == Buffered, session.PassThrough():
		// Buffered: Envoy sends the body only after this reply. Pass-through: the
		// headers go as they are, and streamed chunks are echoed as they come.
		return x.answerHeaders(nil)
	}
	return nil // streamed: held until the body is complete
}

func (x *exchange) onBody(b *extprocv3.HttpBody) error {
	if x.session == nil {
		return status.Error(codes.FailedPrecondition, "request body before request headers")
	}
	x.bodySeen = true
	chunk := b.GetBody()
	if x.session.PassThrough() || x.routed {
		if x.mode == Streamed {
			return x.send(extproc.RequestChunk(chunk, b.GetEndOfStream()))
		}
		return x.send(extproc.RequestBody(nil))
	}
	if e := x.session.Write(chunk); e != nil {
		return x.reject(e)
	}
	if len(chunk) > 0 {
		x.chunkEnds = append(x.chunkEnds, len(x.session.Body()))
	}
	// A buffered body is complete in its one message, even when trailers follow.
	if x.mode == Buffered || b.GetEndOfStream() {
		return x.decide()
	}
	return nil
}

func (x *exchange) onTrailers() error {
	if x.session != nil && !x.session.PassThrough() && !x.routed {
		// Streamed with trailers: the body ended without end_of_stream.
		x.trailers = true
		if err := x.decide(); err != nil || x.done {
			return err
		}
	}
	return x.send(extproc.RequestTrailers())
}

// decide finishes routing and sends the replies that carry the decision.
func (x *exchange) decide() error {
	d, e := x.session.Finish()
	if e != nil {
		return x.reject(e)
	}
	x.routed = true
	mutation := headerMutation(d)
	switch {
	case !x.headersAnswered:
		// Streamed, or a request without a body: the headers reply carries the decision.
		if err := x.answerHeaders(mutation); err != nil {
			return err
		}
		if x.mode == Streamed && x.bodySeen {
			return x.returnBody()
		}
		return nil
	default: // buffered: the body reply carries it; the body is not mutated
		return x.send(extproc.RequestBody(extproc.Routed(mutation)))
	}
}

// answerHeaders answers the request headers with mutation, plus the removal
// of the client's reserved headers.
func (x *exchange) answerHeaders(mutation *extprocv3.HeaderMutation) error {
	x.headersAnswered = true
	return x.send(extproc.RequestHeaders(extproc.Routed(withoutClientHeaders(mutation, x.clientReserved))))
}

// returnBody sends the held body back unchanged, in the chunks it came in (an
// empty body as one empty chunk). The last carries end_of_stream unless
// trailers end the request instead.
func (x *exchange) returnBody() error {
	chunks := make([][]byte, len(x.chunkEnds))
	body, start := x.session.Body(), 0
	for i, end := range x.chunkEnds {
		chunks[i], start = body[start:end], end
	}
	for _, r := range extproc.AppendRequestChunks(nil, chunks, x.trailers) {
		if err := x.send(r); err != nil {
			return err
		}
	}
	return nil
}

func (x *exchange) reject(e *apierror.Error) error {
	x.done = true
	x.s.log().Debug("request refused", "status", e.Status, "code", e.Code, "message", e.Message)
	return x.send(extproc.Immediate("bbr", e))
}

func (x *exchange) send(r *extprocv3.ProcessingResponse) error { return x.srv.Send(r) }

func (s *ExtProc) warnModeOnce(msg string, args ...any) {
	if !s.modeWarned.Swap(true) {
		s.log().Warn(msg, args...)
	}
}

func (s *ExtProc) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// headerMutation turns a decision into Envoy's terms; nil when nothing changes.
func headerMutation(d Decision) *extprocv3.HeaderMutation {
	set, remove := d.HeaderChanges()
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	m := &extprocv3.HeaderMutation{RemoveHeaders: remove}
	for _, kv := range set {
		m.SetHeaders = append(m.SetHeaders, extproc.SetHeader(kv[0], kv[1]))
	}
	return m
}

// reservedHeaders lists the reserved headers in Envoy's header map, each once
// (Envoy sends keys in lower case).
func reservedHeaders(h []*corev3.HeaderValue) []string {
	var out []string
	for _, hv := range h {
		if k := strings.ToLower(hv.GetKey()); wire.IsReservedHeader(k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// withoutClientHeaders adds the removal of the client's reserved headers to m
// (nil when there is nothing to do). A header m sets is not removed: the
// value m sets replaces the client's, whichever order the proxy applies the
// two lists in.
func withoutClientHeaders(m *extprocv3.HeaderMutation, clientReserved []string) *extprocv3.HeaderMutation {
	if len(clientReserved) == 0 {
		return m
	}
	if m == nil {
		m = &extprocv3.HeaderMutation{}
	}
	for _, k := range clientReserved {
		set := slices.ContainsFunc(m.SetHeaders, func(o *corev3.HeaderValueOption) bool { return strings.EqualFold(o.GetHeader().GetKey(), k) })
		if !set && !slices.Contains(m.RemoveHeaders, k) {
			m.RemoveHeaders = append(m.RemoveHeaders, k)
		}
	}
	return m
}

// envoyHeaders reads Envoy's header map (keys are lowercase; values come in
// raw_value, or in value from older proxies).
type envoyHeaders []*corev3.HeaderValue

func (h envoyHeaders) Get(key string) string {
	for _, hv := range h {
		if strings.EqualFold(hv.GetKey(), key) {
			return extproc.HeaderValue(hv)
		}
	}
	return ""
}
