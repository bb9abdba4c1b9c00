// Package des is the discrete-event benchmark backend: the routing policy
// (for igw and legacy-blend, the real endpoint-picker code) against simulator
// engines in virtual time. Nothing sleeps; the next thing to happen is an
// arrival, a pod's step end, a telemetry scrape or the end of the warmup.
//
// Staleness is modelled as in production: the router sees pod telemetry only
// at scrapes, every scrapeInterval per pod (pods' scrapes are spread over the
// interval, as independent scrapers are), while its own accounting — picks,
// first tokens, tokens, completions — flows at the moment each happens.
//
// A multi-cluster scenario under a global policy runs in global.go: member
// clusters, each behind its own igw picker, and a hub per client region.
package des

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/workload"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/sim"
)

// Backend runs jobs in virtual time.
type Backend struct {
	// IGWConfig is the igw policy's EPP configuration (YAML); "" for the
	// built-in one.
	IGWConfig string
}

// Mode implements bench.Backend.
func (Backend) Mode() string { return "des" }

// epoch is virtual time zero as the router's clock shows it.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// flight is a request on a pod.
type flight struct {
	req    *workload.Request
	ticket policies.Ticket
	pod    int
	// started is set at the first token (the client's timeout no longer applies).
	started bool
}

type run struct {
	job    bench.Job
	pods   []*sim.Engine
	router policies.Router
	wants  policies.Feedback
	gen    *workload.Generator
	rec    *bench.Recorder
	flying map[uint64]*flight
	// deadlines are the client timeouts of routed requests (faults.go).
	deadlines []deadline
	// held are the requests the picker holds in its queue, in the order
	// it took them (policies.Queuing); freed says a pod freed up since
	// they were last routed.
	held  []heldRequest
	freed bool

	scrapeAt []time.Duration
	snap     sim.Snapshot
	samples  []datastore.Metrics // last sample per pod, whose adapter lists are reused while unchanged
}

// Run implements bench.Backend.
func (b Backend) Run(ctx context.Context, job bench.Job, gen *workload.Generator, rec *bench.Recorder, progress func(float64)) error {
	sc := job.Scenario
	switch {
	case sc.MultiCluster() && policies.IsGlobal(job.Policy):
		return b.runGlobal(ctx, job, gen, rec, progress)
	case policies.IsGlobal(job.Policy):
		return fmt.Errorf("policy %s picks among member clusters; scenario %s has one fleet (give it clusters)", job.Policy, sc.Name)
	}
	// A single-cluster policy runs a multi-cluster scenario as one cluster
	// holding every member's pods, without network or outages: the reference
	// the global policies' prefix locality is held to.
	r := &run{job: job, gen: gen, rec: rec, flying: map[uint64]*flight{}}
	fleet := policies.Fleet{ScrapeInterval: sc.ScrapeInterval, Predict: r.predict, IGWConfig: b.IGWConfig,
		KVEventDelay: sc.KVEventDelay, SLO: policies.RouteSLO(sc.SLO.TTFT, sc.SLO.TPOT)}
	var err error
	if r.pods, fleet.Pods, err = newPods(sc, job.Seed); err != nil {
		return err
	}
	router, err := policies.New(job.Policy, fleet, job.Seed)
	if err != nil {
		return err
	}
	r.router, r.wants = router, router.Wants()
	if q, ok := router.(policies.Queuing); ok {
		q.HoldRequests()
	}
	for _, e := range r.pods {
		e.SetTokenEvents(r.wants.Tokens)
	}
	if err := r.relayKVEvents(); err != nil {
		return err
	}
	if r.wants.Telemetry {
		r.samples = make([]datastore.Metrics, len(r.pods))
		r.scrapeAt = make([]time.Duration, len(r.pods))
		for i := range r.pods {
			r.scrape(i, 0) // the scrapers' first samples precede traffic
			r.scrapeAt[i] = sc.ScrapeInterval * time.Duration(i+1) / time.Duration(len(r.pods))
		}
	}
	return r.loop(ctx, progress)
}

