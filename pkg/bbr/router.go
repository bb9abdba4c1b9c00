package bbr

import (
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/wire"
)

// MaxModelNameBytes bounds the model name: it becomes a request header, and Envoy
// fails requests whose headers grow past its limits.
const MaxModelNameBytes = 1024

// HeaderGetter reads request headers. http.Header satisfies it, as does the ext_proc
// server's view of Envoy's header map.
type HeaderGetter interface {
	Get(key string) string
}

// RouterConfig configures a Router.
type RouterConfig struct {
	// MaxRequestBodyBytes is the largest body accepted; larger ones get a 413
	// (DefaultMaxRequestBodyBytes when 0).
	MaxRequestBodyBytes int64
	// DefaultModel routes bodies without a model; empty means such bodies get a 400.
	DefaultModel string
	// Metrics records outcomes and parse times; nil records nothing.
	Metrics *Metrics
}

// Router decides where an OpenAI request goes from its body. It is transport-free:
// the ext_proc server drives it for Envoy, and an in-process gateway calls Route
// directly. It is safe for concurrent use.
type Router struct {
	cfg      RouterConfig
	adapters atomic.Pointer[map[string]string]
}

// NewRouter returns a Router with an empty adapter mapping.
func NewRouter(cfg RouterConfig) *Router {
	if cfg.MaxRequestBodyBytes <= 0 {
		cfg.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	r := &Router{cfg: cfg}
	r.SetAdapters(nil)
	return r
}

// SetAdapters replaces the LoRA adapter → base model mapping. The map must not be
// modified afterwards.
func (r *Router) SetAdapters(adapters map[string]string) {
	if adapters == nil {
		adapters = map[string]string{}
	}
	r.adapters.Store(&adapters)
}

// Adapters returns the mapping in use; callers must not modify it.
func (r *Router) Adapters() map[string]string { return *r.adapters.Load() }

// Decision is the routing outcome for one request.
type Decision struct {
	// PassThrough means the request is not a JSON request with a body: leave it untouched.
	PassThrough bool
	// Model is the value for the model header.
	Model string
	// BaseModel is set when Model is a LoRA adapter: the model the adapter runs on.
	BaseModel string
	// Defaulted says Model came from the configured default, not from the body.
	Defaulted bool
}

// HeaderChanges returns the headers a routed request must carry and those it must
// lose. The base model header is removed when Model is not an adapter, so that a
// client cannot pick a base model pool by sending the header itself.
func (d Decision) HeaderChanges() (set [][2]string, remove []string) {
	if d.PassThrough {
		return nil, nil
	}
	set = [][2]string{{wire.HeaderModelName, d.Model}}
	if d.BaseModel != "" {
		set = append(set, [2]string{wire.HeaderBaseModelName, d.BaseModel})
	} else {
		remove = []string{wire.HeaderBaseModelName}
	}
	return set, remove
}

// Apply makes the HeaderChanges on an in-process request.
func (d Decision) Apply(h http.Header) {
	set, remove := d.HeaderChanges()
	for _, k := range remove {
		h.Del(k)
	}
	for _, kv := range set {
		h.Set(kv[0], kv[1])
	}
}

// Route decides for a request whose whole body is at hand.
func (r *Router) Route(h HeaderGetter, body []byte) (Decision, *apierror.Error) {
	s, err := r.Begin(h)
	if err != nil || s.PassThrough() {
		return Decision{PassThrough: err == nil}, err
	}
	defer s.Close()
	s.body = body[:len(body):len(body)] // no copy: Route owns nothing
	if err := s.check(); err != nil {
		return Decision{}, err
	}
	return s.Finish()
}

// RouteScanned decides for a request whose whole body is at hand and has been
// scanned already (requestbody.Parser.Scan), as an in-process gateway does to
// read each body once for both the router and the picker.
func (r *Router) RouteScanned(h HeaderGetter, body []byte, scanned requestbody.Body) (Decision, *apierror.Error) {
	s, err := r.Begin(h)
	if err != nil || s.PassThrough() {
		return Decision{PassThrough: err == nil}, err
	}
	if int64(len(body)) > r.cfg.MaxRequestBodyBytes {
		return Decision{}, s.fail(OutcomeTooLarge, apierror.TooLarge(r.cfg.MaxRequestBodyBytes))
	}
	s.body = body[:len(body):len(body)]
	if len(body) == 0 {
		return s.Finish()
	}
	return s.decide(scanned.Model, scanned.Found, scanned.Err)
}

// Begin starts routing a request from its headers, for bodies that arrive in pieces.
// It fails with a 413 when the declared content-length is over the limit, before any
// of the body is read.
func (r *Router) Begin(h HeaderGetter) (*Session, *apierror.Error) {
	s := &Session{r: r}
	if !isJSON(h.Get(wire.HeaderContentType)) {
		s.passThrough = true
		r.cfg.Metrics.request(OutcomePassThrough, "")
		return s, nil
	}
	if cl := h.Get(wire.HeaderContentLength); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && n > r.cfg.MaxRequestBodyBytes {
			return nil, s.fail(OutcomeTooLarge, apierror.TooLarge(r.cfg.MaxRequestBodyBytes))
		}
		if err == nil {
			s.declared = n
		}
	}
	return s, nil
}

