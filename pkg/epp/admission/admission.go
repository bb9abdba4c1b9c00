// Package admission decides when the picker sheds a request instead of queuing
// it, with a Retry-After derived from when the least-loaded endpoint's queue
// is predicted to drain: requests below a priority when every candidate
// endpoint is saturated, and any request when every candidate is overloaded
// (it could not start within MaxWaitSeconds, or, with its prefill added,
// tokens there would come slower than MaxInterTokenSeconds), since then
// queuing it only makes every request behind it late too. While some
// endpoint is within the bounds (wait, and time between tokens), picks go
// only to such endpoints (WithinBounds).
package admission

import (
	"fmt"
	"math"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// Limits say when an endpoint counts as saturated.
type Limits struct {
	// QueueDepth: saturated at this many waiting requests (estimate). Default 5.
	QueueDepth int `json:"queueDepth"`
	// KVCacheUtilization: saturated at this KV utilisation (0..1). Default 0.8.
	KVCacheUtilization float64 `json:"kvCacheUtilization"`
}

// DefaultLimits are the thresholds used when the configuration names none.
var DefaultLimits = Limits{QueueDepth: 5, KVCacheUtilization: 0.8}

// Validate rejects limits that would mark everything or nothing saturated by mistake.
func (l Limits) Validate() error {
	if l.QueueDepth < 1 {
		return fmt.Errorf("queueDepth must be at least 1, got %d", l.QueueDepth)
	}
	if l.KVCacheUtilization <= 0 || l.KVCacheUtilization > 1 {
		return fmt.Errorf("kvCacheUtilization must be in (0, 1], got %v", l.KVCacheUtilization)
	}
	return nil
}

// Saturated reports whether v should take no more sheddable work. A stale
// endpoint counts as saturated: nothing says it is not.
func (l Limits) Saturated(v *datastore.View) bool {
	if v.Stale {
		return true
	}
	if v.WaitingEstimate() >= l.QueueDepth {
		return true
	}
	u, ok := v.KVUtilization()
	return ok && u >= l.KVCacheUtilization
}

// Policy is the admission configuration.
type Policy struct {
	Limits
	// Enabled turns shedding on; when off every request is scheduled.
	Enabled bool `json:"enabled"`
	// ShedBelowPriority: requests with a lower priority are shed when the fleet
	// is saturated (default 0: only negative priorities are sheddable).
	ShedBelowPriority int `json:"shedBelowPriority"`
	// MaxRetryAfterSeconds caps the Retry-After (default 60).
	MaxRetryAfterSeconds int `json:"maxRetryAfterSeconds"`
	// MaxWaitSeconds and MaxInterTokenSeconds bound what any request is
	// queued for: an endpoint whose predicted wait for the request's first
	// token exceeds MaxWaitSeconds, or whose learned time between tokens
	// exceeds MaxInterTokenSeconds, is overloaded; when every candidate is,
	// the request is shed whatever its priority. 0 turns the bound off.
	MaxWaitSeconds       float64 `json:"maxWaitSeconds"`
	MaxInterTokenSeconds float64 `json:"maxInterTokenSeconds"`
	// TPOTSeconds is the per-token budget MaxInterTokenSeconds was fitted
	// to (FitSLO; 0: the bound was set as is). With it, an endpoint whose
	// streams are learned to run close to its mean time between tokens
	// (latency.Speed.StreamSpread) is held to a bound nearer the budget.
	TPOTSeconds float64 `json:"tpotSeconds,omitempty"`
	// Queue bounds the picker's own queue, where a request that finds every
	// endpoint overloaded waits for one to come within the bounds instead of
	// being shed at once.
	Queue QueueBounds `json:"queue"`
	// MissBudget is the share of requests (0..MaxMissBudget) that may be
	// placed over the bounds instead of shed when every endpoint is
	// overloaded for them: a P99 promise leaves a hundredth of the requests
	// to miss it, and a request placed over the wait bound (three quarters
	// of the first-token budget) often still meets it, where a shed one is a
	// miss for certain. Low-priority requests shed by saturation never
	// spend it.
	MissBudget float64 `json:"missBudget"`
	// LateBinding holds a request that endpoints within the bounds would
	// start only after a while until one would start it soon.
	LateBinding LateBinding `json:"lateBinding"`

	// fullMargin: the bound between tokens keeps its full margin below the
	// budget (marginTarget, not pickTarget): for late binding's holds, and
	// for the shed decision while the picker sheds steadily (WithShedShare).
	fullMargin bool
}

// DefaultMissBudget places half a percent of requests over the bounds when
// they would be shed, with eight to spend from the start. On the Mooncake
// traces (des, seeds 1-3) it raised igw's capacity under SLO from 1.09 to
// 1.24 (conversation) and 0.99 to 1.06 (synthetic) of the trace's rate,
// where admission shed requests that the SLO's last percent could have
// held; a mixed fleet at twice its capacity kept its goodput (seeds 11-13,
// 150 s: 44.8 req/s against 44.5 without): the budget is small enough not
// to feed an overload.
const DefaultMissBudget = 0.005

// MaxMissBudget is the most a configuration may set: a P99 promise's
// hundredth, all of which the budget could otherwise spend.
const MaxMissBudget = 0.01

// QueueBounds bound the requests waiting in the picker at once: their
// number and the bytes of their bodies, which the picker holds meanwhile,
// and how long each waits. A request that would breach the number or the
// bytes is shed; one that waited MaxWaitSeconds is shed too. MaxRequests 0
// turns the queue off (overloaded requests are shed at once).
type QueueBounds struct {
	Room
	// MaxWaitSeconds is at most the policy's MaxWaitSeconds: what a request
	// waited in the queue is taken from its wait for a first token, so a
	// request placed after waiting long can only go where it starts at once.
	MaxWaitSeconds float64 `json:"maxWaitSeconds"`
}

// Room bounds the requests the picker holds at once and the bytes of
// their bodies, which it keeps meanwhile.
type Room struct {
	MaxRequests int   `json:"maxRequests"`
	MaxBytes    int64 `json:"maxBytes"`
}

// DefaultQueue holds up to 8 requests and 32 MiB of bodies (FitSLO sets how
// long each may wait): enough for a burst's excess to wait for the picks
// ending within it, too few to hold back a sustained overload's arrivals.
// On a mixed H100/A10G fleet (des, seeds 1-3 and 11-13, mean goodput) a
// queue of 256 kept 30.2 req/s at four times its capacity against 34.2 with
// no queue, and 8 kept 32.9 (35.0 against 34.3 at twice); bursty traces
// shed fewer requests with either (mooncake-synthetic 2 -> 1, goodput 3.550
// -> 3.568).
var DefaultQueue = QueueBounds{Room: Room{MaxRequests: 8, MaxBytes: 32 << 20}}

// Validate rejects negative bounds and a queue bounded in requests but not bytes.
func (q QueueBounds) Validate() error {
	if q.MaxRequests < 0 || q.MaxBytes < 0 {
		return fmt.Errorf("queue.maxRequests and queue.maxBytes must not be negative, got %d and %d", q.MaxRequests, q.MaxBytes)
	}
	if !(q.MaxWaitSeconds >= 0) || math.IsInf(q.MaxWaitSeconds, 0) {
		return fmt.Errorf("queue.maxWaitSeconds must be finite and ≥ 0, got %v", q.MaxWaitSeconds)
	}
	if q.MaxRequests > 0 && q.MaxBytes == 0 {
		return fmt.Errorf("queue.maxBytes must be set when queue.maxRequests is (%d): the queue holds the request bodies", q.MaxRequests)
	}
	return nil
}

// DefaultPolicy sheds negative priorities when every endpoint is saturated,
// and any request when every endpoint is overloaded, with the bounds of
// DefaultSLO.
var DefaultPolicy = Policy{Limits: DefaultLimits, Enabled: true, MaxRetryAfterSeconds: 60, Queue: DefaultQueue, MissBudget: DefaultMissBudget,
	LateBinding: DefaultLateBinding}.FitSLO(DefaultSLO)

// SLO is what a route promises its requests: the time to their first token
// and between their tokens, in seconds.
type SLO struct {
	TTFTSeconds float64 `json:"ttftSeconds"`
	TPOTSeconds float64 `json:"tpotSeconds"`
}

// RouteSLOUser is a scheduling plugin that keeps the route's SLO: the
// configuration gives it the route's promise once its pipeline is built.
type RouteSLOUser interface {
	UseRouteSLO(SLO)
}

// DefaultSLO is the common promise of an interactive route, which the
// bounds fit when the configuration names none.
var DefaultSLO = SLO{TTFTSeconds: 2, TPOTSeconds: 0.1}

// FitSLO returns p with the overload bounds derived from slo: three quarters
// of the first-token budget for waiting, and 65% of the per-token budget
// between tokens as learned (a mean, and requests spread around it), more
// on an endpoint whose streams are learned to spread less (interTokenBound). On a
// mixed H100/A10G fleet (SLO 2 s and 100 ms) they keep most of its goodput
// at two and four times its load (des) where, unbounded, queues grow until
// nothing meets the SLO. Of the per-token budget, 60% shed requests of a
// prefix-affine fleet at the top of its load ramp whose streams ran at
// 95 ms at P99 (llm-d-precise-prefix, 2 of 6 seeds: P99 TTFT 0.2-0.3 s
// against 0.1); 70% let a LoRA fleet's streams run over the budget at P99
// (multi-lora: 102 ms) and cost it a tenth of its capacity under SLO. A
// wait bound of half the first-token budget shed more of a bursty fleet's
// bursts that would have been served in time
// (goodput 5.79 -> 5.57 req/s, median of 3 seeds; 5.80 at three quarters);
// bounds fitted to 2 s and 100 ms on routes promising 3-5 s and 150 ms
// (mooncake traces) shed 54-111 requests and cost 1-4% of goodput.
//
// A request waits in the picker's queue for an eighth of the first-token
// budget: what it waits there is taken from its wait for an endpoint, and
// under a sustained overload a queue adds no capacity, only delay. Requests
// held for the whole wait bound could be placed only where they would start
// at once, and a mixed fleet at four times its capacity kept less of its
// goodput (des, seeds 1-3 and 11-13: 29.6 against 34.2 req/s, mean).
func (p Policy) FitSLO(slo SLO) Policy {
	p.Queue.MaxWaitSeconds = 0.125 * slo.TTFTSeconds
	p.MaxWaitSeconds = waitShareOfTTFT * slo.TTFTSeconds
	p.MaxInterTokenSeconds = 0.65 * slo.TPOTSeconds
	p.TPOTSeconds = slo.TPOTSeconds
	return p
}

// waitShareOfTTFT is the share of the first-token budget FitSLO gives the
// wait bound.
const waitShareOfTTFT = 0.75

// Overloaded reports whether v cannot take a request that would prefill
// uncached prompt tokens there within the bounds: its wait, added to waited
// (what the request already waited in the picker's queue), is over
// MaxWaitSeconds (WaitExceeded), or with the request its tokens would come
// too far apart (TokensTooFarApart).
func (p Policy) Overloaded(v *datastore.View, waitSeconds, waited float64, uncached int, m latency.Model) bool {
	return p.WaitExceeded(v, waitSeconds+waited) || p.TokensTooFarApart(v, uncached, m)
}

// TokensTooFarApart reports whether, with requests of the picker's in flight
// there, v's tokens would come more than MaxInterTokenSeconds apart once a
// request with uncached prompt tokens joins (View.InterTokenWith: its
// prefill is steps every stream there waits out, and its tokens fill the KV
// cache every step reads). With nothing in flight the time between tokens
// is the past batch's, and a new stream there decodes alone. A stale
// endpoint's figures cannot say it: shedding every request of a fleet whose
// telemetry lags would be an outage.
func (p Policy) TokensTooFarApart(v *datastore.View, uncached int, m latency.Model) bool {
	if v.Stale || p.MaxInterTokenSeconds <= 0 || v.InFlight == 0 || v.Speed.DecodeSamples == 0 {
		return false
	}
	return v.InterTokenWith(m, uncached) > p.interTokenBound(v)
}

// interTokenBound is the time between tokens v may reach: MaxInterTokenSeconds
// or, for a bound fitted to a per-token budget, the time at which v's slow
// streams (latency.Speed.StreamSpread, learned once minSpreadSamples
// finished) would still run within the spread target of the budget
// (spreadTarget), if that is more. A fixed share of the budget cannot suit
// every fleet: where streams run close to the mean (long answers to short
// prompts, no adapter loads) 0.65 of it shed requests whose streams would
// have run at 0.8 (des, four A100s at 24 req/s, 200-token prompts,
// 900-token answers, SLO 1 s / 50 ms: 349 shed, P99 TTFT 0.37 s, where
// least-request served all within both SLOs at 0.21 s), while on a LoRA
// fleet, whose adapter loads stall every stream, 0.7 of it let streams run
// over it at P99 (multi-lora: 102 ms).
func (p Policy) interTokenBound(v *datastore.View) float64 {
	b := p.MaxInterTokenSeconds
	if spread, ok := streamSpread(v); p.TPOTSeconds > 0 && ok {
		b = max(b, p.spreadTarget()*p.TPOTSeconds/max(spread, 1))
	}
	return b
}

// streamSpread is v's own stream spread once minSpreadSamples streams
// finished there, else its speed class's once as many finished across the
// class (datastore.View.ClassStreamSpread); ok is false while neither is
// known. Alike GPUs serving one workload spread their streams alike, and
// an endpoint's own take many minutes to count where streams last long: on
// six L4s at 0.6 to 0.8 requests a second (4,000-token prompts, 300-token
// answers, SLO 3 s and 150 ms a token; des, seeds 1-3), where a stream ran
// at 0.6 of the budget with no other there, each endpoint's own spread came
// after the run was over, and until then the bound's 65% of the budget
// shed a quarter to a third of the requests (goodput 0.46 and 0.51 req/s,
// where the best peers served 0.52 and 0.36); with the class's, 0.52 and
// 0.57 (17 and 36 shed, in the first minute). Six L4s in bursts
// (bench/shapes/l4-bursty, seeds 21-23): 30 shed instead of 40, goodput
// 3.47 -> 3.50.
func streamSpread(v *datastore.View) (spread float64, ok bool) {
	switch {
	case v.Speed.SpreadSamples >= minSpreadSamples:
		return v.Speed.StreamSpread, true
	case v.ClassSpreadSamples >= minSpreadSamples:
		return v.ClassStreamSpread, true
	}
	return 0, false
}

// spreadTarget is the share of the per-token budget an endpoint's slow
// streams may reach: pickTarget, or marginTarget with the full margin.
func (p Policy) spreadTarget() float64 {
	if p.fullMargin {
		return marginTarget
	}
	return pickTarget
}

// WithShedShare returns p for a picker that shed share (0..1) of its latest
// requests: at steadyShedShare or more, the fleet is in a sustained
// overload, where every endpoint is kept at the bound between tokens, and
// the shed decision keeps the full margin (the endpoints' slow streams
// within marginTarget of the budget instead of pickTarget). Kept at the
// bound by a shed decision at 0.95 of the budget, a mixed H100/A10G fleet
// at twice its capacity ran its streams over the budget at P99 (105 ms
// against 100), and at 1.0 its goodput collapsed (67 -> 49 req/s). Below
// that share, a burst's requests whose streams would run within the budget
// are not shed to keep a margin no overload claims (four H100s at their
// capacity, 25 ms a token, seeds 31-40: 41 shed against 74 with the full
// margin always). A burst sheds in a cluster: from 5%, bursts on six L4s
// (seeds 31-40) counted as a sustained overload, and 30 requests were shed
// where 26 are now; from 15%, the mixed fleet at twice its capacity kept
// less of the gain below (goodput 68.8 req/s against 70.7).
func (p Policy) WithShedShare(share float64) Policy {
	p.fullMargin = share >= steadyShedShare
	return p
}

// pickTarget is the share of the per-token budget an endpoint's slow
// streams (the learned quantile) may reach for it to take a request, and
// for the shed decision to keep a request; marginTarget is the share with
// the full margin, which late binding holds a request for and the shed
// decision keeps in a sustained overload (steadyShedShare of the requests
// shed). minSpreadSamples is how many streams must have finished there
// before their spread is trusted.
//
// Picks held to the full margin left out every endpoint a hair over it
// while one was under, and requests went to the few under it, whose first
// tokens came later: on a mixed H100/A10G fleet at twice its capacity
// (des, 150 s, seeds 11-20) the A10Gs took requests that H100s just over
// the bound would have started sooner. With pickTarget 0.93: goodput 67.4
// -> 70.7 req/s, P99 TTFT 1.62 -> 1.43 s, P99 time per token 99.8 -> 97.8
// ms (100 ms budget); at four times its capacity 88.8 -> 90.1. Late
// binding holding requests for an endpoint within 0.93 instead, the same
// fleet at twice its capacity held requests for endpoints that a sustained
// overload keeps at the bound, and shed more of them (goodput 59.8).
const (
	pickTarget       = 0.93
	marginTarget     = 0.9
	steadyShedShare  = 0.1
	minSpreadSamples = 30
)

// WaitExceeded reports whether a new request would wait more than
// MaxWaitSeconds on v for its first token: the predicted wait, plus how late
// the endpoint runs against its predictions (View.Overdue: observed, so a
// server out of KV memory, which stops prefilling while the predicted
// backlog drains, is caught). A stale endpoint never does.
//
// The lateness, not the age of the oldest request waiting: a prompt of 100k
// tokens spends 5 s in its own prefill, and held to the bound by its age it
// made every endpoint look overloaded once each held one, so that a burst's
// last small requests were shed where they would have started in time
// (mooncake-conversation at its oracle's capacity, seed 11: 10 shed, where
// the oracle served those requests within 4.8 s of a 5 s budget). Judged by
// lateness (des, seeds 1-3): bursty's goodput 5.986 -> 6.003 req/s (seeds
// 11-13: 5.836 -> 5.849), mooncake-conversation's P99 TTFT 4.45 -> 4.30 s.
//
// On an endpoint serving LoRA adapters, requests also wait for an adapter
// slot, which is not load: the request's own wait for one counts (it is in
// the predicted wait, PredictedWait), but of the others only the lateness of
// those in line (View.OverdueInLine, which leaves out those passed over for
// a slot) is held to the bound. The oldest of all is held to twice the
// first-token budget, which catches requests left waiting for a slot that
// never frees. Held to the bounds by all their waits, such endpoints shed
// most requests of a fleet that was not overloaded; by none, a fleet of six
// A100s serving 15 adapters (des, multi-lora; the oracle holds the SLO up to
// 16.7 req/s) collapsed at twice that rate (33.3 req/s: goodput under 0.6
// req/s, where least-request keeps 20.2). Judged so, with the slot wait in
// the soonest start (Decide), and with each request's prefill in the bound
// between tokens, its goodput is 16.6, 23.4, 26.8 and 32.4 req/s at 16.7,
// 25, 33.3 and 66.7 req/s (600 s, seeds 1-3; least-request 8.9, 14.9, 20.2
// and 0.03). The age of the oldest request in line, held to the bound
// instead of the lateness, gave 16.6, 23.3, 26.8 and 30.7, with P99 TTFT
// 2.51 s at 66.7 req/s against 2.07 (seeds 11-13: 23.3 and 31.6 against
// 23.3 and 32.8 at 25 and 66.7 req/s). Its capacity under SLO, which counts
// a shed request as a failure, is 0.56 of its rate (the oracle's: 0.66;
// 0.75 unjudged).
func (p Policy) WaitExceeded(v *datastore.View, waitSeconds float64) bool {
	switch {
	case v.Stale || p.MaxWaitSeconds <= 0:
		return false
	case v.ServesAdapters():
		return waitSeconds+v.OverdueInLine.Seconds() > p.MaxWaitSeconds ||
			v.OldestWait.Seconds() > 2*p.firstTokenBudget()
	}
	return waitSeconds+v.Overdue.Seconds() > p.MaxWaitSeconds
}

// PredictedWait is how long a new request would wait on v for its first
// token: the prefill queued ahead and, for a LoRA adapter that must wait for
// a slot there, that wait (View.AdapterSlotWaitSeconds). It is the soonest
// start Decide takes for Retry-After, the picker queue and the miss budget:
// without the slot wait, a request that would wait for a slot was queued or
// placed by the miss budget as if it could start soon, and multi-lora's P99
// TTFT was 1.88 s against 1.74 (600 s, seeds 1-3, with a request's whole
// duration as the slot wait).
//
// On an endpoint whose KV cache could not hold the prompt, the wait for
// memory counts too (memoryWaitSeconds).
func PredictedWait(v *datastore.View, promptTokens int, m latency.Model) float64 {
	return m.DrainSeconds(v.Queue(), promptTokens) + v.AdapterSlotWaitSeconds + memoryWaitSeconds(v, promptTokens)
}

// memoryWaitSeconds is how long a prompt of promptTokens would wait on v
// for KV-cache memory: the share of the cache that must be freed before it
// fits (View.KVOverflow) times the mean request duration there, in which
// the streams holding about a cache's worth end. A server admits a prefill
// only while free blocks last, and preempts its newest request when a
// growing one finds none, so a long prompt sent to a full cache starts
// only as streams end; the queued prefill alone said it would start at
// once. Held to the wait bound and late binding's start with it, requests
// went to full caches less: mooncake-conversation (des) at 1.47 times its
// rate had 52 of 792 requests placed on a full cache, 14 of them late
// (over the 5 s first-token budget) among 29 late in all; counting the
// wait, 29 placed there, 1 late among 10 (P99 TTFT 6.36 -> 5.49 s, goodput
// 4.43 -> 4.55 req/s). 0 while no request finished there.
func memoryWaitSeconds(v *datastore.View, promptTokens int) float64 {
	if v.Speed.RequestSamples == 0 {
		return 0
	}
	return v.KVOverflow(float64(promptTokens)) * v.Speed.RequestSeconds
}

// firstTokenBudget is the first-token SLO the wait bound was fitted to (FitSLO).
func (p Policy) firstTokenBudget() float64 { return p.MaxWaitSeconds / waitShareOfTTFT }

// Prefill says how much of the request's prompt an endpoint would have to
// prefill (scheduling.Cycle's UncachedTokens).
type Prefill interface {
	UncachedTokens(v *datastore.View) int
}

// uncachedTokens is what v would prefill of a prompt of promptTokens: all of
// it when nothing says what v holds.
func uncachedTokens(prefill Prefill, v *datastore.View, promptTokens int) int {
	if prefill == nil {
		return promptTokens
	}
	return prefill.UncachedTokens(v)
}

// WithinBounds appends to out the candidates that are not overloaded for a
// request that waited waited seconds in the picker's queue, so that a
// request goes where it can keep both its first-token and its
// per-token latency while such an endpoint exists, rather than where its
// first token alone comes soonest (a slow GPU's idle queue, whose decode
// then misses the per-token bound). With no bound set it returns cands.
//
// An endpoint over the bound between tokens alone (its wait is within
// bounds) stays in when it holds more of the request's prompt than every
// endpoint within the bounds: sending the request elsewhere would prefill
// the difference there, in steps that every stream of that endpoint waits
// for, so the move slows tokens where it lands, and the next request of the
// same prefix makes the same move. On a fleet of 8 pods at a 99.8%
// prefix-cache hit rate (des, llm-d-precise-prefix), moving requests off a
// pod whose mean time between tokens had reached 66 ms (bound 60 ms) made
// others miss, their prefills pushed them past the bounds too, and the hit
// rate fell to 25% for good: 5,875 of 16,313 requests shed, where keeping
// them on the pod held P99 time per token to 72 ms.
func (p Policy) WithinBounds(cands []*datastore.View, promptTokens int, waited float64, m latency.Model, prefill Prefill, out []*datastore.View) []*datastore.View {
	if !p.Enabled || p.MaxWaitSeconds <= 0 && p.MaxInterTokenSeconds <= 0 {
		return cands
	}
	start := len(out)
	least := math.MaxInt
	for _, v := range cands {
		uncached := uncachedTokens(prefill, v, promptTokens)
		if v.Stale || !p.Overloaded(v, PredictedWait(v, promptTokens, m), waited, uncached, m) {
			out = append(out, v)
			least = min(least, uncached) // read only where prefill says what each holds
		}
	}
	if prefill == nil || len(out) == start {
		return out
	}
	for _, v := range cands {
		// Those within the bounds prefill at least least: only the
		// overloaded can pass.
		if prefill.UncachedTokens(v) < least && !v.Stale && !p.WaitExceeded(v, PredictedWait(v, promptTokens, m)+waited) {
			out = append(out, v)
		}
	}
	return out
}

// QueueWaitSeconds is how long a request may wait in the picker's queue:
// the queue's bound, within the wait bound.
func (p Policy) QueueWaitSeconds() float64 {
	if p.Queue.MaxWaitSeconds > 0 {
		return min(p.Queue.MaxWaitSeconds, p.MaxWaitSeconds)
	}
	return p.MaxWaitSeconds
}

// Decision is the outcome for one request.
type Decision struct {
	Shed bool
	// Queue: shed only because every candidate is overloaded, with time
	// left in the request's wait budget, so it may wait in the picker's queue
	// for an endpoint to come within the bounds.
	Queue bool
	// MissBudgetEligible: shed because every candidate is overloaded for
	// the request, not for its priority, and its soonest start is within
	// the first-token budget the wait bound was fitted to (FitSLO), so that,
	// placed, it may still meet the SLO: the miss budget may place it.
	MissBudgetEligible bool
	// RetryAfterSeconds is the whole seconds to wait before retrying (≥ 1) when shed.
	RetryAfterSeconds int
}

// Decide sheds a request of priority when every candidate is saturated and the
// priority is below the policy's threshold, or when every candidate is
// overloaded for it, having waited waited seconds in the picker's queue; it
// may wait there (Queue) while the soonest start is near the wait bound.
// prefill says how much of the prompt each candidate would prefill (nil:
// all of it).
func (p Policy) Decide(cands []*datastore.View, priority int, promptTokens int, waited float64, m latency.Model, prefill Prefill) Decision {
	if !p.Enabled || len(cands) == 0 {
		return Decision{}
	}
	sheddable := priority < p.ShedBelowPriority
	drain := math.Inf(1)
	queue := p.Queue.MaxRequests > 0 && waited < p.QueueWaitSeconds()
	for _, v := range cands {
		wait := math.Inf(1)
		if !v.Stale {
			wait = PredictedWait(v, promptTokens, m)
		}
		saturated := sheddable && p.Saturated(v)
		if !saturated && !p.Overloaded(v, wait, waited, uncachedTokens(prefill, v, promptTokens), m) {
			return Decision{}
		}
		queue = queue && !saturated
		drain = math.Min(drain, wait)
	}
	// Only a fleet near its bounds is waited for: the soonest start over the
	// bound by less than the time the request may still wait in the queue.
	// Where every start is far over it (a sustained overload), a request
	// held would take a freed slot from a newer one with more of its wait
	// left, and is shed at once (des, llm-d-precise-prefix: goodput 5.38 ->
	// 5.27 with every such request held).
	queue = queue && drain+waited <= p.MaxWaitSeconds+p.QueueWaitSeconds()
	maxWait := p.MaxRetryAfterSeconds
	if maxWait <= 0 {
		maxWait = DefaultPolicy.MaxRetryAfterSeconds
	}
	secs := maxWait
	if !math.IsInf(drain, 1) {
		secs = int(math.Ceil(drain))
	}
	eligible := !sheddable && drain+waited <= p.firstTokenBudget()
	return Decision{Shed: true, Queue: queue, MissBudgetEligible: eligible, RetryAfterSeconds: min(max(secs, 1), maxWait)}
}
