package des

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/igw-dev/igw/internal/timeheap"
	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/workload"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/wire"
)

// SummaryPollInterval is how often each hub fetches every member's summary,
// and the fetch's timeout: as the hub does.
const SummaryPollInterval = 500 * time.Millisecond

// clientClosedRequest is the status a member's gateway logs for a request
// whose client connection is gone (nginx's 499): not the pod's failure.
const clientClosedRequest = 499

// globalRun is a multi-cluster run: member clusters, each a fleet behind its
// own in-cluster igw router that exports its summary; one hub per client
// region (its own global picker, health and round-trip measurements) picks a
// member for each request from that region. Requests and responses cross the
// network: the one-way delay between the client's region and the member's is
// added on the way in and again on the way out.
type globalRun struct {
	job     bench.Job
	sc      *scenario.Scenario
	gen     *workload.Generator
	rec     *bench.Recorder
	oracle  bool
	pods    []*sim.Engine
	members []*memberCluster
	byName  map[string]int
	hubs    map[string]*hub // by client region
	flying  map[uint64]*globalFlight

	deliveries timeheap.Heap[delivery]
	outages    []outageEdge // in time order
	pollAt     time.Duration
	snap       sim.Snapshot
}

// memberCluster is one member: its pods, its in-cluster router (igw's
// endpoint picker) and the summary exporter over that router's state.
type memberCluster struct {
	name, region string
	pods         []int // indices into globalRun.pods
	router       policies.Router
	wants        policies.Feedback
	exporter     *globalsummary.Exporter
	errors       *globalsummary.ErrorWindow
	samples      []datastore.Metrics
	scrapeAt     []time.Duration
	// down: unreachable now; downAtLastPoll: a fetch started at the last poll
	// is timing out, which the hub sees at this poll.
	down, downAtLastPoll bool
}

// hub is the global tier's picker in one client region.
type hub struct {
	region string
	picker *global.Picker
}

// globalFlight is a request from its arrival at the hub to its end.
type globalFlight struct {
	req      *workload.Request
	hub      *hub
	decision *global.Decision // nil for the oracle
	member   int
	pod      int // -1 while the request crosses the network
	ticket   policies.Ticket
	started  bool
	// delay is the one-way delay between the client's region and the member's.
	delay time.Duration
	// attempt counts sends, so that a delivery of an abandoned send is dropped.
	attempt int
	// oraclePod is the pod the oracle chose in the member.
	oraclePod int
}

// delivery is a request's send on its way to a member.
type delivery struct {
	id      uint64
	attempt int
}

// outageEdge is the start or the end of a member's outage.
type outageEdge struct {
	at     time.Duration
	member int
	down   bool
}

func (b Backend) runGlobal(ctx context.Context, job bench.Job, gen *workload.Generator, rec *bench.Recorder, progress func(float64)) error {
	sc := job.Scenario
	if !policies.IsGlobal(job.Policy) {
		return fmt.Errorf("policy %s is not a global policy", job.Policy)
	}
	r := &globalRun{job: job, sc: sc, gen: gen, rec: rec, oracle: job.Policy == policies.GlobalOracle,
		byName: map[string]int{}, hubs: map[string]*hub{}, flying: map[uint64]*globalFlight{}}
	engines, pods, err := newPods(sc, job.Seed)
	if err != nil {
		return err
	}
	r.pods = engines
	for i, c := range sc.Clusters {
		r.byName[c.Name] = i
		r.members = append(r.members, &memberCluster{name: c.Name, region: c.Region,
			errors: globalsummary.NewErrorWindow(globalsummary.DefaultErrorWindow, 30)})
	}
	fleets := make([]policies.Fleet, len(r.members))
	for i, m := range sc.ClusterOfPod() {
		r.members[m].pods = append(r.members[m].pods, i)
		fleets[m].Pods = append(fleets[m].Pods, pods[i])
	}
	for i, m := range r.members {
		if r.oracle {
			break // the oracle routes on the pods' exact state; the members' routers are not used
		}
		f := fleets[i]
		f.ScrapeInterval, f.IGWConfig, f.KVEventDelay, f.SLO = sc.ScrapeInterval, b.IGWConfig, sc.KVEventDelay, policies.RouteSLO(sc.SLO.TTFT, sc.SLO.TPOT)
		router, err := policies.New(policies.IGW, f, job.Seed*31+uint64(i))
		if err != nil {
			return fmt.Errorf("cluster %s: %w", m.name, err)
		}
		m.router, m.wants = router, router.Wants()
		src, ok := policies.SummarySource(router, sc.Model(), m.errors)
		if !ok {
			return fmt.Errorf("cluster %s: its router exports no summary", m.name)
		}
		m.exporter = globalsummary.NewExporter(globalsummary.ExporterOptions{Cluster: m.name, Region: m.region},
			func() []globalsummary.Source { return []globalsummary.Source{src} })
		for _, p := range m.pods {
			r.pods[p].SetTokenEvents(m.wants.Tokens)
		}
		m.samples, m.scrapeAt = make([]datastore.Metrics, len(m.pods)), make([]time.Duration, len(m.pods))
		for k := range m.pods {
			r.scrape(m, k, 0)
			m.scrapeAt[k] = sc.ScrapeInterval * time.Duration(k+1) / time.Duration(len(m.pods))
		}
	}
	if err := r.buildHubs(); err != nil {
		return err
	}
	for _, o := range sc.Outages {
		m := r.byName[o.Cluster]
		r.outages = append(r.outages, outageEdge{at: o.At, member: m, down: true}, outageEdge{at: o.At + o.For, member: m})
	}
	slices.SortStableFunc(r.outages, func(a, b outageEdge) int { return int(a.at - b.at) })
	if !r.oracle {
		r.poll(0)
	}
	return r.loop(ctx, progress)
}

