package gateway

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// pick is one routed request as its picker accounts it.
type pick struct {
	// Endpoint is where the request goes ("ip:port"); Fallbacks the next
	// choices when Endpoint cannot be reached.
	Endpoint  string
	Fallbacks []string
	// Breakdown is the explanation for x-igw-score-breakdown ("" unless asked).
	Breakdown string

	res    *director.Result // igw
	ticket policies.Ticket  // baseline policies
	gen    int              // the baseline router generation the ticket belongs to
}

// picker chooses endpoints for one pool and learns from what happens to the
// requests it routed. Every method reads the gateway's clock itself.
type picker interface {
	// Resolve splits a request's model into base model and LoRA adapter;
	// base is the base model the body-based router named ("" for none).
	Resolve(model, base string) (string, string)
	Pick(ctx context.Context, req *scheduling.Request, explain bool) (*pick, *apierror.Error)
	// Reroute tells the picker that p now goes to endpoint, a fallback, because
	// its first choice could not be reached: the failed pick ends and the
	// request counts against endpoint.
	Reroute(p *pick, endpoint string)
	FirstToken(p *pick)
	Tokens(p *pick, n int)
	Done(p *pick, outputTokens int)
	// UpdateMetrics takes a telemetry sample (the scraper's sink).
	UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool
}

// eppPicker is igw's endpoint picker in process: the same director the
// ext_proc server drives.
type eppPicker struct {
	d     *director.Director
	clock clock
}

func (e *eppPicker) Resolve(model, base string) (string, string) {
	return e.d.ResolveModel(model, base)
}

func (e *eppPicker) Pick(ctx context.Context, req *scheduling.Request, explain bool) (*pick, *apierror.Error) {
	res, err := e.d.Schedule(ctx, req, explain, e.clock.Now())
	if err != nil {
		return nil, err
	}
	p := &pick{Endpoint: res.Primary, Fallbacks: res.Fallbacks, res: res}
	if res.Breakdown != nil {
		p.Breakdown = res.Breakdown.String()
	}
	return p, nil
}

func (e *eppPicker) Reroute(p *pick, endpoint string) {
	now := e.clock.Now()
	e.d.ObserveCompletion(p.res, 0, now)
	old := p.res
	if p.Breakdown != "" {
		p.Breakdown += ";rerouted=" + endpoint
	}
	st := e.d.Store().Get(endpoint)
	if st == nil { // removed meanwhile: proxy without accounting
		p.res = nil
		return
	}
	// The fallback's cache is unknown: count the whole prompt as uncached.
	r := &datastore.Request{PromptTokens: old.Request.PromptTokens, UncachedTokens: old.Request.PromptTokens,
		ChunkTokens: old.Request.ChunkTokens, Adapter: old.Request.Adapter}
	st.Picked(r, now)
	p.res = &director.Result{Primary: endpoint, Reason: old.Reason, Endpoint: st, Request: r}
}

func (e *eppPicker) FirstToken(p *pick) {
	if p.res != nil {
		e.d.ObserveFirstToken(p.res, e.clock.Now())
	}
}

func (e *eppPicker) Tokens(p *pick, n int) {
	if p.res != nil {
		e.d.ObserveTokens(p.res, n, e.clock.Now())
	}
}

func (e *eppPicker) Done(p *pick, outputTokens int) {
	if p.res != nil {
		e.d.ObserveCompletion(p.res, outputTokens, e.clock.Now())
	}
}

func (e *eppPicker) UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool {
	return e.d.UpdateMetrics(key, m, now)
}

// Endpoint labels a baseline policy reads: the fleet group and the KV-cache
// size in tokens (the SGLang and Dynamo routers size their prefix trees by it).
const (
	LabelGroup         = "group"
	LabelKVCacheTokens = "kv-cache-tokens"
	// defaultKVCacheTokens stands in for an unlabelled endpoint's KV size.
	defaultKVCacheTokens = 100_000
)

// policyPicker runs one of the benchmark's baseline policies (round-robin,
// least-request, the peers' routers, ...) so that a live benchmark compares
// policies through the same gateway. Those routers expect calls in time order
// from one goroutine: a mutex serialises them, and the time is read under it.
type policyPicker struct {
	name   string
	seed   uint64
	store  *datastore.Store
	scrape time.Duration
	clock  clock
	wants  policies.Feedback

	mu     sync.Mutex
	router policies.Router
	gen    int
	keys   []string
	podOf  map[string]int
	buf    []*datastore.EndpointState
}

