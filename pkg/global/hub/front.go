package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/wire"
)

// pick parses an OpenAI body and picks a member for it; stream is whether
// the response streams. The decision keeps the prompt (for a retry), so each
// request parses with its own buffer.
func (h *Hub) pick(ctx context.Context, headers map[string]string, body []byte) (d *global.Decision, stream bool, apiErr *apierror.Error) {
	var parser requestbody.Parser
	parsed, apiErr := parser.Parse(body)
	if apiErr != nil {
		return nil, false, apiErr
	}
	req := &scheduling.Request{Model: parsed.Model, Prompt: parsed.Prompt, Body: body, Headers: headers}
	start := time.Now()
	d, apiErr = h.picker.Pick(ctx, req, false, h.now())
	h.metrics.pickDuration.Observe(time.Since(start).Seconds())
	if apiErr != nil {
		h.metrics.requests.WithLabelValues("", outcomeRejected).Inc()
		h.log.Info("request not routed", "model", parsed.Model, "status", apiErr.Status, "message", apiErr.Message)
	}
	return d, parsed.Stream, apiErr
}

// retry ends d as a failure (o) before the first byte and picks another
// member, once; nil and the client's error when there is none.
func (h *Hub) retry(d *global.Decision, o health.Outcome, cause error) (*global.Decision, *apierror.Error) {
	h.metrics.requests.WithLabelValues(d.Member, outcome(o)).Inc()
	next, apiErr := h.picker.Retry(d, o, h.now())
	if apiErr == nil {
		h.metrics.retries.Inc()
		h.log.Warn("retrying on another member", "failed", d.Member, "outcome", o.String(), "error", cause, "retry", next.Member)
	}
	return next, apiErr
}

// Front is the standalone HTTP front: the OpenAI inference paths, each
// request proxied to the picked member's gateway and, when that member fails
// before the first response byte (no connection, a reset, a 5xx) or sheds
// it (a 429: saturated), retried once on another; responses stream through
// as they arrive.
func (h *Hub) Front() http.Handler {
	t := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: h.opts.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	f := &front{hub: h, transport: t}
	mux := http.NewServeMux()
	for _, path := range inferencePaths {
		mux.HandleFunc("POST "+path, f.serve)
	}
	models := &servedModels{picker: h.picker}
	mux.Handle(wire.ModelsPath, models)
	mux.Handle(wire.ModelsPath+"/", models)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return h.door.Guard(apierror.Routes(mux, "The hub serves POST "+strings.Join(inferencePaths, ", ")+" and GET "+wire.ModelsPath+"."))
}

// servedModels answers GET /v1/models (and /v1/models/{id}) with the models
// the members' latest summaries list, as a member's gateway answers it with
// its own.
type servedModels struct {
	picker  *global.Picker
	catalog openaimodels.Catalog
}

func (s *servedModels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Each answer is the members' list as of now; the catalog keeps a
	// model's created time while the list holds it.
	s.catalog.Set(s.picker.ServedModels())
	s.catalog.ServeHTTP(w, r)
}

var inferencePaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"}

type front struct {
	hub       *Hub
	transport http.RoundTripper
}

