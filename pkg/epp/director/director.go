// Package director is the picker's entry point, shared by the ext_proc server,
// the in-process gateway and the discrete-event benchmark: Schedule turns a
// request into a destination (plus fallbacks) or an OpenAI-style error, and the
// Observe methods (the pick Lifecycle every picker shares) feed what happened
// afterwards back into per-endpoint state.
//
// The director reads no clock: every call carries now. The pipeline (filters,
// scorers, picker, admission) is swapped atomically on configuration reload,
// while endpoint state and the prefix index live on.
package director

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Reasons a decision is counted under.
const (
	ReasonScored       = "scored"
	ReasonProbe        = "probe"
	ReasonNoEndpoints  = "no-endpoints"
	ReasonNoSubset     = "no-subset-match"
	ReasonAllStale     = "all-stale"
	ReasonAllFiltered  = "all-filtered"
	ReasonShed         = "shed"
	ReasonCanceled     = "canceled"
	defaultBlockTokens = 16
	// minIndexBlockTokens: the index groups server blocks so one index block
	// covers at least this many tokens. Cached-token estimates lose under one
	// index block of precision; scheduling an 8k-token prompt costs 64 lookups
	// instead of 512.
	minIndexBlockTokens = 128
)

// Reasons lists every reason, for pre-creating metric series.
var Reasons = []string{ReasonScored, ReasonProbe, ReasonNoEndpoints, ReasonNoSubset, ReasonAllStale, ReasonAllFiltered, ReasonShed, ReasonCanceled, ReasonOverBounds}

// StalePolicy says what a stale endpoint is.
type StalePolicy string

// Stale policies: saturated keeps the endpoint but scores it worst and counts it
// saturated for admission; filter removes it.
const (
	StaleSaturated StalePolicy = "saturated"
	StaleFilter    StalePolicy = "filter"
)

// Pipeline is one configuration's scheduling behaviour.
type Pipeline struct {
	Profile   *scheduling.Profile
	Admission admission.Policy
	// Latency is the servers' timing model: predictions, Retry-After and speed learning.
	Latency latency.Model
	// BlockTokens fixes the prefix index's block size in tokens; 0 derives it
	// from the servers' reported block size (16 until one is reported), as the
	// smallest multiple of it covering at least 128 tokens.
	BlockTokens int
	// MaxPrefixBlocks bounds how much of a prompt is hashed; with
	// PrefixCacheShare > 0 it is the least bound, and a prompt is hashed up
	// to that share of the largest KV cache a server reported (PrefixBlocks).
	MaxPrefixBlocks  int
	PrefixCacheShare float64
	// BaseModels, when set, are the model names that are not LoRA adapters.
	BaseModels []string
	// Trusted are the request headers an ext_proc server acts on.
	Trusted TrustedHeaders
}

// TrustedHeaders says which of the picker's request headers come from a
// trusted source, and so are acted on; a header that is not trusted is
// ignored, since any client could have sent it.
type TrustedHeaders struct {
	// Debug: x-igw-debug asks for the score breakdown, which shows endpoint
	// addresses and scores.
	Debug bool
	// Priority: x-igw-priority sets the admission priority.
	Priority bool
}

// Options configure a Director.
type Options struct {
	// Staleness is the age after which telemetry is stale (0: never).
	Staleness   time.Duration
	StalePolicy StalePolicy
	// PrefixCapacity is each endpoint's prefix-index capacity in blocks until its
	// KV size is reported.
	PrefixCapacity int
	// Seed makes tie-breaks reproducible.
	Seed uint64
}

// Director schedules requests over a store of endpoints.
type Director struct {
	store    *datastore.Store
	index    *prefixindex.Index
	opts     Options
	pipeline atomic.Pointer[Pipeline]
	// fleetBlockTokens is the block size last reported by a server.
	fleetBlockTokens atomic.Int32
	// largestCacheTokens is the largest KV cache, in tokens, a server
	// reported (PrefixBlocks).
	largestCacheTokens atomic.Int64

	cycles scheduling.CyclePool[cycle]
	// queue is where requests wait while every endpoint is over the
	// admission bounds (ScheduleQueued).
	queue waitQueue
	// misses is the admission's miss budget.
	misses missBudget
	// sheds is the share of the latest requests shed.
	sheds shedShare
}

