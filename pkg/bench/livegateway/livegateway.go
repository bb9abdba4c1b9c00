// Package livegateway is the gateway the live benchmark runs: the product's
// standalone gateway (pkg/gateway) with the benchmark's baseline policies
// (pkg/bench/policies) registered beside igw, so that every policy is
// compared through the same proxy, body-based router and response metering.
// cmd/igw-bench-gateway is its command; the shipped cmd/igw-gateway serves
// igw alone.
package livegateway

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
	"github.com/igw-dev/igw/pkg/gateway"
	"github.com/igw-dev/igw/pkg/tokenizer"
	"github.com/igw-dev/igw/pkg/wire"
)

// Endpoint labels a baseline reads: the fleet group and the KV-cache size in
// tokens (the SGLang and Dynamo routers size their prefix trees by it).
const (
	LabelGroup         = "group"
	LabelKVCacheTokens = "kv-cache-tokens"
	// defaultKVCacheTokens stands in for an unlabelled endpoint's KV size.
	defaultKVCacheTokens = 100_000
)

// Registry returns the gateway's policies with every baseline that runs live
// registered: all of the benchmark's policies but igw (the gateway's own)
// and the oracle (it needs the simulator's exact state).
func Registry() (*gateway.Registry, error) {
	reg := gateway.NewRegistry()
	for _, name := range policies.Names {
		if name == policies.IGW || name == policies.Oracle {
			continue
		}
		probe, err := policies.New(name, policies.Fleet{Pods: []policies.Pod{{Key: "127.0.0.1:1"}}}, 0)
		if err != nil {
			return nil, err
		}
		err = reg.Register(name, gateway.Policy{Telemetry: probe.Wants().Telemetry,
			New: func(env gateway.PolicyEnv) (gateway.Picker, error) {
				return &picker{name: name, seed: env.Seed, store: env.Store, scrape: env.ScrapeInterval}, nil
			}})
		if err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// picker runs one baseline router as a gateway picker. The routers expect
// calls one at a time over a fixed fleet numbered 0..n-1: a mutex serialises
// them, and the router is rebuilt (a new generation) whenever the pool's
// endpoints change; reports for picks of an older generation are dropped.
// Each call's time is the gateway's when the request's goroutine made it, so
// calls that waited for the lock may come a little out of time order: of the
// baselines only legacy-blend reads the time, and its director takes any.
type picker struct {
	name   string
	seed   uint64
	store  *datastore.Store
	scrape time.Duration

	mu     sync.Mutex
	router policies.Router
	gen    int
	keys   []string
	podOf  map[string]int
	buf    []*datastore.EndpointState
}

// ticket is a baseline pick's handle: the router's ticket and the router
// generation it belongs to.
type ticket struct {
	t   policies.Ticket
	gen int
}

// syncLocked rebuilds the router when the pool's endpoints changed: the
// baselines are built for a fixed fleet.
func (p *picker) syncLocked() *apierror.Error {
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
		fleet.Pods = append(fleet.Pods, policies.Pod{Key: st.Key(), Group: ep.Labels[LabelGroup], KVTokens: kv,
			GPU: ep.Labels[wire.LabelGPUProduct]})
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
func (p *picker) Resolve(model, base string) (string, string) {
	if base != "" && base != model {
		return base, model
	}
	return model, ""
}

func (p *picker) Pick(ctx context.Context, req *scheduling.Request, explain bool, now time.Time) (*gateway.Pick, *apierror.Error) {
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
	pod, t, err := p.router.Route(preq, now)
	if err != nil {
		var apiErr *apierror.Error
		if errors.As(err, &apiErr) {
			return nil, apiErr
		}
		return nil, apierror.Unavailable("policy %s: %v", p.name, err)
	}
	out := &gateway.Pick{Endpoint: p.keys[pod], Ticket: ticket{t: t, gen: p.gen}}
	if explain {
		out.Breakdown = "endpoint=" + out.Endpoint + ";reason=policy;policy=" + p.name
	}
	return out, nil
}

// Reroute is never called: baseline picks have no fallbacks.
func (p *picker) Reroute(*gateway.Pick, director.Failure, string, time.Time) {}

// report hands pk's ticket to the router, unless the router was rebuilt since the pick.
func (p *picker) report(pk *gateway.Pick, f func(r policies.Router, t policies.Ticket)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := pk.Ticket.(ticket); t.gen == p.gen && p.router != nil {
		f(p.router, t.t)
	}
}

func (p *picker) ObserveFirstToken(pk *gateway.Pick, now time.Time) {
	p.report(pk, func(r policies.Router, t policies.Ticket) { r.ObserveFirstToken(t, now) })
}

func (p *picker) ObserveTokens(pk *gateway.Pick, n int, now time.Time) {
	p.report(pk, func(r policies.Router, t policies.Ticket) { r.ObserveTokens(t, n, now) })
}

func (p *picker) ObserveCompletion(pk *gateway.Pick, outputTokens int, now time.Time) {
	p.report(pk, func(r policies.Router, t policies.Ticket) { r.ObserveCompletion(t, outputTokens, now) })
}

func (p *picker) ObserveFailure(pk *gateway.Pick, f director.Failure, now time.Time) {
	p.report(pk, func(r policies.Router, t policies.Ticket) { r.ObserveFailure(t, f, now) })
}

func (p *picker) UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.podOf[key]
	if !ok || p.router == nil {
		return false
	}
	p.router.Observe(pod, &m, now)
	return true
}
