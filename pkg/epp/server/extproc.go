// Package server is the picker's Envoy ext_proc server and its gRPC health
// service. It follows the body modes Envoy announces on each stream: request
// and response bodies FULL_DUPLEX_STREAMED (failing closed), or the request
// BUFFERED and the response STREAMED (what Envoy allows with
// failure_mode_allow, so a route can fail open).
//
// Request path, full duplex: headers are held until the body's end_of_stream,
// the body is parsed and scheduled, then one headers reply carries the
// destination header (primary then fallbacks), the envoy.lb dynamic metadata
// and clear_route_cache, and the body chunks are returned unchanged as streamed
// body replies. Buffered: the headers are answered at once, and the reply to
// the one body message carries the same decision, the body unchanged. No
// eligible endpoint is an ImmediateResponse 503, shedding a 429 with
// Retry-After, both with OpenAI-style JSON.
//
// Response path: chunks pass through unchanged while their server-sent events
// are timed (first token, inter-token) and the usage read; that feeds the
// chosen endpoint's learned speed and the metrics.
package server

import (
	"cmp"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/igw-dev/igw/internal/clock"
	"github.com/igw-dev/igw/internal/extproc"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/metrics"
	"github.com/igw-dev/igw/pkg/epp/responsestream"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/wire"
)

// DefaultMaxBodyBytes bounds a buffered request body.
const DefaultMaxBodyBytes = 64 << 20

// ExtProc implements the ext_proc service over a director.
type ExtProc struct {
	extprocv3.UnimplementedExternalProcessorServer

	Director *director.Director
	Metrics  *metrics.Metrics // optional
	Log      *slog.Logger     // optional
	// Now is the wall clock (time.Now when nil).
	Now func() time.Time
	// MaxBodyBytes bounds the buffered request body (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
	// Ends, when set, counts each routed request's end, failed when the
	// model server answered 5xx or the stream broke: the error rate the
	// global tier's summary reports.
	Ends interface {
		Record(failed bool, now time.Time)
	}
}

func (s *ExtProc) now() time.Time { return clock.Now(s.Now) }

func (s *ExtProc) log() *slog.Logger { return cmp.Or(s.Log, slog.Default()) }

// exchange is one HTTP request's state across its ext_proc stream; it answers
// the stream's messages (extproc.Exchange).
type exchange struct {
	s   *ExtProc
	srv extprocv3.ExternalProcessor_ProcessServer

	headers map[string]string
	subset  []string
	// chunks are the request body as received; they are sent back unchanged.
	chunks [][]byte
	// held counts the body and says when the request is whole.
	held extproc.HeldRequest
	// scratch holds the body joined as chunks arrive (from the second chunk
	// on, so that the copy overlaps the transfer) and the parser's buffer;
	// taken from scratchPool while the request path needs it.
	scratch *scratch
	// trusted are the request headers acted on, as the pipeline said when the
	// request came; debug: the client asked for the breakdown, and may.
	trusted director.TrustedHeaders
	debug   bool
	stream  bool
	// responseChunked: each response chunk is answered on its own, without a
	// streamed body mutation, as Envoy announced.
	responseChunked bool
	result          *director.Result
	meter           responsestream.Meter
	status          int
	done            bool
	// model is the name the body asked for; started is when the request's
	// headers came; responseBytes counts the response body (for the metrics).
	model         string
	started       time.Time
	responseBytes int64
}

// scratch is request-path memory reused across requests.
type scratch struct {
	body   []byte
	parser requestbody.Parser
}

// Reuse limits: buffers above maxPooledBytes are left to the garbage
// collector, and at most maxPooled scratches wait for reuse. A free list
// rather than a sync.Pool: the pool is emptied by every other collection,
// which at large bodies is every few requests, and a fresh buffer costs
// zeroing.
const (
	maxPooledBytes = 4 << 20
	maxPooled      = 8
)

var scratches struct {
	sync.Mutex
	free []*scratch
}

