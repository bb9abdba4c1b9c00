package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/responsestream"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/wire"
)

// exchange is one proxied request: its pool, its pick and the response meter.
type exchange struct {
	pool     *pool
	pick     *Pick
	meter    responsestream.Meter
	status   int
	first    bool // the first output event was seen
	finished atomic.Bool
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// finish ends the pick's accounting once; complete is false when the
// response did not arrive whole.
func (x *exchange) finish(complete bool) {
	if !x.finished.CompareAndSwap(false, true) {
		return
	}
	usage, ok := x.meter.Finish()
	if x.pool.ends != nil {
		x.pool.ends.Record(!complete || x.status >= 500, x.pool.now())
	}
	if !complete || x.status >= 400 {
		x.pool.picker.ObserveFailure(x.pick, director.Failure{Status: x.status}, x.pool.now())
		return
	}
	out := 0
	if ok {
		out = usage.CompletionTokens
	}
	x.pool.picker.ObserveCompletion(x.pick, out, x.pool.now())
}

// observe meters one chunk of the response body.
func (x *exchange) observe(chunk []byte) {
	if x.status >= 400 {
		return
	}
	events := x.meter.Feed(chunk)
	if events == 0 {
		return
	}
	if !x.first {
		x.first = true
		x.pool.picker.ObserveFirstToken(x.pick, x.pool.now())
		events--
	}
	if events > 0 {
		x.pool.picker.ObserveTokens(x.pick, events, x.pool.now())
	}
}

// notJSON answers a body that is not JSON on an inference path.
func notJSON() *apierror.Error {
	return &apierror.Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
		Message: "Send a JSON body (Content-Type: application/json) naming a model: this gateway routes by model."}
}

// smallBody is the largest body whose parser goes back to the pool: a
// parser keeps its prompt buffer, which must not pin a huge prompt's memory
// outside the buffering budget.
const smallBody = 1 << 20

func (g *Gateway) serveInference(w http.ResponseWriter, r *http.Request) {
	body, leave, ok := g.door.Enter(w, r)
	if !ok {
		return
	}
	defer leave()
	// One pass over the body serves the router and the picker; the parser's
	// memory (the prompt) is in use until the pick.
	parser, pooled := new(requestbody.Parser), len(body) <= smallBody
	if pooled {
		parser = g.parsers.Get().(*requestbody.Parser)
	} else {
		parser.Grow(len(body)) // the prompt's share of the body's cost, allocated once
	}
	pk, p, stream, apiErr := g.route(r, body, parser)
	if pooled {
		g.parsers.Put(parser) // the prompt it holds is unused after the pick
	}
	if apiErr != nil {
		apiErr.Write(w)
		return
	}
	x := &exchange{pool: p, pick: pk, meter: responsestream.Meter{Streaming: stream}}
	defer x.finish(false)

	ctx := context.WithValue(r.Context(), exchangeKey{}, x)
	if g.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.clock.Wall(g.opts.RequestTimeout))
		defer cancel()
	}
	// The body goes on a copy of r: net/http keeps r after the handler, and
	// the body must be garbage once the budget has it back.
	out := r.WithContext(ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	g.proxy.ServeHTTP(w, out)
}

// route finds body's model and pool with the body-based router and picks an
// endpoint there, setting the router's headers on r. One scan by parser
// serves the router and the picker; stream is whether the response streams.
func (g *Gateway) route(r *http.Request, body []byte, parser *requestbody.Parser) (pk *Pick, p *pool, stream bool, apiErr *apierror.Error) {
	const none = false
	scanned := parser.Scan(body)
	dec, apiErr := g.bbr.RouteScanned(r.Header, body, scanned)
	if apiErr != nil {
		return nil, nil, none, apiErr
	}
	if dec.PassThrough {
		// Without a JSON body there is no model to check the route against:
		// such a request never reaches a server.
		return nil, nil, none, notJSON()
	}
	if p = g.poolFor(dec.Model, dec.BaseModel); p == nil {
		return nil, nil, none, apierror.ModelNotFound(dec.Model)
	}
	dec.Apply(r.Header)
	parsed, apiErr := scanned.Request()
	if apiErr != nil {
		return nil, nil, none, apiErr
	}
	// Reserved headers reach here only from trusted clients (guard).
	req := &scheduling.Request{Headers: scheduling.HeadersOf(r.Header), Body: body, Prompt: parsed.Prompt}
	if v := r.Header.Get(wire.HeaderPriority); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			req.Priority = n
		}
	}
	req.Model, req.Adapter = p.picker.Resolve(parsed.Model, dec.BaseModel)
	explain := g.opts.AllowDebugHeader && r.Header.Get(wire.HeaderDebug) == "1"
	pk, apiErr = p.picker.Pick(r.Context(), req, explain, p.now())
	return pk, p, parsed.Stream, apiErr
}

func (g *Gateway) newProxy() *httputil.ReverseProxy {
	dialer := &net.Dialer{Timeout: g.clock.Wall(g.opts.DialTimeout), KeepAlive: 30 * time.Second}
	base := &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			x := exchangeOf(pr.In.Context())
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = x.pick.Endpoint
			pr.Out.Host = ""
		},
		Transport: &retryTransport{base: base, firstByteTimeout: g.clock.Wall(g.opts.FirstByteTimeout)},
		// Flush every write: server-sent events reach the client as they arrive.
		FlushInterval:  -1,
		ModifyResponse: modifyResponse,
		ErrorHandler:   g.proxyError,
	}
}

