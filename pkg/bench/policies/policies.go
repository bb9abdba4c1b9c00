// Package policies are the routing policies the benchmark compares, behind
// one transport-neutral Router interface: a backend asks Route for a pod and
// reports what became of the request through the pick lifecycle every igw
// picker shares (director.Lifecycle: first token, later tokens, completion or
// failure), plus telemetry samples of the pods, each at the time it happens.
//
// Which code each policy runs:
//
//   - igw and legacy-blend are the real endpoint picker (pkg/epp director,
//     pipeline, datastore, prefix index, speed learning) with config.Default
//     and with the legacy blend's weights (queue 2, kv-cache 2, prefix 3);
//   - llm-d-precise and igw-precise are the same picker with the
//     precise-prefix-cache scorer reading the KV events the backend delivers
//     (LLMDPreciseConfig, IGWPreciseConfig);
//   - round-robin, random, least-request, sglang-cache-aware, dynamo-cost and
//     dynamo-precise are implemented here from the peers' published behaviour (each one's
//     doc names the rule and the defaults it follows), not as EPP plugins:
//     they are baselines, not product features;
//   - oracle routes on the simulator's exact cost model (a Predictor);
//   - the global policies (global.go) pick a member cluster of a
//     multi-cluster scenario: global-blend and igw-global are pkg/global's
//     picker with BlendConfig and DefaultConfig, global-round-robin and
//     nearest-region the same picker with a baseline picker or one scorer;
//     the des backend runs them, and global-oracle there.
package policies

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
)

// Policy names, as the benchmark contract spells them.
const (
	RoundRobin       = "round-robin"
	Random           = "random"
	LeastRequest     = "least-request"
	LegacyBlend      = "legacy-blend"
	SGLangCacheAware = "sglang-cache-aware"
	DynamoCost       = "dynamo-cost"
	IGW              = "igw"
	Oracle           = "oracle"
)

// Names lists every policy in report order: load-blind baselines, peers, igw,
// and the limit.
var Names = []string{RoundRobin, Random, LeastRequest, LegacyBlend, SGLangCacheAware, DynamoCost, LLMDPrecise, DynamoPrecise, IGW, IGWPrecise, Oracle}

// Ours reports whether the policy is igw's (in any configuration): not a peer.
func Ours(name string) bool { return name == IGW || name == IGWPrecise || name == IGWGlobal }

// IsOracle reports whether the policy is an oracle (the limit, no peer):
// oracle, or global-oracle among member clusters.
func IsOracle(name string) bool { return name == Oracle || name == GlobalOracle }

// Request is what a router sees of one request.
type Request struct {
	ID      uint64
	Model   string
	Adapter string
	// Prompt is the text the server prefills; Tokens its token IDs.
	Prompt string
	Tokens []uint32
	// OutputTokens is the exact output length; only the oracle's cost model
	// reads it (real routers cannot know it).
	OutputTokens int
}

// Ticket is a router's handle on one routed request.
type Ticket any

// Feedback says which observations a router uses, so that a backend can skip
// producing the others (telemetry scrapes and per-token events cost time).
type Feedback struct {
	Telemetry bool
	Tokens    bool
	// KVEvents: the servers' KV cache events (the Router is a KVEventReceiver).
	KVEvents bool
}

// Router routes requests to pods 0..n-1 of a fleet. Calls come in time order
// from one goroutine.
type Router interface {
	// Route picks the pod for req at now; an error fails the request. The
	// ticket is the pick's handle for the lifecycle's reports.
	Route(req *Request, now time.Time) (pod int, t Ticket, err error)
	// Every routed request's first token, later tokens and end are reported
	// as they happen.
	director.Lifecycle[Ticket]
	// Observe hands over a telemetry sample of pod taken at now.
	Observe(pod int, m *datastore.Metrics, now time.Time)
	Wants() Feedback
}

// Retrier is a Router that retries a request which failed before the first
// byte of a response (refused, reset, or an error status) on another pod.
type Retrier interface {
	// Retry ends t with f and returns the retry's pod and ticket; false when
	// there is no other pod to try (t is ended all the same).
	Retry(t Ticket, f director.Failure, now time.Time) (pod int, next Ticket, ok bool)
}

// Queuing is a Router whose picker can hold a request in its own queue
// while every pod is over its load bounds. HoldRequests turns that on: Route
// then answers such a request with a *Held error, and the backend routes the
// same request again when a pod frees up (a first token, an end) and at the
// held deadline, in the order they were held.
type Queuing interface {
	HoldRequests()
}

// Held is Route's answer for a request the picker holds in its queue.
type Held struct {
	// Deadline is when, still held, it is to be routed again to be shed.
	Deadline time.Time
}

func (h *Held) Error() string {
	return "held in the picker's queue until " + h.Deadline.Format(time.RFC3339Nano)
}

// Pod describes one pod to a router.
type Pod struct {
	// Key is the pod's "ip:port".
	Key string
	// Group is the fleet group (e.g. "h100"); KVTokens the KV-cache size;
	// GPU the accelerator, which the EPP's endpoints carry as
	// wire.LabelGPUProduct ("" for none).
	Group    string
	KVTokens int
	GPU      string
}

// Predictor is the exact cost model: the time from now to req's first token
// if it were sent to pod now and nothing arrived after it.
type Predictor func(pod int, req *Request, now time.Time) (time.Duration, error)

