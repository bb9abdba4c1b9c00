// Package hub is the global tier's hub process (cmd/igw-global): the global
// picker (pkg/global) over the member clusters of a configuration file, a
// poller per member that fetches its summaries (the active health check),
// and three ways in: an ext_proc server for Envoy's global route (the
// destination header names the picked member's gateway and one fallback), a
// standalone HTTP front that proxies to the picked member itself and retries
// once on another before the first byte (loopback use, tests), and /status,
// the members' state as JSON for the operator's reconciler.
package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/pkg/frontdoor"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/wire"
)

// Hub is a configured hub, not yet serving.
type Hub struct {
	opts    *Options
	log     *slog.Logger
	picker  *global.Picker
	pollers []*poller
	metrics *hubMetrics
	health  *serve.Health
	// Now is the wall clock (time.Now); tests may replace it before Run.
	now   func() time.Time
	group serve.Group
	// overheadHook, when set (benchmarks), sees each front request's own time.
	overheadHook func(time.Duration)
	// door guards the standalone front.
	door *frontdoor.Door
}

// New builds a hub from completed, validated options.
func New(o *Options, log *slog.Logger) (*Hub, error) {
	c := o.Resolved
	if c == nil {
		return nil, fmt.Errorf("hub options are not completed")
	}
	p, err := global.New(global.Options{Region: c.Region, Health: c.healthSettings(), Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	pl, err := c.BuildPipeline()
	if err != nil {
		return nil, err
	}
	p.SetPipeline(pl)
	members, err := c.members()
	if err != nil {
		return nil, err
	}
	if err := p.SetMembers(members); err != nil {
		return nil, err
	}
	h := &Hub{opts: o, log: log, picker: p, now: time.Now, health: serve.NewHealth(), door: frontdoor.New(&o.Options, "hub")}
	for _, m := range c.Members {
		pl, err := newPoller(m, p, c.probeInterval(), c.probeTimeout(), h.clock)
		if err != nil {
			return nil, err
		}
		h.pollers = append(h.pollers, pl)
	}
	h.metrics = newHubMetrics(h)
	return h, nil
}

func (h *Hub) clock() time.Time { return h.now() }

// observeOverhead records the front's own time on one request.
func (h *Hub) observeOverhead(d time.Duration) {
	h.metrics.overhead.Observe(d.Seconds())
	if h.overheadHook != nil {
		h.overheadHook(d)
	}
}

// Picker is the hub's global picker.
func (h *Hub) Picker() *global.Picker { return h.picker }

// MemberStatus is one member in the status document (GET /status).
type MemberStatus struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	// Reachable: the member answered its last summary fetch (garbage
	// included); SummaryValid: that answer was a valid document.
	Reachable    bool `json:"reachable"`
	SummaryValid bool `json:"summaryValid"`
	// InRotation: the picker sends it requests; Reason says why not, or that
	// it is warming up (slow start).
	InRotation bool    `json:"inRotation"`
	Reason     string  `json:"reason,omitempty"`
	Weight     float64 `json:"weight"`
	// SummaryAgeSeconds is the age of the latest good summary (-1: none yet).
	SummaryAgeSeconds float64 `json:"summaryAgeSeconds"`
	// RTTSeconds is the smoothed round trip of the summary fetches (0: none yet).
	RTTSeconds float64  `json:"rttSeconds"`
	LastError  string   `json:"lastError,omitempty"`
	Models     []string `json:"models,omitempty"`
}

// Status is the status document.
type Status struct {
	Members     []MemberStatus `json:"members"`
	GeneratedAt time.Time      `json:"generatedAt"`
}

// Status reports every member now, in the configuration's order.
func (h *Hub) Status() Status {
	now := h.now()
	byName := map[string]global.MemberStatus{}
	for _, st := range h.picker.Status(now) {
		byName[st.Name] = st
	}
	out := Status{Members: make([]MemberStatus, 0, len(h.pollers)), GeneratedAt: now.UTC().Truncate(time.Second)}
	for _, pl := range h.pollers {
		st := byName[pl.member.Name]
		reachable, fetched := pl.state()
		ms := MemberStatus{Name: st.Name, Region: st.Region, Reachable: reachable,
			SummaryValid: fetched && st.LastError == "" && st.SummaryAge >= 0,
			InRotation:   st.InRotation, Reason: st.Reason, Weight: st.Weight, SummaryAgeSeconds: -1,
			LastError: st.LastError, Models: st.Models}
		if st.SummaryAge >= 0 {
			ms.SummaryAgeSeconds = st.SummaryAge.Seconds()
		}
		if st.RTTKnown {
			ms.RTTSeconds = st.RTT.Seconds()
		}
		out.Members = append(out.Members, ms)
	}
	return out
}

// Ready: some member is in rotation. A hub with none still answers
// requests (with a 503 that says why), but a load balancer should prefer a
// replica that can route.
func (h *Hub) Ready() (bool, map[string]any) {
	st := h.Status()
	in := 0
	detail := map[string]any{}
	for _, m := range st.Members {
		if m.InRotation {
			in++
		}
		detail[m.Name] = map[string]any{"inRotation": m.InRotation, "reason": m.Reason}
	}
	return in > 0, detail
}

func (h *Hub) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(h.Status())
}

