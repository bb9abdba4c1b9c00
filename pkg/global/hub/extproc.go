package hub

import (
	"net/http"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/igw-dev/igw/internal/extproc"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/wire"
)

// ExtProc is the hub's ext_proc server on Envoy's global route, speaking the
// protocol as the endpoint picker does (pkg/epp/server): the request held
// until its body ends (FULL_DUPLEX_STREAMED, or BUFFERED), then one headers
// reply naming the picked member's gateway and one fallback in
// x-gateway-destination-endpoint (Envoy's retry policy takes the fallback
// before the first byte), the body returned unchanged; no member: an
// immediate OpenAI-style 503 with the reason. The response passes through
// unchanged while its status and end feed the member's health.
type ExtProc struct {
	extprocv3.UnimplementedExternalProcessorServer
	Hub *Hub
}

func registerExtProc(s *grpc.Server, x *ExtProc) { extprocv3.RegisterExternalProcessorServer(s, x) }

// hubExchange is one HTTP request across its ext_proc stream; it answers the
// stream's messages (extproc.Exchange).
type hubExchange struct {
	s               *ExtProc
	srv             extprocv3.ExternalProcessor_ProcessServer
	headers         map[string]string
	held            extproc.HeldRequest
	chunks          [][]byte
	responseChunked bool
	decision        *global.Decision
	status          int
	responded, done bool
}

// Process handles one request's stream.
func (s *ExtProc) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	x := &hubExchange{s: s, srv: srv}
	defer s.end(x, false)
	return extproc.Serve(srv, func(pc *extprocv3.ProtocolConfiguration) {
		x.held.Buffered, x.responseChunked = extproc.BodyModes(pc)
	}, func(req *extprocv3.ProcessingRequest) error { return extproc.Dispatch(srv, req, x) })
}

var _ extproc.Exchange = (*hubExchange)(nil)

func (x *hubExchange) RequestHeaders(h *extprocv3.HttpHeaders, _ *corev3.Metadata) []*extprocv3.ProcessingResponse {
	x.headers = extproc.HeaderMap(h.GetHeaders())
	whole, replies := x.held.Headers(h)
	if whole {
		return x.s.route(x.srv, x)
	}
	return replies
}

func (x *hubExchange) RequestBody(b *extprocv3.HttpBody) []*extprocv3.ProcessingResponse {
	whole, tooLarge := x.held.Body(b, x.s.Hub.opts.MaxBodyBytes)
	if tooLarge != nil {
		x.done = true
		return []*extprocv3.ProcessingResponse{extproc.Immediate("global", tooLarge)}
	}
	if c := b.GetBody(); len(c) > 0 {
		x.chunks = append(x.chunks, c)
	}
	if whole {
		return x.s.route(x.srv, x)
	}
	return nil
}

func (x *hubExchange) ResponseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if b.GetEndOfStream() {
		x.s.end(x, true)
	}
	if x.responseChunked {
		return extproc.ResponseBody()
	}
	return extproc.ResponseChunk(b.GetBody(), b.GetEndOfStream())
}

func (x *hubExchange) ResponseTrailers() { x.s.end(x, true) }

// route picks a member for the held request and returns the request path's
// replies, or an immediate 503.
func (s *ExtProc) route(srv extprocv3.ExternalProcessor_ProcessServer, x *hubExchange) []*extprocv3.ProcessingResponse {
	body := joinChunks(x.chunks)
	d, _, apiErr := s.Hub.pick(srv.Context(), x.headers, body)
	if apiErr != nil {
		x.done = true
		return []*extprocv3.ProcessingResponse{extproc.Immediate("global", apiErr)}
	}
	x.decision = d
	replies := extproc.Route(d.Destination(), x.held.Buffered, x.held.HeadersOnly, x.chunks)
	x.chunks = nil
	return replies
}