type cycle struct {
	*scheduling.Cycle
	states []*datastore.EndpointState
	byID   []*datastore.EndpointState
	cands  []*datastore.View
	// within is the candidates inside the admission bounds; soon those
	// that would start the request soon (late binding).
	within, soon []*datastore.View
	subset       map[string]struct{}
}

// New returns a director over store with an empty prefix index. It schedules
// nothing until SetPipeline.
func New(store *datastore.Store, opts Options) *Director {
	if opts.PrefixCapacity <= 0 {
		opts.PrefixCapacity = 31250
	}
	if opts.StalePolicy == "" {
		opts.StalePolicy = StaleSaturated
	}
	d := &Director{store: store, index: prefixindex.New(opts.PrefixCapacity), opts: opts}
	d.fleetBlockTokens.Store(defaultBlockTokens)
	store.OnRemove(d.index.RemoveEndpoint)
	return d
}

// Store returns the endpoint store.
func (d *Director) Store() *datastore.Store { return d.store }

// Index returns the prefix index.
func (d *Director) Index() *prefixindex.Index { return d.index }

// SetPipeline makes p the pipeline for decisions from now on; decisions in
// progress finish with the one they started with.
func (d *Director) SetPipeline(p *Pipeline) {
	old := d.pipeline.Swap(p)
	if old != nil && d.blockTokens(old) != d.blockTokens(p) {
		d.index.Reset()
	}
}

// Pipeline returns the pipeline in effect.
func (d *Director) Pipeline() *Pipeline { return d.pipeline.Load() }

// BlockTokens is the prefix index's block size in effect, in tokens.
func (d *Director) BlockTokens() int { return d.blockTokens(d.Pipeline()) }

func (d *Director) blockTokens(p *Pipeline) int {
	if p.BlockTokens > 0 {
		return p.BlockTokens
	}
	return IndexBlockTokens(int(d.fleetBlockTokens.Load()))
}

// IndexBlockTokens is the index block size derived from a server block size.
func IndexBlockTokens(serverBlock int) int {
	if serverBlock <= 0 {
		serverBlock = defaultBlockTokens
	}
	return serverBlock * ((minIndexBlockTokens + serverBlock - 1) / serverBlock)
}

// UpdateMetrics stores a telemetry sample for the endpoint key and adapts the
// prefix index to the server's reported KV geometry.
func (d *Director) UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool {
	st := d.store.Get(key)
	if st == nil {
		return false
	}
	st.UpdateMetrics(m, now)
	if m.BlockSizeTokens > 0 {
		if old := d.fleetBlockTokens.Swap(int32(m.BlockSizeTokens)); int(old) != m.BlockSizeTokens {
			if p := d.pipeline.Load(); p == nil || p.BlockTokens == 0 {
				d.index.Reset()
			}
		}
		if cacheTokens := m.NumGPUBlocks * m.BlockSizeTokens; m.NumGPUBlocks > 0 {
			d.noteCache(int64(cacheTokens))
			if p := d.pipeline.Load(); p != nil {
				// Remember no more than the server can hold.
				d.index.SetCapacity(st.ID(), max(1, cacheTokens/d.blockTokens(p)))
			}
		}
	}
	return true
}

// PrefixBlocks is how many blocks of blockTokens of a prompt p hashes:
// MaxPrefixBlocks, or up to PrefixCacheShare of the largest KV cache a
// server reported if that is more (a server gone since still counts: a
// longer key costs only hashing). One fixed bound suits one cache size.
// Keyed to its first 32k tokens, the index cannot tell a server holding a
// 100k-token document from one holding its first third, nor charge the
// rest to the server's cache. On an 80 GB H100 serving an 8B model (451k
// tokens of cache), where 256 blocks were chosen, keying more was a wash;
// with larger caches the requests sent to the wrong holder dominate. On
// the Mooncake traces' windows (des; igw's and the oracle's requests
// failed or served past the SLO at 0.85 and 0.95 of each window's oracle
// capacity; conversation and synthetic), keyed to 32k tokens and to a
// fourteenth of the cache: 124 and 123 against 137 and 117 with 600k
// tokens of cache per server (the oracle 94 and 98), 158 and 197 against
// 146 and 122 with 1M (99, 93), 137 and 198 against 122 and 90 with 2M
// (92, 64), 141 and 168 against 114 and 85 with 4M (94, 58).
func (d *Director) PrefixBlocks(p *Pipeline, blockTokens int) int {
	n := p.MaxPrefixBlocks
	if p.PrefixCacheShare > 0 && blockTokens > 0 {
		n = max(n, int(p.PrefixCacheShare*float64(d.largestCacheTokens.Load())/float64(blockTokens)))
	}
	return n
}

