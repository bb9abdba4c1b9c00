// Package gateway is igw's standalone gateway: one process that serves the
// OpenAI API and runs the body-based router and the endpoint picker in
// process over endpoints from files or an InferencePool's ready Pods (read
// through the API server, the last view kept while it is unreachable),
// proxying each request to the endpoint picked. It is the way to try igw without a cluster and the gateway of live
// benchmarks (cmd/igw-bench-gateway registers the benchmark's baselines as
// policies besides igw; see Registry); in a cluster, Envoy Gateway plays this
// part and the BBR and EPP run as ext_proc servers.
//
// Per request: the body is read whole, the BBR finds the model (and, for a
// LoRA adapter, its base model), the model names the pool, the pool's picker
// (the EPP director for the igw policy, a registered policy's Picker
// otherwise) chooses an endpoint and fallbacks, and net/http/httputil proxies the
// request, flushing every write so server-sent events pass as they arrive. A
// pod that fails before the first byte of its answer (refused or reset
// connection, a server error, no first byte of a stream within
// --first-byte-timeout) costs the client nothing: the request goes to the
// pick's next fallback, once (a refused connection, which the pod never
// saw, to every fallback in turn). The response is metered on its way back
// (pkg/epp/responsestream) so the picker learns each endpoint's speed from real streaming: the proxy
// reports every pick's first token, tokens and completion or failure through
// the pick lifecycle all igw pickers share (director.Lifecycle).
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/bbr"
	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/frontdoor"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/wire"
)

// Gateway is a configured gateway, not yet serving.
type Gateway struct {
	opts  *Options
	log   *slog.Logger
	clock clock
	bbr   *bbr.Router
	pools []*pool
	// byModel maps served names and adapters to their pool; catchAll takes
	// every model when the only pool lists none.
	byModel  map[string]*pool
	catchAll *pool
	models   openaimodels.Catalog // the /v1/models answer

	// summary serves the member summary for the global tier (nil: off).
	summary       http.Handler
	summaryTokens *globalsummary.TokenFile

	proxy   *httputil.ReverseProxy
	parsers sync.Pool
	group   serve.Group

	// door is the front door; draining says whether a shutdown is draining
	// requests.
	door     *frontdoor.Door
	draining atomic.Bool
}

