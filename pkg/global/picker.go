// Package global is the second tier's picker: for each request it picks a
// member cluster (whose inference gateway then picks a pod), with the endpoint
// picker's scheduler framework. Members are endpoints of a datastore.Store per
// model, whose telemetry samples are the members' summaries
// (pkg/globalsummary); the plugins under plugins/ read the member table the
// picker attaches to each cycle (pkg/global/member), and the endpoint
// picker's own load plugins work on members unchanged.
//
// The picker reads no clock: every call carries now, so the same code runs
// behind the hub's ext_proc server and in the benchmark's virtual time.
package global

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/wire"
)

// Options configure a Picker.
type Options struct {
	// Region is the hub replica's own region: a request's origin when the
	// edge does not name one (wire.HeaderClientRegion).
	Region string
	// Health holds the failure-detection thresholds (zero fields: defaults).
	Health health.Settings
	// SummaryStaleness is the age beyond which a member's summary is stale:
	// its load scores are 0 (default 3 s, six polls at 0.5 s).
	SummaryStaleness time.Duration
	// RTTSmoothing is a new round-trip sample's weight in the smoothed one (default 0.3).
	RTTSmoothing float64
	// Seed makes tie-breaks and slow-start draws reproducible.
	Seed uint64
}

// Default option values.
const (
	DefaultSummaryStaleness = 3 * time.Second
	DefaultRTTSmoothing     = 0.3
)

// Picker picks member clusters. Safe for concurrent use.
type Picker struct {
	opts     Options
	pipeline atomic.Pointer[Pipeline]

	mu        sync.RWMutex
	members   map[string]*memberState // by name
	byKey     map[string]*memberState // by endpoint key
	endpoints []datastore.Endpoint
	models    map[string]*modelStore

	cycles scheduling.CyclePool[cycle]
}

type modelStore struct {
	name  string
	store *datastore.Store
}

type cycle struct {
	*scheduling.Cycle
	table   member.Table
	states  []*datastore.EndpointState
	members []*memberState // by view ID
	byID    []*datastore.EndpointState
	cands   []*datastore.View
}

// New returns a picker with no members; it picks nothing until SetMembers,
// SetPipeline and a first summary.
func New(opts Options) (*Picker, error) {
	h, err := opts.Health.WithDefaults()
	if err != nil {
		return nil, err
	}
	opts.Health = h
	if opts.SummaryStaleness <= 0 {
		opts.SummaryStaleness = DefaultSummaryStaleness
	}
	if !(opts.RTTSmoothing > 0 && opts.RTTSmoothing <= 1) {
		opts.RTTSmoothing = DefaultRTTSmoothing
	}
	return &Picker{opts: opts, members: map[string]*memberState{}, byKey: map[string]*memberState{}, models: map[string]*modelStore{}}, nil
}

// SetPipeline makes pl the pipeline for decisions from now on.
func (p *Picker) SetPipeline(pl *Pipeline) { p.pipeline.Store(pl) }

// Pipeline returns the pipeline in effect.
func (p *Picker) Pipeline() *Pipeline { return p.pipeline.Load() }

