// Package runner wires the endpoint picker's parts into one process: endpoint
// source, telemetry scraper, configuration watcher, director, ext_proc and
// health gRPC servers, and the HTTP metrics server. cmd/epp is a thin main over
// it; an in-process gateway uses New and the Director directly.
package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/metrics"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/preciseprefixcache"
	"github.com/igw-dev/igw/pkg/epp/server"
	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/epp/telemetry"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/wire"
)

// Runner is a configured picker, not yet serving.
type Runner struct {
	Options  *options.Options
	Log      *slog.Logger
	Store    *datastore.Store
	Director *director.Director
	Metrics  *metrics.Metrics
	ExtProc  *server.ExtProc
	Watcher  *config.Watcher // nil without --config
	// KVEvents follows the pods' KV cache events for a precise-prefix-cache
	// scorer (idle when the configuration has none).
	KVEvents *kvevents.Hub

	sourceReady func() bool
	runSource   func(context.Context) error
	health      *serve.Health
	// leadership is nil without --leader-elect: the replica always serves.
	leadership *leadership
	group      serve.Group
	// summary serves the global tier's summary (nil without
	// --global-summary-token-file); summaryTokens re-reads its tokens.
	summary       http.Handler
	summaryTokens *globalsummary.TokenFile
	// tls is the ext_proc port's certificate; nil for plaintext.
	tls *servingtls.Certificate
}