func newPolicyPicker(name string, seed uint64, store *datastore.Store, scrape time.Duration, c clock) (*policyPicker, error) {
	p := &policyPicker{name: name, seed: seed, store: store, scrape: scrape, clock: c}
	probe, err := policies.New(name, policies.Fleet{Pods: []policies.Pod{{Key: "127.0.0.1:1"}}}, seed)
	if err != nil {
		return nil, err // an unknown name, or one that cannot run live (the oracle)
	}
	p.wants = probe.Wants()
	return p, nil
}

// syncLocked rebuilds the router when the pool's endpoints changed: the
// baselines are built for a fixed fleet.
func (p *policyPicker) syncLocked() *apierror.Error {
	p.buf = p.store.Endpoints(p.buf[:0])
	same := len(p.buf) == len(p.keys)
	for i := 0; same && i < len(p.buf); i++ {
		same = p.buf[i].Key() == p.keys[i]
	}
	if same && p.router != nil {
		return nil
	}
	if len(p.buf) == 0 {
		p.router, p.keys = nil, nil
		return apierror.Unavailable("no model server endpoints are known for this pool")
	}
	fleet := policies.Fleet{ScrapeInterval: p.scrape}
	p.keys, p.podOf = p.keys[:0], map[string]int{}
	for i, st := range p.buf {
		ep := st.Endpoint()
		kv, err := strconv.Atoi(ep.Labels[LabelKVCacheTokens])
		if err != nil || kv <= 0 {
			kv = defaultKVCacheTokens
		}
		fleet.Pods = append(fleet.Pods, policies.Pod{Key: st.Key(), Group: ep.Labels[LabelGroup], KVTokens: kv})
		p.keys = append(p.keys, st.Key())
		p.podOf[st.Key()] = i
	}
	r, err := policies.New(p.name, fleet, p.seed)
	if err != nil {
		return apierror.Internal("policy %s: %v", p.name, err)
	}
	p.router = r
	p.gen++
	return nil
}

// Resolve follows the body-based router: a named base model makes the model an adapter.
func (p *policyPicker) Resolve(model, base string) (string, string) {
	if base != "" && base != model {
		return base, model
	}
	return model, ""
}

func (p *policyPicker) Pick(ctx context.Context, req *scheduling.Request, explain bool) (*pick, *apierror.Error) {
	if err := ctx.Err(); err != nil {
		return nil, apierror.Unavailable("request canceled before scheduling: %v", err)
	}
	// The prompt shares the request parser's memory, and routers may keep it.
	prompt := strings.Clone(req.Prompt)
	preq := &policies.Request{Model: req.Model, Adapter: req.Adapter, Prompt: prompt, Tokens: tokenizer.Tokenize(prompt)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.syncLocked(); err != nil {
		return nil, err
	}
	pod, t, err := p.router.Route(preq, p.clock.Now())
	if err != nil {
		var apiErr *apierror.Error
		if errors.As(err, &apiErr) {
			return nil, apiErr
		}
		return nil, apierror.Unavailable("policy %s: %v", p.name, err)
	}
	out := &pick{Endpoint: p.keys[pod], ticket: t, gen: p.gen}
	if explain {
		out.Breakdown = "endpoint=" + out.Endpoint + ";reason=policy;policy=" + p.name
	}
	return out, nil
}

// Reroute is never called: baseline picks have no fallbacks.
func (p *policyPicker) Reroute(*pick, string) {}

func (p *policyPicker) observe(pk *pick, f func(r policies.Router, now time.Time)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pk.gen == p.gen && p.router != nil {
		f(p.router, p.clock.Now())
	}
}

func (p *policyPicker) FirstToken(pk *pick) {
	p.observe(pk, func(r policies.Router, now time.Time) { r.FirstToken(pk.ticket, now) })
}

func (p *policyPicker) Tokens(pk *pick, n int) {
	p.observe(pk, func(r policies.Router, now time.Time) { r.Tokens(pk.ticket, n, now) })
}

func (p *policyPicker) Done(pk *pick, outputTokens int) {
	p.observe(pk, func(r policies.Router, now time.Time) { r.Done(pk.ticket, outputTokens, now) })
}

func (p *policyPicker) UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.podOf[key]
	if !ok || p.router == nil {
		return false
	}
	p.router.Observe(pod, &m, now)
	return true
}