func (x *exchange) takeScratch() *scratch {
	if x.scratch != nil {
		return x.scratch
	}
	scratches.Lock()
	if n := len(scratches.free); n > 0 {
		x.scratch = scratches.free[n-1]
		scratches.free = scratches.free[:n-1]
	}
	scratches.Unlock()
	if x.scratch == nil {
		x.scratch = new(scratch)
	}
	return x.scratch
}

// releaseScratch returns the scratch memory; nothing may use the joined body
// or a prompt parsed from it afterwards.
func (x *exchange) releaseScratch() {
	sc := x.scratch
	if sc == nil {
		return
	}
	x.scratch = nil
	if cap(sc.body) > maxPooledBytes || sc.parser.Cap() > maxPooledBytes {
		return
	}
	sc.body = sc.body[:0]
	scratches.Lock()
	if len(scratches.free) < maxPooled {
		scratches.free = append(scratches.free, sc)
	}
	scratches.Unlock()
}

// addChunk keeps a body chunk and, from the second one on, appends it to the
// joined body.
func (x *exchange) addChunk(c []byte) {
	x.chunks = append(x.chunks, c)
	if len(x.chunks) == 1 {
		return
	}
	sc := x.takeScratch()
	if len(x.chunks) == 2 {
		want := len(x.chunks[0]) + len(c)
		if n, err := strconv.Atoi(x.headers[wire.HeaderContentLength]); err == nil && n > want && n <= maxPooledBytes {
			want = n
		}
		sc.body = append(slices.Grow(sc.body[:0], want), x.chunks[0]...)
	}
	sc.body = append(sc.body, c...)
}

// body is the whole request body; it aliases the scratch memory when the body
// came in more than one chunk.
func (x *exchange) body() []byte {
	switch len(x.chunks) {
	case 0:
		return nil
	case 1:
		return x.chunks[0]
	}
	return x.scratch.body
}

// Process handles one HTTP request's ext_proc stream.
func (s *ExtProc) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	x := &exchange{s: s, srv: srv}
	defer s.finish(x, false)
	defer x.releaseScratch()
	return extproc.Serve(srv, x.followAnnouncedModes, func(req *extprocv3.ProcessingRequest) error { return extproc.Dispatch(srv, req, x) })
}

var _ extproc.Exchange = (*exchange)(nil)

// RequestHeaders takes the request's headers. A buffered body comes only
// after the headers reply; the body reply routes.
func (x *exchange) RequestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) []*extprocv3.ProcessingResponse {
	x.headers = extproc.HeaderMap(h.GetHeaders())
	x.started = x.s.now()
	// The subset comes from the proxy's metadata, never from a header.
	x.subset = subsetHint(md)
	x.trusted = x.s.trustedHeaders()
	x.debug = x.trusted.Debug && x.headers[wire.HeaderDebug] == "1"
	whole, replies := x.held.Headers(h)
	if whole {
		return x.s.route(x.srv, x)
	}
	return replies
}

// RequestBody takes a chunk of the request's body; the last one routes.
func (x *exchange) RequestBody(b *extprocv3.HttpBody) []*extprocv3.ProcessingResponse {
	whole, tooLarge := x.held.Body(b, x.s.maxBody())
	if tooLarge != nil {
		return []*extprocv3.ProcessingResponse{x.s.immediate(extproc.Immediate("epp", tooLarge), x)}
	}
	if c := b.GetBody(); len(c) > 0 {
		x.addChunk(c)
	}
	if whole {
		return x.s.route(x.srv, x)
	}
	return nil
}

func (x *exchange) ResponseTrailers() { x.s.finish(x, true) }

func (s *ExtProc) trustedHeaders() director.TrustedHeaders {
	if p := s.Director.Pipeline(); p != nil {
		return p.Trusted
	}
	return director.TrustedHeaders{}
}