// modifyResponse adds the score breakdown and meters the body.
func modifyResponse(resp *http.Response) error {
	x := exchangeOf(resp.Request.Context())
	if x == nil {
		return nil
	}
	x.status = resp.StatusCode
	if x.pick.Breakdown != "" {
		resp.Header.Set(wire.HeaderScoreBreakdown, x.pick.Breakdown)
	}
	resp.Body = &meteredBody{ReadCloser: resp.Body, x: x}
	return nil
}

func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if x := exchangeOf(r.Context()); x != nil {
		x.finish(false)
	}
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return // the client left
	}
	g.log.Warn("proxying failed", "error", err)
	e := &apierror.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_unavailable",
		Message: "The model server could not be reached: " + err.Error()}
	if errors.Is(err, context.DeadlineExceeded) {
		e.Status, e.Code, e.Message = http.StatusGatewayTimeout, "upstream_timeout", "The model server did not answer in time."
	}
	e.Write(w)
}

// meteredBody feeds the response to the exchange's meter as the proxy reads it.
type meteredBody struct {
	io.ReadCloser
	x *exchange
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.x.observe(p[:n])
	}
	if errors.Is(err, io.EOF) {
		b.x.finish(true)
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.ReadCloser.Close()
	b.x.finish(false)
	return err
}

// retryTransport sends a request to its pick's endpoint and, when that pod
// fails before the first byte of its answer, to the pick's next fallback
// (the picker's next choice, never the failed pod), moving the pick's
// accounting there and reporting the failure so health learns. Nothing has
// reached the client then: the proxy writes the response only once
// RoundTrip returns it, and RoundTrip returns a success only with its first
// body byte in hand. A pod that refused the connection never saw the
// request, so every fallback may be tried in turn; one that may have (a
// reset, a server error, no first byte within firstByteTimeout) costs the
// request its one retry. The last pod tried is never cut for slowness:
// with nowhere else to go, waiting is better than failing.
type retryTransport struct {
	base             http.RoundTripper
	firstByteTimeout time.Duration // wall clock; 0: none
}

// errFirstByteTimeout is a pod that sent no byte within the first-byte timeout.
var errFirstByteTimeout = errors.New("the model server sent no first byte in time")

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchangeOf(req.Context())
	if x == nil {
		return t.base.RoundTrip(req)
	}
	retried := false
	for {
		canRetry := len(x.pick.Fallbacks) > 0 && req.GetBody != nil && req.Context().Err() == nil
		timeout := time.Duration(0)
		if canRetry && !retried && x.meter.Streaming {
			timeout = t.firstByteTimeout
		}
		resp, err := t.attempt(req, timeout)
		failure, retriable := beforeFirstByte(resp, err)
		if !retriable || !canRetry || req.Context().Err() != nil || (retried && !isDialError(err)) {
			return resp, err
		}
		if resp != nil {
			discard(resp.Body)
		}
		retried = retried || !isDialError(err)
		next := x.pick.Fallbacks[0]
		x.pick.Endpoint, x.pick.Fallbacks = next, x.pick.Fallbacks[1:]
		x.pool.picker.Reroute(x.pick, failure, next, x.pool.now())
		body, berr := req.GetBody()
		if berr != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.URL.Host, req.Host, req.Body = next, "", body
	}
}

// attempt sends req once. A response it returns carries its first body byte
// already read (or the body's end), so that a pod that fails between its
// headers and its first byte fails here; timeout, when not 0, bounds the
// wait for that byte.
func (t *retryTransport) attempt(req *http.Request, timeout time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	// The first byte and the timer race for the attempt: whichever comes
	// first decides it, so a byte the client may get is never cut after.
	const waiting, arrived, timedOut = 0, 1, 2
	var state atomic.Int32
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() {
			if state.CompareAndSwap(waiting, timedOut) {
				cancel()
			}
		})
		defer timer.Stop()
	}
	failed := func(err error) (*http.Response, error) {
		cancel()
		if state.Load() == timedOut {
			err = errFirstByteTimeout
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return failed(err)
	}
	if retriableStatus(resp.StatusCode) {
		// A server error is known by its headers: its body is not awaited.
		state.CompareAndSwap(waiting, arrived)
		resp.Body = &primedBody{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	}
	head := make([]byte, 4<<10)
	n, rerr := resp.Body.Read(head)
	if !state.CompareAndSwap(waiting, arrived) || (n == 0 && rerr != nil && !errors.Is(rerr, io.EOF)) {
		resp.Body.Close()
		return failed(rerr)
	}
	resp.Body = &primedBody{ReadCloser: resp.Body, head: head[:n], err: rerr, cancel: cancel}
	return resp, nil
}

// beforeFirstByte reports whether an attempt's outcome is a pod's failure
// that another pod may not share, and the failure to report.
func beforeFirstByte(resp *http.Response, err error) (director.Failure, bool) {
	if err != nil {
		return director.Failure{}, true
	}
	return director.Failure{Status: resp.StatusCode}, retriableStatus(resp.StatusCode)
}

// retriableStatus: the server errors another pod may well not answer
// (501, a path the server lacks, would come from every pod alike).
func retriableStatus(code int) bool {
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// discard reads a little of an abandoned answer so that its connection may
// be reused, and closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	body.Close()
}

// primedBody is a response body whose first read (head, and the error it
// came with) already happened; closing it ends the attempt's context.
type primedBody struct {
	io.ReadCloser
	head   []byte
	err    error
	cancel context.CancelFunc
}

func (b *primedBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		if len(b.head) == 0 && b.err != nil {
			return n, b.err
		}
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.ReadCloser.Read(p)
}

func (b *primedBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// servedPaths ends the message of a 404 for a path the gateway does not serve.
var servedPaths = "The gateway serves POST " + strings.Join(InferencePaths, ", ") + " and GET " + wire.ModelsPath + "."
