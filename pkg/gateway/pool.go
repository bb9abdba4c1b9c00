package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/epp/telemetry"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

// pool is one group of model servers with its own endpoint source, telemetry
// scraper and picker: what an InferencePool and its EPP are in a cluster.
type pool struct {
	cfg    PoolConfig
	policy string
	store  *datastore.Store
	picker Picker
	// now is the gateway's clock, which the picker's reports carry.
	now func() time.Time
	// runSource keeps the store's endpoints current (an endpoints file, or
	// an InferencePool's Pods); sourceSynced reports its first full view.
	runSource    func(ctx context.Context)
	sourceSynced func() bool
	watcher      *config.Watcher // igw with an eppConfig file
	scraper      *telemetry.Scraper
	lister       *telemetry.ModelLister // igw: which endpoints serve which adapters

	// ends counts the requests that ended and failed, for the member
	// summary's error rate (nil when the summary is off).
	ends *globalsummary.ErrorWindow

	// scraped is when each endpoint last answered a scrape (gateway time),
	// whichever picker takes the samples: readiness counts it live.
	scrapedMu sync.Mutex
	scraped   map[string]time.Time
}

// newPool builds a pool; kube reaches the API server when the pool follows
// an InferencePool.
func newPool(pc PoolConfig, o *Options, c clock, kube *rest.Config, log *slog.Logger) (*pool, error) {
	p := &pool{cfg: pc, policy: pc.Policy, store: datastore.NewStore(latency.DefaultPriors), now: c.Now}
	if p.policy == "" {
		p.policy = o.Policy
	}
	log = log.With("pool", pc.Name)
	if ref := pc.InferencePool; ref != nil {
		// The informers' cache outlives an unreachable API server: the
		// endpoints last seen keep serving until it answers again.
		k := &source.Kube{Config: kube, Namespace: ref.Namespace, PoolName: ref.Name, Store: p.store, Log: log}
		p.runSource = func(ctx context.Context) {
			if err := k.Run(ctx); err != nil {
				log.Error("InferencePool endpoint source stopped", "inferencePool", ref.Namespace+"/"+ref.Name, "error", err)
			}
		}
		p.sourceSynced = k.Synced
	} else {
		f := &source.File{Path: pc.EndpointsFile, Interval: o.ConfigPollInterval, Store: p.store, Log: log}
		if err := f.Load(); err != nil {
			return nil, fmt.Errorf("pool %q: %w", pc.Name, err)
		}
		p.runSource = f.Run
		p.sourceSynced = func() bool { return true }
	}
	telemetryWanted := true
	if p.policy == PolicyIGW {
		opts := director.Options{Staleness: o.MetricsStaleness, StalePolicy: director.StalePolicy(o.StalePolicy), Seed: o.Seed}
		var d *director.Director
		if pc.EPPConfig == "" {
			var err error
			if d, err = config.NewDirector(p.store, "", opts); err != nil {
				return nil, err
			}
		} else {
			d = director.New(p.store, opts)
			p.watcher = &config.Watcher{Path: pc.EPPConfig, Interval: o.ConfigPollInterval, Registry: plugins.NewRegistry(),
				Apply: d.SetPipeline, Log: log}
			if err := p.watcher.Load(); err != nil {
				return nil, fmt.Errorf("pool %q: %w", pc.Name, err)
			}
		}
		p.picker = &eppPicker{d: d, now: c.Now}
		if o.ModelsInterval > 0 {
			p.lister = &telemetry.ModelLister{Poll: telemetry.Poll{Store: p.store, Interval: c.Wall(o.ModelsInterval),
				Timeout: c.Wall(o.ModelsTimeout), Now: c.Now}}
		}
	} else {
		if pc.EPPConfig != "" {
			log.Warn("eppConfig applies to the igw policy only; ignored", "policy", p.policy)
		}
		policy, ok := o.Policies.lookup(p.policy)
		if !ok {
			return nil, fmt.Errorf("pool %q: unknown policy %q (known: %s)", pc.Name, p.policy, strings.Join(o.Policies.Names(), ", "))
		}
		pk, err := policy.New(PolicyEnv{Policy: p.policy, Store: p.store, Seed: o.Seed, ScrapeInterval: o.ScrapeInterval})
		if err != nil {
			return nil, fmt.Errorf("pool %q: policy %s: %w", pc.Name, p.policy, err)
		}
		p.picker = pk
		telemetryWanted = policy.Telemetry
	}
	if telemetryWanted {
		p.scraper = &telemetry.Scraper{Sink: p.picker, Log: log, Poll: telemetry.Poll{Store: p.store, Interval: c.Wall(o.ScrapeInterval),
			Timeout: c.Wall(o.ScrapeTimeout), Path: o.MetricsPath, Now: c.Now, Observe: p.observeScrape}}
		p.scraped = map[string]time.Time{}
	}
	return p, nil
}

// run keeps the pool's endpoints, configuration and telemetry current until ctx ends.
func (p *pool) run(ctx context.Context) {
	done := make(chan struct{}, 4)
	n := 0
	spawn := func(f func()) {
		n++
		go func() { f(); done <- struct{}{} }()
	}
	spawn(func() { p.runSource(ctx) })
	if p.watcher != nil {
		spawn(func() { p.watcher.Run(ctx) })
	}
	if p.scraper != nil {
		spawn(func() { _ = p.scraper.Run(ctx) })
	}
	if p.lister != nil {
		spawn(func() { _ = p.lister.Run(ctx) })
	}
	for range n {
		<-done
	}
}

// ready reports how many of the pool's endpoints are live and whether its
// endpoint source has delivered its first view and its EPP configuration
// (when it has a file) is loaded, with the detail.
func (p *pool) ready(window time.Duration) (live int, configured bool, detail map[string]any) {
	live = p.liveEndpoints(window)
	configured = p.sourceSynced()
	detail = map[string]any{"endpoints": p.store.Len(), "live": live, "policy": p.policy}
	if p.cfg.InferencePool != nil {
		detail["inferencePool"] = p.cfg.InferencePool.Namespace + "/" + p.cfg.InferencePool.Name
		detail["synced"] = configured
	}
	if p.watcher != nil {
		st := p.watcher.Status()
		detail["config"] = st
		configured = configured && st.Loaded
	}
	return live, configured, detail
}

func (p *pool) observeScrape(endpoint string, err error, _ time.Duration) {
	if err != nil {
		return
	}
	now := p.now()
	p.scrapedMu.Lock()
	defer p.scrapedMu.Unlock()
	p.scraped[endpoint] = now
}

// liveEndpoints counts the endpoints that are not ejected after failures
// and, when the pool scrapes telemetry, answered a scrape within window (of
// gateway time): a dead pod stops answering scrapes long before its entry
// leaves the endpoints file.
func (p *pool) liveEndpoints(window time.Duration) int {
	now := p.now()
	n := 0
	p.scrapedMu.Lock()
	defer p.scrapedMu.Unlock()
	eps := p.store.Endpoints(nil)
	if len(p.scraped) > 2*len(eps)+16 {
		// Endpoints removed from the file: forget them.
		current := make(map[string]time.Time, len(eps))
		for _, st := range eps {
			if at, ok := p.scraped[st.Key()]; ok {
				current[st.Key()] = at
			}
		}
		p.scraped = current
	}
	for _, st := range eps {
		if st.Ejected(now) {
			continue
		}
		if p.scraper != nil && now.Sub(p.scraped[st.Key()]) > window {
			continue
		}
		n++
	}
	return n
}