// metricsHandler serves /metrics, /healthz, /readyz and /status.
func (h *Hub) metricsHandler() http.Handler {
	probes := serve.ProbeMux(promhttp.HandlerFor(h.metrics.registry, promhttp.HandlerOpts{}), h.Ready)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.GlobalStatusPath, h.serveStatus)
	mux.Handle("/", probes)
	return mux
}

// Addr is the address server name ("grpc", "http", "metrics") listens on once running.
func (h *Hub) Addr(name string) string { return h.group.Addr(name) }

// Run serves until ctx ends. ready, when not nil, is closed once every port is open.
func (h *Hub) Run(ctx context.Context, ready chan<- struct{}) error {
	o := h.opts
	h.group.Host = o.BindAddress
	grpcSrv := h.health.Server()
	registerExtProc(grpcSrv, &ExtProc{Hub: h})
	h.group.GRPC("grpc", o.GRPCPort, grpcSrv, o.ShutdownGrace)
	if o.HTTPPort != 0 {
		h.group.HTTP("http", o.HTTPPort, h.door.Server(h.Front(), h.log), o.ShutdownGrace)
		h.group.WrapListener("http", h.door.Listener)
		h.group.Go("body collector", h.door.CollectGarbage)
	}
	h.group.HTTP("metrics", o.MetricsPort, &http.Server{Handler: h.metricsHandler(), ReadHeaderTimeout: 5 * time.Second}, time.Second)
	for _, pl := range h.pollers {
		h.group.Go("poll "+pl.member.Name, func(ctx context.Context) error { pl.run(ctx); return nil })
	}
	h.group.Started = func() {
		h.health.Set(true)
		h.log.Info("hub serving", "grpc", h.Addr("grpc"), "http", h.Addr("http"), "metrics", h.Addr("metrics"), "members", len(h.pollers))
	}
	h.group.Stopping = h.health.Shutdown
	return h.group.Run(ctx, ready)
}

// hubMetrics are the hub's Prometheus metrics (names in pkg/wire).
type hubMetrics struct {
	registry     *prometheus.Registry
	requests     *prometheus.CounterVec // member, outcome
	retries      prometheus.Counter
	pickDuration prometheus.Histogram
	overhead     prometheus.Histogram
}

// Request outcomes in igw_global_requests_total besides health's.
const (
	outcomeOK       = "ok"
	outcomeRejected = "rejected"
)

func newHubMetrics(h *Hub) *hubMetrics {
	m := &hubMetrics{registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: wire.GlobalRequests,
			Help: "Requests the hub routed, by member cluster and outcome."}, []string{"member", "outcome"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: wire.GlobalRetries,
			Help: "Requests retried on another member cluster before their first byte."}),
		pickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: wire.GlobalPickDuration,
			Help: "Time one pick of a member cluster takes.", Buckets: prometheus.ExponentialBuckets(5e-6, 2, 14)}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: wire.GlobalFrontOverhead,
			Help: "The standalone front's own time on a request: all of it but the waits for the member's answer.", Buckets: prometheus.ExponentialBuckets(1e-5, 2, 14)}),
	}
	m.registry.MustRegister(m.requests, m.retries, m.pickDuration, m.overhead, memberCollector{h},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// outcome names a health outcome in the requests metric.
func outcome(o health.Outcome) string {
	if o == health.Success {
		return outcomeOK
	}
	return o.String()
}

var (
	inRotationDesc = prometheus.NewDesc(wire.GlobalMemberInRotation, "1 when the member cluster is in rotation.", []string{"member", "region"}, nil)
	weightDesc     = prometheus.NewDesc(wire.GlobalMemberWeight, "The member cluster's slow-start weight (0..1).", []string{"member", "region"}, nil)
	rttDesc        = prometheus.NewDesc(wire.GlobalMemberRTT, "Smoothed round trip of the member's summary fetches.", []string{"member", "region"}, nil)
	ageDesc        = prometheus.NewDesc(wire.GlobalMemberSummaryAge, "Age of the member's latest good summary.", []string{"member", "region"}, nil)
)

// memberCollector reports each member's state at scrape time.
type memberCollector struct{ h *Hub }

func (memberCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inRotationDesc
	ch <- weightDesc
	ch <- rttDesc
	ch <- ageDesc
}

func (c memberCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.h.Status().Members {
		in := 0.0
		if m.InRotation {
			in = 1
		}
		ch <- prometheus.MustNewConstMetric(inRotationDesc, prometheus.GaugeValue, in, m.Name, m.Region)
		ch <- prometheus.MustNewConstMetric(weightDesc, prometheus.GaugeValue, m.Weight, m.Name, m.Region)
		ch <- prometheus.MustNewConstMetric(rttDesc, prometheus.GaugeValue, m.RTTSeconds, m.Name, m.Region)
		if m.SummaryAgeSeconds >= 0 {
			ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, m.SummaryAgeSeconds, m.Name, m.Region)
		}
	}
}