func (r *run) loop(ctx context.Context, progress func(float64)) error {
	sc := r.job.Scenario
	// On equal times: step ends first (their events happened), then scrapes,
	// then timeouts, then the warmup mark, then arrivals (which see all of them).
	var l eventLoop
	offer := func(ev *event) {
		if r.wants.Telemetry {
			for i, t := range r.scrapeAt {
				ev.offer(t, "scrape", i, -1)
			}
		}
		if t, ok := r.nextDeadline(); ok {
			ev.offer(t, "timeout", -1, -1)
		}
		if len(r.held) > 0 {
			// A request behind the head was last routed earlier: when
			// it was to be decided again may have passed meanwhile.
			ev.offer(max(r.held[0].deadline, l.last), "held", -1, -1)
		}
	}
	l = eventLoop{job: r.job, rec: r.rec, gen: r.gen, pods: r.pods, handle: r.handle, arrive: r.arrive,
		inFlight: func() int { return len(r.flying) + len(r.held) },
		stepped: func(at time.Duration) {
			if r.freed {
				r.routeHeld(at, false)
			}
		}}
	do := func(ev event) (bool, error) {
		switch ev.kind {
		case "held":
			r.routeHeld(ev.at, true)
		case "scrape":
			r.scrape(ev.which, ev.at)
			r.scrapeAt[ev.which] += sc.ScrapeInterval
		case "timeout":
			r.timeOut(ev.at)
		default:
			if !r.abandonStuck(l.last) {
				return false, fmt.Errorf("requests in flight but no pod is busy (virtual time %v)", ev.at)
			}
			return false, nil
		}
		return true, nil
	}
	return l.run(ctx, progress, offer, do)
}

// arrive routes a released request and submits it to its pod.
func (r *run) arrive(req *workload.Request) {
	r.rec.Arrived(req)
	r.route(req, req.Arrival, false)
}

// heldRequest is a request the picker holds, and when it is to be routed
// again at the latest.
type heldRequest struct {
	req      *workload.Request
	deadline time.Duration
}

// routeHeld routes the held requests again, in order, at a pod's freeing
// up: until one is held again. At the head's deadline (due) only the head
// is routed again, to be placed or shed.
func (r *run) routeHeld(at time.Duration, due bool) {
	r.freed = false
	for len(r.held) > 0 {
		h := r.held[0]
		r.held = r.held[1:]
		if !r.route(h.req, at, true) || due {
			return
		}
	}
}

// route routes req at at and submits it to its pod; false when the picker
// holds it (again, at the head of the held requests, when it was held).
func (r *run) route(req *workload.Request, at time.Duration, again bool) bool {
	now := epoch.Add(at)
	preq := policies.Request{ID: req.ID, Model: req.Model, Adapter: req.Adapter, Prompt: req.Prompt,
		Tokens: req.Tokens, OutputTokens: req.OutputTokens}
	pod, ticket, err := r.router.Route(&preq, now)
	var held *policies.Held
	if errors.As(err, &held) {
		h := heldRequest{req: req, deadline: held.Deadline.Sub(epoch)}
		if again {
			r.held = slices.Insert(r.held, 0, h)
		} else {
			r.held = append(r.held, h)
		}
		return false
	}
	code := 0
	if err != nil {
		code = routeCode(err)
	} else {
		pod, ticket, code = r.submit(req, pod, ticket, at)
	}
	if code != 0 {
		r.rec.Failed(req.ID, at, code)
		r.gen.Finished(req, at, false)
		return true
	}
	req.Tokens = nil // the engine keeps block hashes; the prompt text stays for the next turn
	r.rec.Routed(req.ID, pod)
	r.flying[req.ID] = &flight{req: req, ticket: ticket, pod: pod}
	r.deadlines = append(r.deadlines, deadline{at: at + ClientTimeout, id: req.ID})
	// Submit may complete steps ending at this instant; their events wait for the
	// pod's next Advance, which the loop makes before anything later happens.
	r.handle(r.pods[pod].Advance(at))
	return true
}