func (s *ExtProc) maxBody() int64 {
	if s.MaxBodyBytes > 0 {
		return s.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// immediate counts reply, which ends x, when it is an immediate response.
func (s *ExtProc) immediate(reply *extprocv3.ProcessingResponse, x *exchange) *extprocv3.ProcessingResponse {
	if ir := reply.GetImmediateResponse(); ir != nil && s.Metrics != nil {
		s.Metrics.Responses.WithLabelValues(metrics.Code(int(ir.GetStatus().GetCode()))).Inc()
		s.Metrics.Rejected(x.model, x.held.Size, int(ir.GetStatus().GetCode()))
	}
	x.done = true
	return reply
}

// followAnnouncedModes reads the body modes from the stream's first message;
// without it the modes are full duplex, which the picker was first built for.
func (x *exchange) followAnnouncedModes(pc *extprocv3.ProtocolConfiguration) {
	x.held.Buffered, x.responseChunked = extproc.BodyModes(pc)
}

// route schedules the buffered request and returns the replies for the
// request path: headers (+ metadata) then the body, or, when Envoy buffered
// the body, one body reply carrying both; or an immediate response.
func (s *ExtProc) route(srv extprocv3.ExternalProcessor_ProcessServer, x *exchange) []*extprocv3.ProcessingResponse {
	received := s.now()
	defer x.releaseScratch()
	req := &scheduling.Request{Headers: x.headers, Subset: x.subset}
	if body := x.body(); len(body) > 0 {
		parsed, perr := x.takeScratch().parser.Parse(body)
		if perr != nil {
			return s.reject(x, perr, "bad-request")
		}
		x.model = parsed.Model
		req.Model, req.Adapter = s.Director.ResolveModel(parsed.Model, x.headers[wire.HeaderBaseModelName])
		req.Prompt = parsed.Prompt
		req.Body = body
		x.stream = parsed.Stream
	}
	if p := x.headers[wire.HeaderPriority]; p != "" && x.trusted.Priority {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			req.Priority = n
		}
	}
	start := s.now()
	res, err := s.Director.ScheduleWaiting(srv.Context(), req, x.debug, s.now)
	req.Prompt, req.Body = "", nil // they share the scratch memory, which is about to be reused
	if s.Metrics != nil {
		took := s.now().Sub(start)
		s.Metrics.SchedulingDuration.Observe(took.Seconds())
		s.Metrics.Decisions.WithLabelValues(res.Reason).Inc()
		s.Metrics.Scheduled(took, err == nil)
	}
	if err != nil {
		return s.reject(x, err, res.Reason)
	}
	x.result = res
	x.meter = responsestream.Meter{Streaming: x.stream}
	if s.Metrics != nil {
		s.Metrics.Picks.WithLabelValues(res.Primary).Inc()
		s.Metrics.Routed(x.model, x.held.Size, res)
	}
	dest := res.Primary
	if len(res.Fallbacks) > 0 {
		dest += "," + strings.Join(res.Fallbacks, ",")
	}
	replies := extproc.Route(dest, x.held.Buffered, x.held.HeadersOnly, x.chunks)
	x.chunks = nil
	if s.Metrics != nil {
		s.Metrics.RequestPathLatency.Observe(s.now().Sub(received).Seconds())
	}
	return replies
}

func (s *ExtProc) reject(x *exchange, e *apierror.Error, reason string) []*extprocv3.ProcessingResponse {
	s.log().Info("request not routed", "status", e.Status, "reason", reason, "message", e.Message)
	if s.Metrics != nil {
		s.Metrics.Responses.WithLabelValues(metrics.Code(e.Status)).Inc()
		s.Metrics.Rejected(x.model, x.held.Size, e.Status)
	}
	x.done = true
	return []*extprocv3.ProcessingResponse{extproc.Immediate("epp", e)}
}

func (x *exchange) ResponseHeaders(h *extprocv3.HttpHeaders, _ map[string]*structpb.Struct) *extprocv3.ProcessingResponse {
	s := x.s
	hm := extproc.HeaderMap(h.GetHeaders())
	x.status, _ = strconv.Atoi(hm[wire.HeaderStatus])
	var set []*corev3.HeaderValueOption
	if x.debug && x.result != nil && x.result.Breakdown != nil {
		set = append(set, extproc.SetHeader(wire.HeaderScoreBreakdown, x.result.Breakdown.String()))
	}
	if h.GetEndOfStream() {
		s.finish(x, true)
	}
	cr := &extprocv3.CommonResponse{}
	if len(set) > 0 {
		cr.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: set}
	}
	return extproc.ResponseHeaders(cr)
}