func (f *front) serve(w http.ResponseWriter, r *http.Request) {
	h := f.hub
	// The hub's own time on the request: all of it but the waits for the
	// member (its answer's headers, then each read of its body).
	start, waited := time.Now(), time.Duration(0)
	defer func() { h.observeOverhead(time.Since(start) - waited) }()
	body, leave, ok := h.door.Enter(w, r)
	if !ok {
		return
	}
	defer leave()
	ctx := r.Context()
	if h.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.RequestTimeout)
		defer cancel()
	}
	d, _, apiErr := h.pick(ctx, scheduling.HeadersOf(r.Header), body)
	if apiErr != nil {
		apiErr.Write(w)
		return
	}
	for {
		sent := time.Now()
		resp, o, err := f.send(ctx, r, body, d)
		waited += time.Since(sent)
		if err != nil && ctx.Err() != nil {
			// The client left (or the request timed out): not the member's failure.
			h.picker.ObserveCompletion(d, h.now())
			if r.Context().Err() == nil {
				apierror.Unavailable("member cluster %s did not answer within the request timeout", d.Member).Write(w)
			}
			return
		}
		if err == nil && o == health.Success {
			waited += f.relay(ctx, w, resp, d)
			return
		}
		cause := err
		if resp != nil {
			cause = errors.New(resp.Status)
		}
		next, apiErr := h.retry(d, o, cause)
		if apiErr == nil {
			if resp != nil {
				resp.Body.Close()
			}
			d = next
			continue
		}
		if resp != nil {
			// No member to retry on: the member's own answer is the client's.
			copyWaited, _ := copyResponse(w, resp, d.Member)
			waited += copyWaited
			resp.Body.Close()
			return
		}
		h.log.Warn("request failed", "member", d.Member, "error", err, "reason", apiErr.Message)
		apiErr.Write(w)
		return
	}
}

// send sends the request to d's member; a failure is an error (or a 5xx
// response) with its outcome for health, and a 429 the member's shed.
func (f *front) send(ctx context.Context, in *http.Request, body []byte, d *global.Decision) (*http.Response, health.Outcome, error) {
	out, err := http.NewRequestWithContext(ctx, in.Method, "http://"+d.Address+in.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, health.Reset, err
	}
	for k, vs := range in.Header {
		if !hopByHop(k) {
			out.Header[k] = vs
		}
	}
	out.ContentLength = int64(len(body))
	resp, err := f.transport.RoundTrip(out)
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)):
		return nil, health.Timeout, err
	case err != nil:
		return nil, health.Reset, err
	case resp.StatusCode >= 500:
		return resp, health.Status5xx, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return resp, health.Shed, nil
	}
	return resp, health.Success, nil
}

// relay streams a response that began well to the client, flushing each
// read so that server-sent events pass as they arrive; waited is the time
// spent waiting for the member's body.
func (f *front) relay(ctx context.Context, w http.ResponseWriter, resp *http.Response, d *global.Decision) (waited time.Duration) {
	h := f.hub
	defer resp.Body.Close()
	h.picker.ObserveFirstByte(d, h.now())
	waited, err := copyResponse(w, resp, d.Member)
	// A read cut by the request's own end (the client left, or the request
	// timeout) is no failure of the member's.
	if err != nil && !errors.Is(err, errClientGone) && ctx.Err() == nil {
		h.picker.ObserveFailure(d, health.Reset, h.now())
		h.metrics.requests.WithLabelValues(d.Member, outcome(health.Reset)).Inc()
		h.log.Warn("member failed after the first byte", "member", d.Member, "error", err)
		// Cut the client's response too, so that it sees the answer broke
		// rather than a clean end of a truncated stream.
		panic(http.ErrAbortHandler)
	}
	h.picker.ObserveCompletion(d, h.now())
	h.metrics.requests.WithLabelValues(d.Member, outcomeOK).Inc()
	return waited
}

var errClientGone = errors.New("client gone")

// copyResponse writes resp to w, naming the member that answered; the error
// is the member's (a broken stream), or errClientGone. waited is the time
// its reads of the member's body took.
func copyResponse(w http.ResponseWriter, resp *http.Response, member string) (waited time.Duration, err error) {
	for k, vs := range resp.Header {
		if !hopByHop(k) && !strings.EqualFold(k, "Content-Length") {
			w.Header()[k] = vs
		}
	}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.Header().Set(wire.HeaderGlobalMember, member)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		readAt := time.Now()
		n, err := resp.Body.Read(buf)
		waited += time.Since(readAt)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return waited, errClientGone
			}
			_ = rc.Flush()
		}
		if errors.Is(err, io.EOF) {
			return waited, nil
		}
		if err != nil {
			return waited, err
		}
	}
}

func hopByHop(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}