// buildHubs makes one hub per client region, each with the policy's pipeline
// and every member, its round trip known from the network table.
func (r *globalRun) buildHubs() error {
	if r.oracle {
		return nil
	}
	var links []policies.Link
	for _, l := range r.sc.Network {
		links = append(links, policies.Link{From: l.From, To: l.To, Delay: l.Delay})
	}
	regions, _ := r.sc.OriginRegions()
	var members []global.Member
	for _, m := range r.members {
		members = append(members, global.Member{Name: m.name, Region: m.region, Address: "gw." + m.name + ".igw.test:443"})
	}
	for i, region := range regions {
		// Each hub gets its own pipeline: a stateful picker (round-robin) is per hub.
		pl, err := policies.GlobalPipeline(r.job.Policy, links, scenario.DefaultSameRegionDelay)
		if err != nil {
			return err
		}
		p, err := global.New(global.Options{Region: region, Seed: r.job.Seed*7 + uint64(i)})
		if err != nil {
			return err
		}
		p.SetPipeline(pl)
		if err := p.SetMembers(members); err != nil {
			return err
		}
		for _, m := range r.members {
			if err := p.ObserveRTT(m.name, 2*r.sc.Delay(region, m.region)); err != nil {
				return err
			}
		}
		r.hubs[region] = &hub{region: region, picker: p}
	}
	return nil
}

func (r *globalRun) loop(ctx context.Context, progress func(float64)) error {
	sc := r.job.Scenario
	// On equal times: step ends, scrapes, polls, outage edges, deliveries,
	// the warmup mark, then arrivals (which see all of them).
	offer := func(ev *event) {
		for i, m := range r.members {
			if m.router == nil || !m.wants.Telemetry {
				continue
			}
			for k, t := range m.scrapeAt {
				ev.offer(t, "scrape", i, k)
			}
		}
		if !r.oracle {
			ev.offer(r.pollAt, "poll", -1, -1)
		}
		if len(r.outages) > 0 {
			ev.offer(r.outages[0].at, "outage", -1, -1)
		}
		if at, ok := r.deliveries.Next(); ok {
			ev.offer(at, "delivery", -1, -1)
		}
	}
	l := eventLoop{job: r.job, rec: r.rec, gen: r.gen, pods: r.pods, handle: r.handle, arrive: r.arrive, inFlight: func() int { return len(r.flying) },
		giveUpAfter: time.Hour}
	do := func(ev event) (bool, error) {
		switch ev.kind {
		case "scrape":
			m := r.members[ev.which]
			r.scrape(m, ev.sub, ev.at)
			m.scrapeAt[ev.sub] += sc.ScrapeInterval
		case "poll":
			r.poll(ev.at)
		case "outage":
			e := r.outages[0]
			r.outages = r.outages[1:]
			r.outage(e, ev.at)
		case "delivery":
			_, d := r.deliveries.Pop()
			r.deliver(d, ev.at)
		default:
			return false, fmt.Errorf("requests in flight but nothing to happen (virtual time %v)", ev.at)
		}
		return true, nil
	}
	return l.run(ctx, progress, offer, do)
}

// scrape hands member m's router the telemetry of its k-th pod as of at.
func (r *globalRun) scrape(m *memberCluster, k int, at time.Duration) {
	e := r.pods[m.pods[k]]
	if e.MetricsFault(at) != "" {
		return
	}
	e.SnapshotInto(&r.snap)
	MetricsFromSnapshot(&r.snap, epoch.Add(at), &m.samples[k])
	m.router.Observe(k, &m.samples[k], epoch.Add(at))
}