func joinChunks(chunks [][]byte) []byte {
	if len(chunks) == 1 {
		return chunks[0]
	}
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	out := make([]byte, 0, n)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out
}

// creditServer moves x's decision to the member that answered, as the
// response's attributes name it (upstream.address): when Envoy retried on
// the fallback, the primary failed before the first byte and the fallback's
// outcome is the one the response reports. Without the attributes (a policy
// that does not ask for them) the primary keeps the request.
func (s *ExtProc) creditServer(x *hubExchange, attrs map[string]*structpb.Struct) {
	d := x.decision
	if d == nil || x.done {
		return
	}
	address, attempts := upstreamOf(attrs)
	if address == "" || address == d.Address {
		return
	}
	// Without the attempt count, an answer from the fallback is Envoy's
	// retry; from any other member, Envoy's own balancing (a member
	// addressed by host name matches no override).
	retried := attempts > 1 || (attempts == 0 && address == d.FallbackAddress)
	next, err := s.Hub.picker.ServedBy(d, address, retried, health.Reset, s.Hub.now())
	if err != nil {
		s.Hub.log.Warn("response from an unknown upstream; the picked member keeps the request", "member", d.Member, "upstream", address, "error", err)
		return
	}
	if retried {
		s.Hub.metrics.requests.WithLabelValues(d.Member, outcome(health.Reset)).Inc()
		s.Hub.metrics.retries.Inc()
	}
	x.decision = next
}

// upstreamOf reads the answering upstream's address and the attempts the
// request took (0: not sent) from Envoy's attributes.
func upstreamOf(attrs map[string]*structpb.Struct) (address string, attempts int) {
	fields := attrs[wire.ExtProcAttributesKey].GetFields()
	address = fields[wire.AttributeUpstreamAddress].GetStringValue()
	return address, int(fields[wire.AttributeUpstreamAttempts].GetNumberValue())
}

func (x *hubExchange) ResponseHeaders(h *extprocv3.HttpHeaders, attrs map[string]*structpb.Struct) *extprocv3.ProcessingResponse {
	s := x.s
	s.creditServer(x, attrs)
	x.status, _ = strconv.Atoi(extproc.HeaderMap(h.GetHeaders())[wire.HeaderStatus])
	x.responded = true
	if d := x.decision; d != nil && !x.done && x.status < 500 && x.status != http.StatusTooManyRequests {
		s.Hub.picker.ObserveFirstByte(d, s.Hub.now())
	}
	if h.GetEndOfStream() {
		s.end(x, true)
	}
	return extproc.ResponseHeaders(nil)
}

// end ends the decision once: a 5xx (Envoy has used its one retry by then)
// or a response cut short is the member's failure; a stream that ended
// without any response is the client leaving.
func (s *ExtProc) end(x *hubExchange, complete bool) {
	d := x.decision
	if d == nil || x.done {
		return
	}
	x.done = true
	now := s.Hub.now()
	switch {
	case x.status >= 500:
		s.Hub.picker.ObserveFailure(d, health.Status5xx, now)
		s.Hub.metrics.requests.WithLabelValues(d.Member, outcome(health.Status5xx)).Inc()
	case x.status == http.StatusTooManyRequests:
		// Shed by a saturated member: no fault. Envoy's retry policy (shared
		// with the model routes) does not retry a 429, so the client has it.
		s.Hub.picker.ObserveFailure(d, health.Shed, now)
		s.Hub.metrics.requests.WithLabelValues(d.Member, outcome(health.Shed)).Inc()
	case x.responded && !complete:
		s.Hub.picker.ObserveFailure(d, health.Reset, now)
		s.Hub.metrics.requests.WithLabelValues(d.Member, outcome(health.Reset)).Inc()
	default:
		s.Hub.picker.ObserveCompletion(d, now)
		if x.responded {
			s.Hub.metrics.requests.WithLabelValues(d.Member, outcomeOK).Inc()
		}
	}
}