// isJSON accepts application/json and structured +json types, with any parameters.
// A missing content type is not JSON: other APIs share the gateway.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// Session routes one request whose body arrives in pieces. It keeps the body (the
// proxy must be given it back) and checks each piece as it comes, so an oversized or
// malformed body is refused without waiting for the rest.
type Session struct {
	r           *Router
	passThrough bool
	declared    int64 // the content-length, when the client sent one
	body        []byte
	stream      requestbody.Stream
	parseTime   time.Duration
	scanned     bool // scan ran at least once: parseTime is worth recording
	failed      bool
}

// maxPreallocBytes bounds what a declared content-length reserves before the body
// arrives: a client may declare a large body and send nothing.
const maxPreallocBytes = 4 << 20

// PassThrough reports that the request is not routed on its body.
func (s *Session) PassThrough() bool { return s.passThrough }

// Body returns the body received so far.
func (s *Session) Body() []byte { return s.body }

// Write adds the next piece of the body. It fails with a 413 as soon as the body
// exceeds the limit, and with a 400 as soon as it cannot be valid JSON; after a
// failure the session is finished.
func (s *Session) Write(chunk []byte) *apierror.Error {
	if s.passThrough || s.failed {
		return nil
	}
	if int64(len(s.body))+int64(len(chunk)) > s.r.cfg.MaxRequestBodyBytes {
		return s.fail(OutcomeTooLarge, apierror.TooLarge(s.r.cfg.MaxRequestBodyBytes))
	}
	switch {
	case len(chunk) == 0:
		return nil
	case s.body == nil && int64(len(chunk)) >= s.declared:
		s.body = chunk[:len(chunk):len(chunk)] // the whole body in one piece: no copy
	case s.body == nil:
		s.body = make([]byte, 0, min(s.declared, maxPreallocBytes))
		fallthrough
	default:
		s.body = append(s.body, chunk...)
	}
	return s.check()
}

// check scans what has arrived and fails early on a syntax error.
func (s *Session) check() *apierror.Error {
	if int64(len(s.body)) > s.r.cfg.MaxRequestBodyBytes {
		return s.fail(OutcomeTooLarge, apierror.TooLarge(s.r.cfg.MaxRequestBodyBytes))
	}
	start := time.Now()
	err := s.stream.Write(s.body)
	s.parseTime += time.Since(start)
	s.scanned = true
	if err != nil {
		return s.fail(OutcomeInvalidJSON, invalidJSON(err))
	}
	return nil
}

// Finish decides once the whole body has arrived. An empty body passes through:
// there is nothing to route on.
func (s *Session) Finish() (Decision, *apierror.Error) {
	if s.passThrough {
		return Decision{PassThrough: true}, nil
	}
	if len(s.body) == 0 {
		s.passThrough = true
		s.r.cfg.Metrics.request(OutcomePassThrough, "")
		return Decision{PassThrough: true}, nil
	}
	start := time.Now()
	model, found, err := s.stream.Finish(s.body)
	s.parseTime += time.Since(start)
	s.scanned = true
	return s.decide(model, found, err)
}

// decide turns the scan's answer (requestbody.ExtractModel's) into the decision.
func (s *Session) decide(model string, found bool, err error) (Decision, *apierror.Error) {
	var typeErr *requestbody.ModelTypeError
	switch {
	case errors.As(err, &typeErr):
		e := apierror.BadRequest("invalid_type", "Invalid type for 'model': expected a string, but got %s %s instead.", requestbody.Article(typeErr.Kind), typeErr.Kind)
		e.Param = "model"
		return Decision{}, s.fail(OutcomeInvalidModel, e)
	case errors.Is(err, requestbody.ErrNotObject):
		return Decision{}, s.fail(OutcomeInvalidJSON, apierror.BadRequest("invalid_json", "The request body must be a JSON object."))
	case err != nil:
		return Decision{}, s.fail(OutcomeInvalidJSON, invalidJSON(err))
	}
	if e := checkModelName(model); e != nil {
		return Decision{}, s.fail(OutcomeInvalidModel, e)
	}

	d := Decision{Model: model}
	outcome := OutcomeRouted
	if !found || model == "" {
		if s.r.cfg.DefaultModel == "" {
			e := apierror.BadRequest("missing_model", "You must provide a model parameter.")
			e.Param = "model"
			return Decision{}, s.fail(OutcomeMissingModel, e)
		}
		d.Model, d.Defaulted, outcome = s.r.cfg.DefaultModel, true, OutcomeDefaultModel
	}
	d.BaseModel = s.r.Adapters()[d.Model]
	s.record(outcome, d.Model)
	return d, nil
}

// Close releases the session's scan; a session abandoned before Finish (the
// stream broke) must be closed.
func (s *Session) Close() { s.stream.Close() }

func (s *Session) fail(outcome string, e *apierror.Error) *apierror.Error {
	s.failed = true
	s.stream.Close()
	s.record(outcome, "")
	return e
}

func (s *Session) record(outcome, model string) {
	s.r.cfg.Metrics.request(outcome, model)
	if s.scanned {
		s.r.cfg.Metrics.scanned(s.parseTime, len(s.body))
	}
}

func invalidJSON(err error) *apierror.Error {
	return apierror.BadRequest("invalid_json", "The request body is not valid JSON: %v.", err)
}

// checkModelName refuses names that cannot travel as a header value.
func checkModelName(model string) *apierror.Error {
	var e *apierror.Error
	if len(model) > MaxModelNameBytes {
		e = apierror.BadRequest("invalid_model", "The model name is longer than %d bytes.", MaxModelNameBytes)
	} else if strings.ContainsFunc(model, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		e = apierror.BadRequest("invalid_model", "The model name must not contain control characters.")
	}
	if e != nil {
		e.Param = "model"
	}
	return e
}