// New builds a gateway from completed, validated options. Every endpoints
// and EPP configuration file is read once, so a broken one fails at start.
func New(o *Options, log *slog.Logger) (*Gateway, error) {
	if o.Resolved == nil {
		return nil, errors.New("gateway options are not completed")
	}
	g := &Gateway{opts: o, log: log, clock: newClock(o.TimeScale), byModel: map[string]*pool{},
		bbr: bbr.NewRouter(bbr.RouterConfig{MaxRequestBodyBytes: o.MaxBodyBytes}), door: frontdoor.New(&o.Options, "gateway")}
	g.group.Host = o.BindAddress
	g.parsers.New = func() any { return new(requestbody.Parser) }
	g.bbr.SetAdapters(o.Resolved.adapterMap())
	var kube *rest.Config
	if o.Resolved.discovers() {
		var err error
		if kube, err = source.RESTConfig(o.Kubeconfig); err != nil {
			return nil, err
		}
	}
	for _, pc := range o.Resolved.Pools {
		p, err := newPool(pc, o, g.clock, kube, log)
		if err != nil {
			return nil, err
		}
		g.pools = append(g.pools, p)
		for _, m := range pc.Models {
			g.byModel[m] = p
		}
		for a := range pc.Adapters {
			g.byModel[a] = p
		}
		if len(pc.Models) == 0 {
			g.catchAll = p
		}
	}
	g.models.Set(modelList(o.Resolved))
	g.proxy = g.newProxy()
	if o.GlobalSummaryTokenFile != "" {
		if err := g.newSummary(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// poolFor returns the pool serving model (or its base model), nil for none.
func (g *Gateway) poolFor(model, base string) *pool {
	if p := g.byModel[model]; p != nil {
		return p
	}
	if p := g.byModel[base]; base != "" && p != nil {
		return p
	}
	return g.catchAll
}

// Handler serves the OpenAI API, /v1/models (and /v1/models/{id}), /healthz
// and /readyz behind the front door (guard); an unknown path or a wrong
// method gets an OpenAI error.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, path := range InferencePaths {
		mux.HandleFunc("POST "+path, g.serveInference)
	}
	g.models.Mount(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", g.serveReady)
	if g.summary != nil {
		mux.Handle("GET "+wire.GlobalSummaryPath, g.summary)
	}
	return g.door.Guard(apierror.Routes(mux, servedPaths))
}

// InferencePaths are the OpenAI endpoints the gateway routes.
var InferencePaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"}

// Ready reports whether the gateway can serve: some pool has a live
// endpoint, every pool's EPP configuration is loaded, and no shutdown is
// draining requests; with each pool's detail.
func (g *Gateway) Ready() (bool, map[string]any) {
	live, configured := false, true
	detail := map[string]any{}
	for _, p := range g.pools {
		n, loaded, d := p.ready(g.liveWindow())
		live = live || n > 0
		configured = configured && loaded
		detail[p.cfg.Name] = d
	}
	return live && configured && !g.draining.Load(), detail
}

// liveWindow is how recent an endpoint's telemetry must be for it to count
// as live: a few scrapes, and never less than the staleness limit or 1 s of
// gateway time, so one slow scrape does not turn readiness.
func (g *Gateway) liveWindow() time.Duration {
	o := g.opts
	return max(5*o.ScrapeInterval+o.ScrapeTimeout, o.MetricsStaleness, time.Second)
}

func (g *Gateway) serveReady(w http.ResponseWriter, _ *http.Request) {
	ok, detail := g.Ready()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	answer := map[string]any{"ready": ok, "pools": detail}
	if g.draining.Load() {
		answer["draining"] = true
	}
	_ = json.NewEncoder(w).Encode(answer)
}

// Addr is the address the gateway listens on once Run has started it.
func (g *Gateway) Addr() string { return g.group.Addr("http") }

// Run serves until ctx ends, then drains: the port stops accepting, /readyz
// answers 503 on connections still open, and requests in flight (streams
// included) get the shutdown grace to finish before they are cut. ready,
// when not nil, is closed once the port is open.
func (g *Gateway) Run(ctx context.Context, ready chan<- struct{}) error {
	o := g.opts
	g.group.HTTP("http", o.Port, g.door.Server(g.Handler(), g.log), o.ShutdownGrace)
	g.group.WrapListener("http", g.door.Listener)
	for _, p := range g.pools {
		g.group.Go("pool "+p.cfg.Name, func(ctx context.Context) error { p.run(ctx); return nil })
	}
	if g.summaryTokens != nil {
		g.group.Go("summary tokens", g.runSummaryTokens)
	}
	g.group.Go("body collector", g.door.CollectGarbage)
	g.group.Started = func() { g.log.Info("gateway serving", "addr", g.Addr(), "pools", len(g.pools)) }
	g.group.Stopping = func() {
		g.draining.Store(true)
		g.log.Info("gateway draining", "inFlight", g.door.InFlight(), "grace", o.ShutdownGrace)
	}
	return g.group.Run(ctx, ready)
}

// OpenConnections is the number of client connections open now.
func (g *Gateway) OpenConnections() int64 { return g.door.OpenConnections() }

// modelList is every served name and adapter, in configuration order (each
// pool's models, then its adapters by name); adapters name their base model as
// parent, as vLLM does.
func modelList(c *Config) []openaimodels.Entry {
	var out []openaimodels.Entry
	for _, p := range c.Pools {
		for _, m := range p.Models {
			out = append(out, openaimodels.Entry{ID: m})
		}
		for _, a := range slices.Sorted(maps.Keys(p.Adapters)) {
			out = append(out, openaimodels.Entry{ID: a, Parent: p.Adapters[a]})
		}
	}
	return out
}