// modelStore returns the store of model's members, made on first sight.
func (p *Picker) modelStore(model string) *modelStore {
	p.mu.RLock()
	ms := p.models[model]
	p.mu.RUnlock()
	if ms != nil {
		return ms
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ms = p.models[model]; ms == nil {
		ms = &modelStore{name: model, store: datastore.NewStore(latency.DefaultPriors)}
		ms.store.SetEndpoints(p.endpoints)
		p.models[model] = ms
	}
	return ms
}

// Decision is one pick: the member to send the request to and, on a first
// attempt, one fallback for a retry.
type Decision struct {
	Member  string
	Address string
	// FallbackMember and FallbackAddress are the next best member ("" when
	// none, and on a retry: a request is retried once).
	FallbackMember  string
	FallbackAddress string
	// Attempt is 1 for a first pick, 2 for its retry.
	Attempt int
	// UncachedTokens is the prompt the member is expected not to hold.
	UncachedTokens int
	Reason         string
	Breakdown      *scheduling.Breakdown

	req       scheduling.Request
	explain   bool
	model     *modelStore
	member    *memberState
	endpoint  *datastore.EndpointState
	request   *datastore.Request
	firstByte bool
	done      bool
}

// Destination is the destination header's value: the member's address, then
// the fallback's.
func (d *Decision) Destination() string {
	if d.FallbackAddress == "" {
		return d.Address
	}
	return d.Address + "," + d.FallbackAddress
}

// Reasons a decision is made under.
const (
	ReasonScored  = "scored"
	ReasonRetried = "retried"
	// ReasonBalancedByProxy: the proxy sent the request to another member
	// than the picked one without a retry (ServedBy).
	ReasonBalancedByProxy = "balanced-by-proxy"
)

// Pick picks a member for req at now. On success the pick counts against the
// member at once; the caller ends it with ObserveCompletion or ObserveFailure
// (or Retry). A 503 says why no member can take the request. req.Model is the
// base model (a name that is only some member's adapter is resolved to its
// base model); req must not change until the decision ends.
func (p *Picker) Pick(ctx context.Context, req *scheduling.Request, explain bool, now time.Time) (*Decision, *apierror.Error) {
	if err := ctx.Err(); err != nil {
		return nil, apierror.Unavailable("request canceled before a member cluster was picked: %v", err)
	}
	r := *req
	ms := p.resolve(&r)
	if ms == nil {
		return nil, apierror.Unavailable("no member cluster has reported model %s", req.Model)
	}
	return p.run(ms, r, explain, nil, now)
}

// resolve finds the model store of r, turning a model name that is no base
// model but an adapter some member lists into (base, adapter).
func (p *Picker) resolve(r *scheduling.Request) *modelStore {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if ms := p.models[r.Model]; ms != nil || r.Adapter != "" {
		return ms
	}
	for _, m := range p.members {
		m.mu.Lock()
		s := m.summary
		m.mu.Unlock()
		if s == nil {
			continue
		}
		for i := range s.Models {
			for _, a := range s.Models[i].Adapters {
				if a == r.Model {
					r.Model, r.Adapter = s.Models[i].Model, a
					return p.models[r.Model]
				}
			}
		}
	}
	return nil
}

func (p *Picker) run(ms *modelStore, req scheduling.Request, explain bool, exclude *memberState, now time.Time) (*Decision, *apierror.Error) {
	pl := p.pipeline.Load()
	if pl == nil {
		return nil, apierror.Unavailable("the global picker has no valid configuration yet")
	}
	c := p.getCycle()
	defer p.putCycle(c)
	c.Reset(&req, now, scheduling.PrefixSettings{})
	c.Latency = latency.DefaultModel
	c.Data = &c.table
	origin := req.Headers[wire.HeaderClientRegion]
	if origin == "" {
		origin = p.opts.Region
	}

	c.states = ms.store.Endpoints(c.states[:0])
	n := int(ms.store.MaxID())
	c.table.Reset(origin, pl.MaxPrefixBlocks, n)
	if cap(c.members) < n {
		c.members, c.byID = make([]*memberState, n), make([]*datastore.EndpointState, n)
	}
	c.members, c.byID = c.members[:n], c.byID[:n]
	views := c.Views(len(c.states))
	c.cands = c.cands[:0]
	p.mu.RLock()
	for i, st := range c.states {
		m := p.byKey[st.Key()]
		if m == nil || m == exclude || int(st.ID()) >= n {
			continue
		}
		v := &views[i]
		st.View(now, p.opts.SummaryStaleness, v)
		c.members[v.ID], c.byID[v.ID] = m, st
		c.cands = append(c.cands, v)
	}
	p.mu.RUnlock()
	for _, v := range c.cands {
		c.table.Set(v.ID, c.members[v.ID].snapshot(ms.name, now))
	}
	if len(c.cands) == 0 {
		if exclude != nil {
			return nil, apierror.Unavailable("member cluster %s failed and no other member cluster is configured to retry on", exclude.Name)
		}
		return nil, apierror.Unavailable("no member cluster is configured")
	}
	survivors, ranking := pl.Profile.Run(c.Cycle, c.cands)
	if len(ranking) == 0 {
		reason := c.table.Rejection()
		if reason == "" {
			reason = "no member cluster passed the configured filters"
		}
		if exclude != nil {
			reason = "member cluster " + exclude.Name + " failed before the first byte and no other can take the request: " + reason
		}
		return nil, apierror.Unavailable("%s", reason)
	}
	primary := survivors[ranking[0]]
	m := c.members[primary.ID]
	d := &Decision{Member: m.Name, Address: m.Address, Attempt: 1, Reason: ReasonScored,
		req: req, explain: explain, model: ms, member: m, endpoint: c.byID[primary.ID]}
	if exclude != nil {
		d.Attempt, d.Reason = 2, ReasonRetried
	} else if len(ranking) > 1 {
		fb := c.members[survivors[ranking[1]].ID]
		d.FallbackMember, d.FallbackAddress = fb.Name, fb.Address
	}
	if explain {
		b := c.Breakdown(pl.Profile, ranking[0])
		b.Endpoint, b.Reason = m.Name, d.Reason
		d.Breakdown = &b
	}
	d.UncachedTokens = c.PromptTokens - c.table.MatchedTokens(c.Cycle, primary)
	d.request = &datastore.Request{PromptTokens: c.PromptTokens, UncachedTokens: d.UncachedTokens}
	d.endpoint.Picked(d.request, now)
	m.addSent(ms.name, d.UncachedTokens)
	return d, nil
}

// ObserveFirstByte reports the first response byte from d's member: a success
// for its health.
func (p *Picker) ObserveFirstByte(d *Decision, now time.Time) {
	if d.done || d.firstByte {
		return
	}
	d.firstByte = true
	d.endpoint.ObserveFirstToken(d.request, now)
	d.member.health.ObserveRequest(health.Success, now)
}

// ObserveCompletion ends d as a success.
func (p *Picker) ObserveCompletion(d *Decision, now time.Time) {
	if d.done {
		return
	}
	if !d.firstByte {
		d.member.health.ObserveRequest(health.Success, now)
	}
	d.done = true
	d.endpoint.ObserveCompletion(d.request, 0, now)
}

// ObserveFailure ends d as a failure of its member (before or after the first byte).
func (p *Picker) ObserveFailure(d *Decision, o health.Outcome, now time.Time) {
	if d.done {
		return
	}
	d.done = true
	d.member.health.ObserveRequest(o, now)
	d.endpoint.ObserveCompletion(d.request, 0, now)
}

// Retry ends d as a failure (o) of its member before the first byte, or as
// its shed (a saturated member's 429), and picks another member for the same
// request, once: the retry's own failure, or a failure after the first byte,
// is the client's error (a 429 when the retry was shed too). The retry passes the
// same filters, so a pinned model stays in its regions.
func (p *Picker) Retry(d *Decision, o health.Outcome, now time.Time) (*Decision, *apierror.Error) {
	if d.firstByte {
		p.ObserveFailure(d, o, now)
		return nil, apierror.Unavailable("member cluster %s failed (%s) after the response began; only a request without a first byte is retried", d.Member, o)
	}
	p.ObserveFailure(d, o, now)
	if d.Attempt >= 2 {
		if o == health.Shed {
			return nil, apierror.RateLimited(1, "member clusters are saturated: %s turned the request away after another member did; retry later", d.Member)
		}
		return nil, apierror.Unavailable("member cluster %s failed (%s) on the retry; a request is retried once", d.Member, o)
	}
	return p.run(d.model, d.req, d.explain, d.member, now)
}

// ServedBy moves d to the member at address, which answered the request
// instead of d's member: the proxy retried on the fallback (primaryFailed:
// d's member failed, o, before the first byte) or balanced the request
// elsewhere itself (d's member ends without a verdict). The returned
// decision is on the serving member and takes the request's remaining
// outcomes; d itself when address is d's own member's. An address that is no
// member's is an error, and d stays as it is.
func (p *Picker) ServedBy(d *Decision, address string, primaryFailed bool, o health.Outcome, now time.Time) (*Decision, error) {
	p.mu.RLock()
	served := p.byKey[address]
	p.mu.RUnlock()
	switch {
	case served == nil:
		return d, fmt.Errorf("%s is no member cluster's address", address)
	case served == d.member || d.done:
		return d, nil
	}
	st := d.model.store.Get(served.endpoint.Key())
	if st == nil {
		return d, fmt.Errorf("member cluster %s is not among model %s's members", served.Name, d.model.name)
	}
	if primaryFailed {
		p.ObserveFailure(d, o, now)
	} else {
		d.done = true
		d.endpoint.ObserveCompletion(d.request, 0, now)
	}
	// The serving member's prefix match is unknown here: its whole prompt is
	// counted as uncached.
	next := &Decision{Member: served.Name, Address: served.Address, Attempt: 2, Reason: ReasonRetried,
		UncachedTokens: d.request.PromptTokens, req: d.req, explain: d.explain, model: d.model, member: served, endpoint: st}
	if !primaryFailed {
		// No retry: the proxy chose another member for the first attempt.
		next.Attempt, next.Reason = d.Attempt, ReasonBalancedByProxy
	}
	next.request = &datastore.Request{PromptTokens: d.request.PromptTokens, UncachedTokens: next.UncachedTokens}
	st.Picked(next.request, now)
	served.addSent(d.model.name, next.UncachedTokens)
	return next, nil
}

func (p *Picker) getCycle() *cycle {
	return p.cycles.Get(p.opts.Seed, func(c *scheduling.Cycle) *cycle { return &cycle{Cycle: c} })
}

func (p *Picker) putCycle(c *cycle) {
	clear(c.members)
	clear(c.byID)
	p.cycles.Put(c)
}