func (x *exchange) ResponseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	s := x.s
	x.responseBytes += int64(len(b.GetBody()))
	if x.result != nil && !x.done && x.status < 400 {
		if events := x.meter.Feed(b.GetBody()); events > 0 {
			now := s.now()
			res := x.result
			if res.Request.FirstTokenAt().IsZero() {
				s.Director.ObserveFirstToken(res, now)
				if s.Metrics != nil {
					s.Metrics.TTFT.WithLabelValues(res.Primary).Observe(now.Sub(res.Request.PickedAt).Seconds())
					s.Metrics.FirstToken(x.model, now.Sub(res.Request.PickedAt))
				}
				events--
			}
			if events > 0 {
				last := res.Request.LastTokenAt()
				s.Director.ObserveTokens(res, events, now)
				if s.Metrics != nil {
					s.Metrics.InterToken.WithLabelValues(res.Primary).Observe(now.Sub(last).Seconds() / float64(events))
				}
			}
		}
	}
	if b.GetEndOfStream() {
		s.finish(x, true)
	}
	if x.responseChunked {
		return extproc.ResponseBody()
	}
	return extproc.ResponseChunk(b.GetBody(), b.GetEndOfStream())
}

// finish ends the pick's accounting once: complete is false when the stream
// broke before the response ended.
func (s *ExtProc) finish(x *exchange, complete bool) {
	if x.result == nil || x.done {
		return
	}
	x.done = true
	res := x.result
	usage, ok := x.meter.Finish()
	if s.Ends != nil {
		s.Ends.Record(!complete || x.status >= 500, s.now())
	}
	if complete && x.status < 400 {
		out := 0
		if ok {
			out = usage.CompletionTokens
		}
		s.Director.ObserveCompletion(res, out, s.now())
	} else {
		s.Director.ObserveFailure(res, director.Failure{Status: x.status}, s.now())
	}
	if s.Metrics == nil {
		return
	}
	code := "aborted"
	if complete {
		code = metrics.Code(x.status)
	}
	s.Metrics.Responses.WithLabelValues(code).Inc()
	if ok {
		s.Metrics.Tokens.WithLabelValues("prompt").Add(float64(usage.PromptTokens))
		s.Metrics.Tokens.WithLabelValues("completion").Add(float64(usage.CompletionTokens))
		s.Metrics.Tokens.WithLabelValues("cached").Add(float64(usage.CachedTokens))
	}
	outcome := metrics.Outcome{Status: x.status, Complete: complete, Duration: s.now().Sub(x.started), ResponseBytes: x.responseBytes}
	if ok {
		outcome.Usage = &metrics.Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, CachedTokens: usage.CachedTokens}
	}
	s.Metrics.Finished(x.model, outcome)
	sp := res.Endpoint.Speed()
	s.Metrics.PrefillRate.WithLabelValues(res.Primary).Set(sp.PrefillTokensPerSecond)
	s.Metrics.DecodeStep.WithLabelValues(res.Primary).Set(sp.DecodeStepSeconds)
}

// subsetHint reads the endpoints the proxy allows, given as a list of
// "ip:port" strings or one comma-separated string; nil when absent.
func subsetHint(md *corev3.Metadata) []string {
	ns := md.GetFilterMetadata()[wire.MetadataNamespaceSubsetHint]
	if ns == nil {
		return nil
	}
	v, ok := ns.GetFields()[wire.MetadataKeyDestinationSubset]
	if !ok {
		return nil
	}
	out := []string{}
	add := func(s string) {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		add(k.StringValue)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			add(e.GetStringValue())
		}
	}
	return out
}