// poll is every hub's summary fetch from every member: a reachable member's
// summary arrives (its round trip is the network's); a fetch started at the
// last poll to a member that was unreachable then has timed out by now.
func (r *globalRun) poll(at time.Duration) {
	now := epoch.Add(at)
	for _, m := range r.members {
		var s *globalsummary.Summary
		if !m.down {
			s = m.exporter.Summary(now)
		}
		for _, region := range slices.Sorted(maps.Keys(r.hubs)) {
			h := r.hubs[region]
			if m.downAtLastPoll {
				_ = h.picker.SummaryFailed(m.name, fmt.Errorf("summary fetch timed out after %v", SummaryPollInterval), now)
			}
			if s != nil {
				_ = h.picker.UpdateSummary(m.name, s, 2*r.sc.Delay(region, m.region), now)
			}
		}
		m.downAtLastPoll = m.down
	}
	r.pollAt = at + SummaryPollInterval
}

// hubOf is the hub of the request's client region.
func (r *globalRun) hubOf(req *workload.Request) *hub {
	if h := r.hubs[req.Origin]; h != nil {
		return h
	}
	regions, _ := r.sc.OriginRegions()
	return r.hubs[regions[0]]
}

func (r *globalRun) origin(f *globalFlight) string {
	if f.req.Origin != "" {
		return f.req.Origin
	}
	regions, _ := r.sc.OriginRegions()
	return regions[0]
}

// arrive picks a member for a released request and sends it there.
func (r *globalRun) arrive(req *workload.Request) {
	r.rec.Arrived(req)
	at := req.Arrival
	f := &globalFlight{req: req, pod: -1}
	r.flying[req.ID] = f
	if r.oracle {
		r.oracleSend(f, -1, at)
		return
	}
	f.hub = r.hubOf(req)
	sreq := scheduling.Request{Model: req.Model, Adapter: req.Adapter, Prompt: req.Prompt,
		Headers: map[string]string{wire.HeaderClientRegion: r.origin(f)}}
	d, apiErr := f.hub.picker.Pick(context.Background(), &sreq, false, epoch.Add(at))
	if apiErr != nil {
		r.fail(f, at, routeCode(apiErr))
		return
	}
	r.send(f, d, at)
}

// send puts f on its way to d's member at at.
func (r *globalRun) send(f *globalFlight, d *global.Decision, at time.Duration) {
	f.decision = d
	r.sendTo(f, r.byName[d.Member], at)
}

func (r *globalRun) sendTo(f *globalFlight, member int, at time.Duration) {
	f.member, f.pod = member, -1
	f.delay = r.sc.Delay(r.origin(f), r.members[member].region)
	f.attempt++
	r.rec.Sent(f.req.ID, member, at)
	r.deliveries.Push(at+f.delay, f.req.ID, delivery{id: f.req.ID, attempt: f.attempt})
}

// oracleSend sends f to the member and pod the exact cost model says answer
// first, the round trip included, among the members reachable at at (but
// exclude).
func (r *globalRun) oracleSend(f *globalFlight, exclude int, at time.Duration) {
	req := f.req
	sreq := sim.Request{ID: req.ID, Adapter: req.Adapter, Prompt: req.Tokens, OutputTokens: req.OutputTokens}
	best, bestPod, bestCost := -1, -1, time.Duration(math.MaxInt64)
	for i, m := range r.members {
		if m.down || i == exclude {
			continue
		}
		delay := r.sc.Delay(r.origin(f), m.region)
		for _, p := range m.pods {
			d, err := r.pods[p].PredictTTFT(sreq, at+delay)
			if err != nil {
				continue
			}
			if cost := d + 2*delay; cost < bestCost {
				best, bestPod, bestCost = i, p, cost
			}
		}
	}
	if best < 0 {
		r.fail(f, at, 503)
		return
	}
	f.oraclePod = bestPod
	r.sendTo(f, best, at)
}

// deliver hands a request that crossed the network to its member's router
// and pod; an unreachable member is a connect failure the hub learns of one
// delay later.
func (r *globalRun) deliver(d delivery, at time.Duration) {
	f := r.flying[d.id]
	if f == nil || f.attempt != d.attempt {
		return
	}
	m := r.members[f.member]
	if m.down {
		r.retry(f, health.Reset, at+f.delay)
		return
	}
	req := f.req
	pod := f.oraclePod
	if !r.oracle {
		preq := policies.Request{ID: req.ID, Model: req.Model, Adapter: req.Adapter, Prompt: req.Prompt,
			Tokens: req.Tokens, OutputTokens: req.OutputTokens}
		local, ticket, err := m.router.Route(&preq, epoch.Add(at))
		if err != nil { // the member's gateway answers with an error status before any byte of a response
			if routeCode(err) == http.StatusTooManyRequests {
				// Shed by the member's admission: saturated, not failed, and
				// (as in the gateway) no exchange, so no error in its summary.
				r.retry(f, health.Shed, at+f.delay)
				return
			}
			m.errors.Record(true, epoch.Add(at))
			r.retry(f, health.Status5xx, at+f.delay)
			return
		}
		pod, f.ticket = m.pods[local], ticket
	}
	if err := r.pods[pod].Submit(sim.Request{ID: req.ID, Adapter: req.Adapter, Prompt: req.Tokens, OutputTokens: req.OutputTokens}, at); err != nil {
		if m.router != nil {
			fail, _ := failureOf(err)
			m.router.ObserveFailure(f.ticket, fail, epoch.Add(at))
			m.errors.Record(true, epoch.Add(at))
		}
		r.retry(f, health.Status5xx, at+f.delay)
		return
	}
	f.pod = pod
	r.rec.Routed(req.ID, pod)
	r.handle(r.pods[pod].Advance(at))
}