// newPods makes the scenario's pods for seed, in PodConfigs order, and
// describes each to a router.
func newPods(sc *scenario.Scenario, seed uint64) ([]*sim.Engine, []policies.Pod, error) {
	var engines []*sim.Engine
	var pods []policies.Pod
	groups, faults := sc.PodGroups(), sc.PodFaults()
	for i, cfg := range sc.PodConfigs(seed) {
		e, err := sim.New(cfg)
		if err == nil {
			err = e.SetFaults(faults[i])
		}
		if err != nil {
			return nil, nil, fmt.Errorf("pod %d: %w", i, err)
		}
		kv := cfg.KVCacheTokens
		if kv == 0 {
			kv = e.Profile().KVCapacityTokens
		}
		engines = append(engines, e)
		pods = append(pods, policies.Pod{Group: groups[i], KVTokens: kv, GPU: cfg.GPU})
	}
	return engines, pods, nil
}

// handle feeds a pod's events to the recorder, the router and the generator.
func (r *run) handle(events []sim.Event) {
	for i := range events {
		ev := &events[i]
		f := r.flying[ev.RequestID]
		if f == nil {
			continue
		}
		now := epoch.Add(ev.Time)
		switch ev.Kind {
		case sim.EventFirstToken:
			f.started = true
			r.freed = true
			r.rec.FirstToken(ev.RequestID, ev.Time)
			r.router.ObserveFirstToken(f.ticket, now)
		case sim.EventToken:
			r.router.ObserveTokens(f.ticket, 1, now)
		case sim.EventFinish:
			r.freed = true
			r.rec.Finished(ev.RequestID, ev.Time, ev.Tokens, ev.PromptTokens, ev.CachedTokens)
			r.router.ObserveCompletion(f.ticket, ev.Tokens, now)
			delete(r.flying, ev.RequestID)
			r.gen.Finished(f.req, ev.Time, true)
		case sim.EventFailed: // the pod crashed: the connection was reset
			r.freed = true
			r.router.ObserveFailure(f.ticket, director.Failure{}, now)
			r.fail(f, ev.Time, bench.CodeNoResponse)
		}
	}
}

// scrape hands the router pod i's telemetry as of at.
func (r *run) scrape(i int, at time.Duration) {
	if r.pods[i].MetricsFault(at) != "" {
		return // the scrape fails (absent) or does not parse (garbage): the picker keeps its last sample
	}
	r.pods[i].SnapshotInto(&r.snap)
	m := &r.samples[i]
	MetricsFromSnapshot(&r.snap, epoch.Add(at), m)
	r.router.Observe(i, m, epoch.Add(at))
}

// MetricsFromSnapshot fills m with what the picker's telemetry parser reads
// from the simulator's vLLM /metrics for s, sampled at sampledAt. m's adapter
// lists are kept when unchanged and replaced (never mutated: the picker may
// hold them) when not.
func MetricsFromSnapshot(s *sim.Snapshot, sampledAt time.Time, m *datastore.Metrics) {
	running, waiting := m.RunningAdapters, m.WaitingAdapters
	*m = datastore.Metrics{
		Waiting: s.Waiting, Running: s.Running,
		KVCacheUsage: min(max(s.KVCacheUsage, 0), 1), KVCacheKnown: true,
		BlockSizeTokens: s.BlockSize, NumGPUBlocks: s.NumBlocks,
		PrefixCacheHitRate: -1, SampledAt: sampledAt,
	}
	if s.PrefixCacheQueries > 0 {
		m.PrefixCacheHitRate = float64(s.PrefixCacheHits) / float64(s.PrefixCacheQueries)
	}
	if s.MaxLoras > 0 { // vLLM reports lora_requests_info only with LoRA enabled
		m.MaxAdapters = s.MaxLoras
		m.RunningAdapters = sameOrCopy(running, s.RunningAdapters)
		m.WaitingAdapters = sameOrCopy(waiting, s.WaitingAdapters)
	}
}

func sameOrCopy(old, cur []string) []string {
	if slices.Equal(old, cur) {
		return old
	}
	if len(cur) == 0 {
		return nil
	}
	return slices.Clone(cur)
}

// predict is the oracle's exact cost model: the pod's own scheduler run
// forward on a copy of its current state.
func (r *run) predict(pod int, req *policies.Request, now time.Time) (time.Duration, error) {
	return r.pods[pod].PredictTTFT(sim.Request{ID: req.ID, Adapter: req.Adapter, Prompt: req.Tokens, OutputTokens: req.OutputTokens}, now.Sub(epoch))
}