// noteCache records a server's KV cache of tokens (PrefixBlocks).
func (d *Director) noteCache(tokens int64) {
	for {
		old := d.largestCacheTokens.Load()
		if tokens <= old || d.largestCacheTokens.CompareAndSwap(old, tokens) {
			return
		}
	}
}

// ResolveModel splits a request's model into base model and adapter:
// baseHeader (set by the body-based router for an adapter) wins; otherwise a
// model outside the pipeline's BaseModels is an adapter.
func (d *Director) ResolveModel(model, baseHeader string) (base, adapter string) {
	if baseHeader != "" && baseHeader != model {
		return baseHeader, model
	}
	if p := d.pipeline.Load(); p != nil && len(p.BaseModels) > 0 && !slices.Contains(p.BaseModels, model) {
		return "", model
	}
	return model, ""
}

// Result is a scheduling decision.
type Result struct {
	// Primary is the destination "ip:port"; Fallbacks the next best, in order.
	Primary   string
	Fallbacks []string
	Reason    string
	// Breakdown explains the decision when the request asked for it.
	Breakdown *scheduling.Breakdown
	// Endpoint and Request are the accounting of the pick, for the Observe methods.
	Endpoint *datastore.EndpointState
	Request  *datastore.Request
	// place is the request's place in the picker's queue (ReasonQueued).
	place *Place
}

// Schedule picks endpoints for req at now. On success the pick already counts
// against the destination; the caller reports what becomes of it (Lifecycle)
// and must end it with ObserveCompletion or ObserveFailure.
// explain asks for a score breakdown.
// A request every endpoint is over the admission bounds for is shed at
// once; ScheduleQueued lets it wait for one instead.
func (d *Director) Schedule(ctx context.Context, req *scheduling.Request, explain bool, now time.Time) (*Result, *apierror.Error) {
	return d.schedule(ctx, req, explain, now, nil, false)
}