// retry is the hub's answer, at at, to a send that failed before the first
// byte: once more on another member, else the client's error.
func (r *globalRun) retry(f *globalFlight, o health.Outcome, at time.Duration) {
	if r.oracle {
		if f.attempt >= 2 {
			r.fail(f, at, bench.CodeNoResponse)
			return
		}
		r.oracleSend(f, f.member, at)
		return
	}
	d, apiErr := f.hub.picker.Retry(f.decision, o, epoch.Add(at))
	if apiErr != nil {
		r.fail(f, at, routeCode(apiErr))
		return
	}
	r.send(f, d, at)
}

// fail ends f with the client's error at at.
func (r *globalRun) fail(f *globalFlight, at time.Duration, code int) {
	delete(r.flying, f.req.ID)
	f.req.Tokens = nil
	r.rec.Failed(f.req.ID, at, code)
	r.gen.Finished(f.req, at, false)
}

// outage starts or ends a member's outage. At its start, every request on
// the member is cut: one that had a response byte fails at the client, one
// without is retried by its hub.
func (r *globalRun) outage(e outageEdge, at time.Duration) {
	m := r.members[e.member]
	m.down = e.down
	if !e.down {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(r.flying)) {
		f := r.flying[id]
		if f.member != e.member || f.pod < 0 {
			continue // crossing the network: the connect fails on delivery
		}
		r.pods[f.pod].Abort(id, at)
		if m.router != nil {
			// Inside the member the client went away; its pods did not fail.
			m.router.ObserveFailure(f.ticket, director.Failure{Status: clientClosedRequest}, epoch.Add(at))
		}
		seen := at + f.delay // the reset reaches the hub
		if f.started {
			if f.decision != nil {
				f.hub.picker.ObserveFailure(f.decision, health.Reset, epoch.Add(seen))
			}
			delete(r.flying, f.req.ID)
			f.req.Tokens = nil
			r.rec.Cut(f.req.ID, seen)
			r.gen.Finished(f.req, seen, false)
			continue
		}
		f.pod = -1
		r.retry(f, health.Reset, seen)
	}
}

// handle feeds pod events to the member's router, the hub, the recorder and
// the generator; what the client sees comes one network delay later.
func (r *globalRun) handle(events []sim.Event) {
	for i := range events {
		ev := &events[i]
		f := r.flying[ev.RequestID]
		if f == nil || f.pod < 0 {
			continue
		}
		m := r.members[f.member]
		inCluster, atClient := epoch.Add(ev.Time), ev.Time+f.delay
		switch ev.Kind {
		case sim.EventFirstToken:
			f.started = true
			r.rec.FirstToken(ev.RequestID, atClient)
			if m.router != nil {
				m.router.ObserveFirstToken(f.ticket, inCluster)
			}
			if f.decision != nil {
				f.hub.picker.ObserveFirstByte(f.decision, epoch.Add(atClient))
			}
		case sim.EventToken:
			if m.router != nil {
				m.router.ObserveTokens(f.ticket, 1, inCluster)
			}
		case sim.EventFinish:
			r.rec.Finished(ev.RequestID, atClient, ev.Tokens, ev.PromptTokens, ev.CachedTokens)
			if m.router != nil {
				m.router.ObserveCompletion(f.ticket, ev.Tokens, inCluster)
				m.errors.Record(false, inCluster)
			}
			if f.decision != nil {
				f.hub.picker.ObserveCompletion(f.decision, epoch.Add(atClient))
			}
			delete(r.flying, ev.RequestID)
			f.req.Tokens = nil
			r.gen.Finished(f.req, atClient, true)
		case sim.EventFailed: // the pod crashed
			if m.router != nil {
				m.router.ObserveFailure(f.ticket, director.Failure{}, inCluster)
				m.errors.Record(true, inCluster)
			}
			if f.started {
				if f.decision != nil {
					f.hub.picker.ObserveFailure(f.decision, health.Reset, epoch.Add(atClient))
				}
				r.fail(f, atClient, bench.CodeNoResponse)
			} else {
				f.pod = -1
				r.retry(f, health.Reset, atClient)
			}
		}
	}
}