// Fleet is what a router is built for.
type Fleet struct {
	Pods []Pod
	// ScrapeInterval is how often Observe is called per pod.
	ScrapeInterval time.Duration
	// Predict is needed by the oracle only.
	Predict Predictor
	// IGWConfig is the igw policy's EPP configuration (YAML); "" runs the
	// built-in one (config.Default), what igw ships.
	IGWConfig string
	// KVEventDelay is how long the servers' KV events take to reach a
	// precise router's index.
	KVEventDelay time.Duration
	// SLO is the route's promise (zero: none), which igw's admission follows
	// unless its configuration names one.
	SLO admission.SLO
}

// New builds the named policy for fleet, with seed for its random choices.
func New(name string, fleet Fleet, seed uint64) (Router, error) {
	if len(fleet.Pods) == 0 {
		return nil, fmt.Errorf("policy %s: the fleet has no pods", name)
	}
	rng := rand.New(rand.NewPCG(seed, 0x9011c1))
	switch name {
	case RoundRobin:
		return &roundRobin{n: len(fleet.Pods)}, nil
	case Random:
		return &random{n: len(fleet.Pods), rng: rng}, nil
	case LeastRequest:
		return &leastRequest{inFlight: make([]float64, len(fleet.Pods)), rng: rng}, nil
	case SGLangCacheAware:
		return newSGLang(fleet, rng), nil
	case DynamoCost:
		return newDynamo(fleet, rng), nil
	case DynamoPrecise:
		return newDynamoPrecise(fleet, rng), nil
	case LLMDPrecise:
		return newEPP(fleet, LLMDPreciseConfig, seed)
	case IGWPrecise:
		return newRouteEPP(fleet, IGWPreciseConfig, seed)
	case LegacyBlend:
		return newEPP(fleet, LegacyBlendConfig, seed)
	case IGW:
		return newRouteEPP(fleet, fleet.IGWConfig, seed)
	case Oracle:
		if fleet.Predict == nil {
			return nil, fmt.Errorf("policy oracle needs the exact cost model, which only the des backend has")
		}
		return &oracle{predict: fleet.Predict, n: len(fleet.Pods), rng: rng, costs: make([]float64, len(fleet.Pods))}, nil
	}
	if IsGlobal(name) {
		return nil, fmt.Errorf("policy %s picks among member clusters: only the des backend runs it, on a scenario with clusters", name)
	}
	return nil, fmt.Errorf("unknown policy %q (known: %v)", name, Names)
}

// Known reports whether name is a policy.
func Known(name string) bool { return slices.Contains(Names, name) || IsGlobal(name) }

// argmin returns the index of the smallest value, uniformly at random among ties.
func argmin(values []float64, rng *rand.Rand) int {
	best, ties := -1, 0
	for i, v := range values {
		switch {
		case best < 0 || v < values[best]:
			best, ties = i, 1
		case v == values[best]:
			ties++
			if rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// podTicket is the ticket of routers that only need the pod back.
type podTicket struct{ pod int }

// feedbackFree implements the observation methods of routers that use none.
type feedbackFree struct{}

func (feedbackFree) ObserveFirstToken(Ticket, time.Time)                {}
func (feedbackFree) ObserveTokens(Ticket, int, time.Time)               {}
func (feedbackFree) ObserveCompletion(Ticket, int, time.Time)           {}
func (feedbackFree) ObserveFailure(Ticket, director.Failure, time.Time) {}
func (feedbackFree) Observe(int, *datastore.Metrics, time.Time)         {}
func (feedbackFree) Wants() Feedback                                    { return Feedback{} }

// roundRobin cycles through the pods, blind to everything.
type roundRobin struct {
	feedbackFree
	n, next int
}

func (r *roundRobin) Route(*Request, time.Time) (int, Ticket, error) {
	p := r.next
	r.next = (r.next + 1) % r.n
	return p, nil, nil
}

// random picks a pod uniformly.
type random struct {
	feedbackFree
	n   int
	rng *rand.Rand
}

func (r *random) Route(*Request, time.Time) (int, Ticket, error) { return r.rng.IntN(r.n), nil, nil }

// leastRequest sends each request to the pod with the fewest requests in
// flight as the router counts them (a least-connections balancer).
type leastRequest struct {
	feedbackFree
	inFlight []float64
	rng      *rand.Rand
}

func (l *leastRequest) Route(*Request, time.Time) (int, Ticket, error) {
	p := argmin(l.inFlight, l.rng)
	l.inFlight[p]++
	return p, podTicket{p}, nil
}

func (l *leastRequest) ObserveCompletion(t Ticket, _ int, _ time.Time) {
	l.inFlight[t.(podTicket).pod]--
}

func (l *leastRequest) ObserveFailure(t Ticket, _ director.Failure, now time.Time) {
	l.ObserveCompletion(t, 0, now)
}

// oracle sends each request to the pod the exact cost model says answers
// first, seeing the pods' exact state at that moment.
type oracle struct {
	feedbackFree
	predict Predictor
	n       int
	rng     *rand.Rand
	costs   []float64
}

func (o *oracle) Route(req *Request, now time.Time) (int, Ticket, error) {
	for p := range o.n {
		d, err := o.predict(p, req, now)
		if err != nil {
			return -1, nil, err
		}
		o.costs[p] = float64(d)
	}
	return argmin(o.costs, o.rng), nil, nil
}