// schedule is Schedule for a request holding place in the queue (nil:
// none yet); queuing says whether it may wait there.
func (d *Director) schedule(ctx context.Context, req *scheduling.Request, explain bool, now time.Time, place *Place, queuing bool) (*Result, *apierror.Error) {
	if err := ctx.Err(); err != nil {
		return &Result{Reason: ReasonCanceled}, apierror.Unavailable("request canceled before scheduling: %v", err)
	}
	p := d.pipeline.Load()
	if p == nil {
		return &Result{Reason: ReasonAllFiltered}, apierror.Unavailable("the endpoint picker has no valid configuration yet")
	}
	c := d.getCycle()
	defer d.putCycle(c)
	blockTokens := d.blockTokens(p)
	c.Reset(req, now, scheduling.PrefixSettings{Index: d.index, BlockTokens: blockTokens, MaxBlocks: d.PrefixBlocks(p, blockTokens)})
	c.Latency = p.Latency

	c.states = d.store.Endpoints(c.states[:0])
	if len(c.states) == 0 {
		return &Result{Reason: ReasonNoEndpoints}, apierror.Unavailable("no model server endpoints are known for this pool")
	}
	d.restrictToSubset(c, req.Subset)
	if len(c.states) == 0 {
		return &Result{Reason: ReasonNoSubset}, apierror.Unavailable("none of the endpoints the proxy allows for this request is known to the picker")
	}
	views := c.Views(len(c.states))
	c.cands = c.cands[:0]
	for i, st := range c.states {
		v := &views[i]
		st.View(now, d.opts.Staleness, v)
		if v.Stale && d.opts.StalePolicy == StaleFilter {
			continue
		}
		for int(v.ID) >= len(c.byID) {
			c.byID = append(c.byID, nil)
		}
		c.byID[v.ID] = st
		c.cands = append(c.cands, v)
	}
	if len(c.cands) == 0 {
		return &Result{Reason: ReasonAllStale}, apierror.Unavailable("no endpoint has fresh telemetry")
	}
	var waited float64
	if place != nil {
		waited = now.Sub(place.Since).Seconds()
	}
	if place == nil && p.Admission.Enabled {
		d.misses.earn(p.Admission.MissBudget)
	}
	if a := req.Adapter; a != "" {
		for _, v := range c.cands {
			v.AdapterSlotWaitSeconds = adapterSlotWaitSeconds(v, a)
		}
	}
	// What the servers' KV events say each endpoint holds, before admission
	// judges what the request would cost there.
	p.Profile.ReadCache(c.Cycle, c.cands)
	reason := ReasonScored
	if place != nil {
		place.retry = time.Time{} // set again by a hold below
	}
	binding, retry := d.bind(p, c, req, place, queuing, waited, now)
	switch binding {
	case admission.Hold:
		if place == nil {
			place = d.hold(p, req, now)
		}
		if place != nil {
			if !math.IsInf(retry, 1) {
				place.retry = now.Add(seconds(retry))
			}
			return &Result{Reason: ReasonQueued, place: place}, nil
		}
		// No room to hold it: placed now, as without late binding.
		binding = admission.NotBound
	}
	if binding == admission.NotBound {
		dec := p.Admission.WithShedShare(d.sheds.load()).Decide(c.cands, req.Priority, c.PromptTokens, waited, p.Latency, c.Cycle)
		if dec.Shed {
			res, err := d.queueOrShed(p, dec, req, now, place, queuing)
			if res.Reason != ReasonShed || !dec.MissBudgetEligible || p.Admission.MissBudget <= 0 || !d.misses.spend() {
				if res.Reason == ReasonShed {
					d.sheds.observe(true)
				}
				return res, err
			}
			reason = ReasonOverBounds
		}
	}
	d.sheds.observe(false)
	// Endpoints to avoid (ejected, stalled, slow-starting) compete only when
	// the configured filters leave nothing else.
	// Of those, the endpoints within the admission bounds compete alone
	// while there are any: the request's first token may come sooner on one
	// over them, but there it would wait or decode past the bounds.
	var survivors []*datastore.View
	var ranking []int
	// later: with late binding, the candidates the endpoints starting the
	// request soon were taken from; the others serve only as fallbacks.
	var later []*datastore.View
	if h := healthy(c.cands); h != nil {
		h = p.Profile.Filter(c.Cycle, h)
		if c.within = p.Admission.WithinBounds(h, c.PromptTokens, waited, p.Latency, c.Cycle, c.within[:0]); len(c.within) > 0 {
			h = c.within
		}
		if binding == admission.StartNow {
			if soon := startingSoon(p, c, h); len(soon) < len(h) {
				later, h = h, soon
			}
		}
		survivors, ranking = p.Profile.Run(c.Cycle, h)
	}
	if len(ranking) == 0 {
		survivors, ranking = p.Profile.Run(c.Cycle, c.cands)
	}
	if len(ranking) == 0 {
		return &Result{Reason: ReasonAllFiltered}, apierror.Unavailable("no endpoint passed the configured filters")
	}
	if i := probeTarget(c.Cycle, survivors, ranking, now); i > 0 {
		ranking[0], ranking[i] = ranking[i], ranking[0]
		reason = ReasonProbe
	}
	primary := survivors[ranking[0]]
	res := &Result{Primary: primary.Key, Reason: reason, Endpoint: c.byID[primary.ID]}
	if len(ranking) > 1 {
		res.Fallbacks = make([]string, len(ranking)-1)
		for i, r := range ranking[1:] {
			res.Fallbacks[i] = survivors[r].Key
		}
	}
	if later != nil {
		res.Fallbacks = laterFallbacks(p, c, res, later)
	}
	if explain {
		b := c.Breakdown(p.Profile, ranking[0])
		b.Reason = res.Reason
		res.Breakdown = &b
	}
	res.Request = &datastore.Request{
		PromptTokens:   c.PromptTokens,
		UncachedTokens: c.UncachedTokens(primary),
		ChunkTokens:    p.Latency.ChunkTokens,
		Adapter:        req.Adapter,
	}
	res.Endpoint.Picked(res.Request, now)
	c.RecordPick(primary.ID)
	return res, nil
}

// ProbeAfter is how long an endpoint that passes the filters may go without
// a pick before a request is sent there to measure it again (an
// exploratory pick). Learning happens only on traffic: an endpoint that
// looked slow once (a pause, a restart) would otherwise never be measured
// again, and a whole GPU would be lost to the fleet.
const ProbeAfter = 2 * time.Second