// New builds a runner from completed, validated options; it loads the
// configuration and (for a file source) the endpoints once, so a broken file
// fails at start-up.
func New(o *options.Options, log *slog.Logger) (*Runner, error) {
	r := &Runner{Options: o, Log: log, Metrics: metrics.New(), health: serve.NewHealth()}
	r.group.Host = o.BindAddress
	var err error
	if r.tls, err = servingtls.LoadIfSet(o.TLS, log); err != nil {
		return nil, err
	}
	r.Store = datastore.NewStore(latency.DefaultPriors)
	r.Metrics.ObservePool(o.PoolName, r.Store)
	r.Director = director.New(r.Store, director.Options{Staleness: o.MetricsStaleness,
		StalePolicy: director.StalePolicy(o.StalePolicy), Seed: o.Seed})
	r.KVEvents = kvevents.NewHub(log)
	r.Metrics.Registry.MustRegister(r.KVEvents.Collector())
	apply := func(p *director.Pipeline) {
		preciseprefixcache.BindAll(p.Profile, r.KVEvents)
		r.Director.SetPipeline(p)
	}
	reg := plugins.NewRegistry()
	if o.ConfigFile == "" {
		p, err := config.Load([]byte(config.Default), reg)
		if err != nil {
			return nil, fmt.Errorf("built-in configuration: %w", err)
		}
		apply(p)
		r.Metrics.ConfigValid.Set(1)
		r.Metrics.ConfigLastReload.Set(float64(time.Now().Unix()))
	} else {
		r.Watcher = &config.Watcher{Path: o.ConfigFile, Interval: o.ConfigPollInterval, Registry: reg,
			Apply: apply, Log: log,
			OnLoad: func(err error, at time.Time) {
				if err != nil {
					r.Metrics.ConfigReloads.WithLabelValues("failure").Inc()
					r.Metrics.ConfigValid.Set(0)
					return
				}
				r.Metrics.ConfigReloads.WithLabelValues("success").Inc()
				r.Metrics.ConfigValid.Set(1)
				r.Metrics.ConfigLastReload.Set(float64(at.Unix()))
			}}
		if err := r.Watcher.Load(); err != nil {
			return nil, err
		}
	}
	if o.EndpointsFile != "" {
		f := &source.File{Path: o.EndpointsFile, Interval: o.ConfigPollInterval, Store: r.Store, Log: log}
		if err := f.Load(); err != nil {
			return nil, err
		}
		r.sourceReady = func() bool { return true }
		r.runSource = func(ctx context.Context) error { f.Run(ctx); return nil }
	} else {
		cfg, err := source.RESTConfig(o.Kubeconfig)
		if err != nil {
			return nil, err
		}
		k := &source.Kube{Config: cfg, Namespace: o.PoolNamespace, PoolName: o.PoolName, Store: r.Store, Log: log}
		r.sourceReady = k.Synced
		r.runSource = k.Run
		if o.LeaderElect {
			// The same API server and credentials as the pool source.
			if r.leadership, err = newLeadership(cfg, o, log, r.updateHealth); err != nil {
				return nil, err
			}
		}
	}
	r.updateHealth()
	r.ExtProc = &server.ExtProc{Director: r.Director, Metrics: r.Metrics, Log: log, MaxBodyBytes: o.MaxBodyBytes}
	if o.GlobalSummary() {
		if err := r.newSummary(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// newSummary builds the global tier's summary of this pool: its endpoints,
// prefix index and the requests seen to end, behind the token file.
func (r *Runner) newSummary() error {
	o := r.Options
	tokens, err := globalsummary.NewTokenFile(o.GlobalSummaryTokenFile, r.Log)
	if err != nil {
		return err
	}
	ends := globalsummary.NewErrorWindow(globalsummary.DefaultErrorWindow, 30)
	r.ExtProc.Ends = ends
	exp := globalsummary.NewExporter(globalsummary.ExporterOptions{Cluster: o.Cluster, Region: o.Region}, func() []globalsummary.Source {
		return []globalsummary.Source{{Model: o.GlobalSummaryModel, Store: r.Store, Index: r.Director.Index(),
			BlockTokens: r.Director.BlockTokens(), Staleness: o.MetricsStaleness, Errors: ends}}
	})
	h, err := globalsummary.NewHandler(exp.Summary, globalsummary.HandlerOptions{Auth: tokens})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(wire.GlobalSummaryPath, h)
	r.summary, r.summaryTokens = mux, tokens
	return nil
}

// Addr returns the address a server listens on once Run started it:
// "grpc", "health" or "metrics".
func (r *Runner) Addr(name string) string { return r.group.Addr(name) }

// Ready reports whether the picker routes: a configuration is in effect, the
// endpoint source has delivered its first view and, with --leader-elect, this
// replica leads. A standby is not ready, so that the picker's Service (and
// with it the proxy) sends ext_proc streams to the leader only.
func (r *Runner) Ready() (bool, map[string]any) {
	ok, detail := r.warm()
	if l := r.leadership; l != nil {
		detail["identity"] = l.identity
		if since := l.holdingOver(); !since.IsZero() && l.isLeading() {
			detail["leaderElection"] = fmt.Sprintf("leader, holding over: lease not renewed for %s, no other holder seen",
				time.Since(since).Round(time.Second))
		} else if l.isLeading() {
			detail["leaderElection"] = "leader"
		} else {
			detail["leaderElection"] = l.standby()
			ok = false
		}
	}
	return ok, detail
}

// warm reports whether the picker could route if it led.
func (r *Runner) warm() (bool, map[string]any) {
	detail := map[string]any{"endpoints": r.Store.Len(), "sourceSynced": r.sourceReady()}
	r.tls.AddStatus(detail)
	if r.KVEvents.Configured() {
		detail["kvEvents"] = r.KVEvents.Detail() // informative: events never make the picker unready
	}
	ok := r.sourceReady() && r.Director.Pipeline() != nil
	if r.Watcher != nil {
		st := r.Watcher.Status()
		detail["config"] = st
		ok = ok && st.Loaded
	}
	return ok, detail
}

// Leading reports whether this replica serves picks: always without
// --leader-elect, else while it holds the lease.
func (r *Runner) Leading() bool { return r.leadership == nil || r.leadership.isLeading() }

// refuseStandby turns away ext_proc streams that reach a standby anyway (the
// proxy's endpoints lag the readiness change, panic routing while no replica
// is ready, or a misconfigured Service) with UNAVAILABLE, which Envoy treats
// as the processor failing: its failure mode applies, rather than a pick by a
// replica the conversation's next turn will not ask. A stream already running
// when leadership ends finishes: its pick was made by a warm replica.
func (r *Runner) refuseStandby(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !r.leadership.isLeading() {
		r.Metrics.StandbyRefusals.Inc()
		return status.Errorf(codes.Unavailable, "endpoint picker %s is a %s: ext_proc is served by the leader", r.leadership.identity, r.leadership.standby())
	}
	return handler(srv, ss)
}

// Run serves until ctx ends or a server fails. ready, when not nil, is closed
// once every listener is open.
func (r *Runner) Run(ctx context.Context, ready chan<- struct{}) error {
	extOpts := append(r.tls.ServerOptions(), grpc.MaxRecvMsgSize(int(r.Options.MaxBodyBytes)+(1<<20)), grpc.MaxSendMsgSize(int(r.Options.MaxBodyBytes)+(1<<20)))
	if r.leadership != nil {
		extOpts = append(extOpts, grpc.StreamInterceptor(r.refuseStandby))
	}
	extSrv := grpc.NewServer(extOpts...)
	extprocv3.RegisterExternalProcessorServer(extSrv, r.ExtProc)

	scraper := &telemetry.Scraper{Sink: r.Director, Log: r.Log, Poll: telemetry.Poll{Store: r.Store, Interval: r.Options.ScrapeInterval,
		Timeout: r.Options.ScrapeTimeout, Path: r.Options.MetricsPath,
		Observe: func(_ string, err error, took time.Duration) {
			r.Metrics.Scrapes.WithLabelValues(metrics.Result(err)).Inc()
			r.Metrics.ScrapeDuration.Observe(took.Seconds())
		}}}

	g := &r.group
	// Let in-flight streams finish their current message, then stop.
	g.GRPC("grpc", r.Options.GRPCPort, extSrv, 5*time.Second)
	g.GRPC("health", r.Options.HealthPort, r.health.Server(), 0)
	g.HTTP("metrics", r.Options.MetricsPort, &http.Server{Handler: serve.ProbeMux(r.Metrics.Handler(), r.Ready), ReadHeaderTimeout: 5 * time.Second}, time.Second)
	if r.summary != nil {
		g.HTTP("global-summary", r.Options.GlobalSummaryPort, &http.Server{Handler: r.summary, ReadHeaderTimeout: 5 * time.Second}, time.Second)
		g.Go("summary tokens", func(ctx context.Context) error { r.summaryTokens.Run(ctx); return nil })
	}
	g.Go("serving certificate watch", r.tls.Watch)
	g.Go("endpoint source", r.runSource)
	g.Go("scraper", scraper.Run)
	if r.Options.ModelsInterval > 0 {
		lister := &telemetry.ModelLister{Poll: telemetry.Poll{Store: r.Store, Interval: r.Options.ModelsInterval, Timeout: r.Options.ModelsTimeout,
			Observe: func(_ string, err error, _ time.Duration) {
				r.Metrics.ModelListReads.WithLabelValues(metrics.Result(err)).Inc()
			}}}
		g.Go("model lister", lister.Run)
	}
	if r.Watcher != nil {
		g.Go("config watcher", func(ctx context.Context) error { r.Watcher.Run(ctx); return nil })
	}
	g.Go("readiness", func(ctx context.Context) error { r.reportHealth(ctx); return nil })
	g.Go("kv events", func(ctx context.Context) error { r.KVEvents.Run(ctx, r.kvEventEndpoints, time.Second); return nil })
	if r.leadership != nil {
		g.Go("leader election", func(ctx context.Context) error {
			r.leadership.run(ctx, func() bool { ok, _ := r.warm(); return ok })
			return nil
		})
	}
	g.Started = func() {
		r.Log.Info("endpoint picker serving", "grpc", r.Addr("grpc"), "health", r.Addr("health"), "metrics", r.Addr("metrics"))
	}
	g.Stopping = r.health.Shutdown
	return g.Run(ctx, ready)
}

// kvEventEndpoints are the pods whose KV events to follow: every endpoint.
func (r *Runner) kvEventEndpoints() []kvevents.Endpoint {
	states := r.Store.Endpoints(nil)
	out := make([]kvevents.Endpoint, len(states))
	for i, st := range states {
		out[i] = kvevents.Endpoint{Key: st.Key(), Host: st.Endpoint().Address}
	}
	return out
}

// updateHealth sets the gRPC health status and the leader gauge from Ready;
// leadership changes call it at once rather than waiting for the next tick.
func (r *Runner) updateHealth() {
	ok, _ := r.Ready()
	r.health.Set(ok)
	leading := 0.0
	if r.Leading() {
		leading = 1
	}
	r.Metrics.Leader.Set(leading)
}

// reportHealth keeps the gRPC health status and the endpoint gauge current.
func (r *Runner) reportHealth(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	known := map[string]bool{}
	var buf []*datastore.EndpointState
	for {
		r.updateHealth()
		buf = r.Store.Endpoints(buf[:0])
		r.Metrics.Endpoints.Set(float64(len(buf)))
		live := make(map[string]bool, len(buf))
		for _, e := range buf {
			live[e.Key()] = true
		}
		for k := range known {
			if !live[k] {
				r.Metrics.ForgetEndpoint(k)
			}
		}
		known = live
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
