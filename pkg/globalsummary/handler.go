package globalsummary

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
)

// Authenticator decides whether a request may read the summary.
type Authenticator interface {
	Authenticate(r *http.Request) error
}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Auth is required: the summary is never served unauthenticated.
	Auth Authenticator
	// MinInterval is how long a built document is served again before the
	// next request builds a new one (default 100 ms), so that several hubs
	// polling at once cost one build.
	MinInterval time.Duration
	// Now is the wall clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
}

// DefaultMinInterval is HandlerOptions.MinInterval's default.
const DefaultMinInterval = 100 * time.Millisecond

type handler struct {
	build func(now time.Time) *Summary
	opts  HandlerOptions

	mu      sync.Mutex
	body    []byte
	builtAt time.Time
}

// NewHandler serves GET (and HEAD) with the document build returns
// (Exporter.Summary), as JSON, to authenticated requests; others get an
// OpenAI-style 401 with WWW-Authenticate. The runner mounts it at
// wire.GlobalSummaryPath.
func NewHandler(build func(now time.Time) *Summary, opts HandlerOptions) (http.Handler, error) {
	if opts.Auth == nil {
		return nil, fmt.Errorf("global summary handler: an authenticator is required")
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &handler{build: build, opts: opts}, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		apierror.MethodNotAllowed(r.Method, r.URL.Path).Write(w)
		return
	}
	if err := h.opts.Auth.Authenticate(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="igw-global-summary"`)
		(&apierror.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: err.Error()}).Write(w)
		return
	}
	body, err := h.document()
	if err != nil {
		h.opts.Log.Error("global summary not served", "error", err)
		apierror.Internal("%v", err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

func (h *handler) document() ([]byte, error) {
	now := h.opts.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.body != nil && now.Sub(h.builtAt) < h.opts.MinInterval && !now.Before(h.builtAt) {
		return h.body, nil
	}
	body, err := Encode(h.build(now))
	if err != nil {
		return nil, err
	}
	h.body, h.builtAt = body, now
	return body, nil
}