// probeTarget is the position in ranking (> 0) of the endpoint to probe
// with this request, or 0 for none: the healthy endpoint idle longest past
// ProbeAfter with nothing of the picker's in flight. An endpoint never
// picked is not probed: its priors, optimistic, draw traffic to it. Only a request whose
// uncached prompt is at most the fleet's mean serves as a probe, so that a
// slow GPU is measured with small work, not handed a long prompt.
func probeTarget(c *scheduling.Cycle, survivors []*datastore.View, ranking []int, now time.Time) int {
	best := 0
	var idleSince time.Time
	var mean float64
	for pos, r := range ranking[1:] {
		v := survivors[r]
		if v.Stale || v.Avoid || v.InFlight > 0 || v.LastPickAt.IsZero() || now.Sub(v.LastPickAt) < ProbeAfter {
			continue
		}
		if mean == 0 {
			mean = meanPrompt(survivors)
		}
		if float64(c.UncachedTokens(v)) > mean {
			continue
		}
		if best == 0 || v.LastPickAt.Before(idleSince) {
			best, idleSince = pos+1, v.LastPickAt
		}
	}
	return best
}

// meanPrompt is the mean uncached prompt sent to the endpoints (the
// default prompt before any was sent).
func meanPrompt(views []*datastore.View) float64 {
	var sum float64
	var n int
	for _, v := range views {
		if v.MeanPromptTokens > 0 {
			sum += v.MeanPromptTokens
			n++
		}
	}
	if n == 0 {
		return latency.DefaultPromptTokens
	}
	return sum / float64(n)
}

// healthy returns the candidates not to avoid (datastore/health.go), or nil
// when none or all are to be avoided.
func healthy(cands []*datastore.View) []*datastore.View {
	n := 0
	for _, v := range cands {
		if !v.Avoid {
			n++
		}
	}
	if n == 0 || n == len(cands) {
		if n == 0 {
			return nil
		}
		return cands
	}
	kept := make([]*datastore.View, 0, n)
	for _, v := range cands {
		if !v.Avoid {
			kept = append(kept, v)
		}
	}
	return kept
}

func (d *Director) restrictToSubset(c *cycle, subset []string) {
	if subset == nil {
		return
	}
	if len(subset) > 8 {
		clear(c.subset)
		if c.subset == nil {
			c.subset = make(map[string]struct{}, len(subset))
		}
		for _, k := range subset {
			c.subset[k] = struct{}{}
		}
	}
	out := c.states[:0]
	for _, st := range c.states {
		var ok bool
		if len(subset) > 8 {
			_, ok = c.subset[st.Key()]
		} else {
			ok = slices.Contains(subset, st.Key())
		}
		if ok {
			out = append(out, st)
		}
	}
	c.states = out
}

func (d *Director) getCycle() *cycle {
	return d.cycles.Get(d.opts.Seed, func(c *scheduling.Cycle) *cycle { return &cycle{Cycle: c} })
}

func (d *Director) putCycle(c *cycle) {
	clear(c.byID)
	c.Request = nil // its body and prompt must not outlive the request in a cycle kept for reuse
	d.cycles.Put(c)
}

// adapterSlotWaitPriorSeconds is the wait for an adapter slot assumed where
// every slot serves a running adapter and no request there has finished yet
// (the predicted-latency scorer's default adapterWaitSeconds).
const adapterSlotWaitPriorSeconds = 1.0

// adapterSlotWaitSeconds is how long a request for adapter would wait on v
// for a slot: none where the adapter is resident or a slot is free. Where
// every slot serves a running adapter, one frees when the first of them
// drains; with their requests' ends spread over a request's duration there,
// about that duration over the running adapters. A whole duration shed
// requests that would have met the SLO: multi-lora's capacity under SLO was
// 0.39 of its rate against 0.55 (des, seeds 1-3), and a 1 s floor under it
// shed requests of 0.2 s answers with a 1 s first-token SLO.
func adapterSlotWaitSeconds(v *datastore.View, adapter string) float64 {
	switch v.AdapterPlace(adapter) {
	case datastore.AdapterQueued, datastore.AdapterFull:
		if v.Speed.RequestSamples > 0 {
			return v.Speed.RequestSeconds / float64(max(1, len(v.Metrics.RunningAdapters)))
		}
		return adapterSlotWaitPriorSeconds
	}
	return 0
}
