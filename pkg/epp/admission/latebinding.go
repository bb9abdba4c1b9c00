package admission

import (
	"fmt"
	"math"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// LateBinding holds a request in the picker while every endpoint within the
// bounds has more prefill queued than it would work off within a few
// chunks, and places it when one comes that close: decided when it can
// start rather than when it arrives, the pick reads each endpoint's queue
// as it is then, not as predicted seconds ahead. Judged at arrival, a long
// prompt went where it was predicted to start soonest, and wherever the
// prediction erred it stalled every request queued behind it; on traces of
// long prompts that set the tail of the time to first token. Held requests
// are decided again whenever a pick ends or a first token comes, and when
// the soonest endpoint's queue is predicted to have drained enough; each is
// held for at most the wait bound, then placed.
//
// A request with little to prefill somewhere (under smallPrefillChunks of
// a chunk, after what is cached there) is placed at arrival: its own
// prefill delays little behind it wherever the prediction erred, and held,
// it only waits.
//
// On by default at two chunks. Capacity under SLO (des, median of seeds
// 1-3, as a multiple of the trace's rate), off and on: mooncake-synthetic
// 1.03 and 1.09, mooncake-conversation 1.34 and 1.43, azure-code-mixed-gpu
// 1.38 and 1.35; on the later windows of bench/heldout (seeds 11-13), from
// 300 s and 600 s: 0.54 and 0.64, 0.33 and 0.35 (synthetic), 1.10 and
// 1.14, 1.40 and 1.41 (conversation), 0.90 and 0.91, 0.49 and 0.50
// (azure). A mixed H100/A10G fleet at two and four times its capacity kept
// 68.0 and 81.5 req/s of goodput against 66.4 and 73.9 (seeds 11-13, 150
// s). At the grid's own rates (seeds 1-3): mooncake-conversation's P99
// time to first token 4.30 -> 4.15 s, llm-d-precise-prefix's 0.103 ->
// 0.100 s, bursty's goodput 6.003 -> 6.018 req/s (seeds 11-13: 5.849 ->
// 5.840). Without the rule for short prefills, llm-d-precise-prefix's
// requests, which have only their 1.2k-token questions to prefill where
// their 6k-token contexts are cached, were held too: its P99 rose to 0.110
// s, and with a tenth of a chunk as the bound to 0.106 s. At one chunk,
// steps ran with less than a chunk of prefill and llm-d-precise-prefix's
// P99 reached 0.33 s.
type LateBinding struct {
	// StartWithinChunks is how close an endpoint must be to starting a
	// request for the request to be placed there at once: its queued
	// prefill done within this many chunks (latency.Model.ChunkTokens) at
	// the fastest prefill rate learned among the candidates. 0 turns late
	// binding off.
	StartWithinChunks float64 `json:"startWithinChunks"`
	// Room bounds the requests held at once; a request that finds it full
	// is placed at once.
	Room
}

// DefaultLateBinding starts a request where its queued prefill is done
// within two chunks, and holds at most 128 requests and 256 MiB of bodies
// at once, beside the overload queue's own room: held in
// the overload queue's 8 places, requests that every endpoint was
// overloaded for found it full and were shed, and mooncake-conversation's
// capacity under SLO fell to 0.88 of its rate.
var DefaultLateBinding = LateBinding{StartWithinChunks: 2, Room: Room{MaxRequests: 128, MaxBytes: 256 << 20}}

// Validate rejects negative or unbounded settings.
func (l LateBinding) Validate() error {
	if !(l.StartWithinChunks >= 0) || math.IsInf(l.StartWithinChunks, 0) {
		return fmt.Errorf("lateBinding.startWithinChunks must be finite and ≥ 0 (0 turns late binding off), got %v", l.StartWithinChunks)
	}
	if l.StartWithinChunks > 0 && (l.MaxRequests < 1 || l.MaxBytes < 1) {
		return fmt.Errorf("lateBinding.maxRequests and lateBinding.maxBytes must be positive while late binding is on, got %d and %d", l.MaxRequests, l.MaxBytes)
	}
	return nil
}

// Binding is late binding's verdict on a request.
type Binding int

const (
	// NotBound: late binding has no say (it is off, the request has
	// little to prefill, an endpoint's telemetry is stale, every endpoint
	// is over the bounds, or a held request's time is up), and the usual
	// admission (Decide) judges.
	NotBound Binding = iota
	// StartNow: an endpoint within the bounds would start the request
	// within StartSeconds; it goes to one that would (StartsSoon).
	StartNow
	// Hold: every endpoint within the bounds has more queued; the request
	// waits in the picker for one to free up.
	Hold
)

// LateBindingOn reports whether late binding judges requests.
func (p Policy) LateBindingOn() bool {
	return p.Enabled && p.LateBinding.StartWithinChunks > 0 && p.MaxWaitSeconds > 0
}

// StartSeconds is how soon an endpoint must start a request for it to be
// placed at once: StartWithinChunks chunks at the fastest prefill rate
// among cands. One fleet-wide bound, not one per endpoint: a slow GPU
// allowed more seconds of queue than a fast one drew the requests a fast
// one would have started sooner.
func (p Policy) StartSeconds(cands []*datastore.View, m latency.Model) float64 {
	rate := 0.0
	for _, v := range cands {
		rate = max(rate, v.Speed.PrefillTokensPerSecond)
	}
	if rate <= 0 {
		rate = latency.DefaultPriors.PrefillTokensPerSecond
	}
	return p.LateBinding.StartWithinChunks * float64(m.ChunkTokens) / rate
}

// StartsSoon reports whether v would start a request of promptTokens
// within start seconds: the wait bound (WaitExceeded: the predicted wait,
// an adapter slot's included, and the oldest request waiting there) held
// to start instead.
func (p Policy) StartsSoon(v *datastore.View, promptTokens int, m latency.Model, start float64) bool {
	p.MaxWaitSeconds = min(p.MaxWaitSeconds, start)
	return !v.Stale && !p.WaitExceeded(v, PredictedWait(v, promptTokens, m))
}

// Bind judges a request of promptTokens that has been held for held
// seconds (its time is not up: mayHold) or not. Which endpoints are within
// the bounds is judged as for a new request: the time it was held is the
// picker's choice, not load. But that time counts toward its wait: it is
// started only where the time held and the wait there stay within the
// wait bound, and held on only while they do somewhere; past that, or once
// its time is up, it is admission's (NotBound), which counts the time held
// as waited: placed within the bounds if an endpoint still is, otherwise
// queued or shed. Placed wherever it ranked best after its time was up,
// and started soon whatever it had waited, held requests started later
// than the bound allows: on two H100s at 2.7 times their capacity, 33 of
// 137 missed the 2 s first-token budget that admission keeps for those it
// serves (P99 2.33 s against 1.78 s without late binding). For Hold,
// retry is how long until the soonest endpoint within the bounds is
// predicted to come within StartSeconds (+Inf: none will before something
// frees up): nothing that frees an endpoint (a first token, an end) may
// happen before, while its queued prefill drains all the same.
func (p Policy) Bind(cands []*datastore.View, promptTokens int, held float64, mayHold bool, m latency.Model, prefill Prefill) (b Binding, retry float64) {
	if !p.LateBindingOn() {
		return NotBound, 0
	}
	if smallPrefill(cands, promptTokens, m, prefill) {
		return NotBound, 0
	}
	start := p.StartSeconds(cands, m)
	p.fullMargin = true // held only for an endpoint within the full margin
	within := false
	soonest, retry := math.Inf(1), math.Inf(1)
	for _, v := range cands {
		if v.Stale {
			return NotBound, 0
		}
		wait := PredictedWait(v, promptTokens, m)
		if p.Overloaded(v, wait, 0, uncachedTokens(prefill, v, promptTokens), m) {
			continue
		}
		within = true
		if mayHold && held+wait <= p.MaxWaitSeconds && p.StartsSoon(v, promptTokens, m, start) {
			return StartNow, 0
		}
		soonest = min(soonest, wait)
		if until := wait - start; until > 0 {
			// Time brings it near as its queued prefill drains. One whose
			// wait is short already (until ≤ 0) but is held back by a
			// request long in line there comes near only when something
			// frees up.
			retry = min(retry, max(until, minRetrySeconds))
		}
	}
	if within && mayHold && held+soonest < p.MaxWaitSeconds {
		return Hold, retry
	}
	return NotBound, 0
}

// minRetrySeconds is the least time between two decisions on a held request.
const minRetrySeconds = 0.005

// smallPrefillChunks is the share of a chunk under which a request's prefill
// counts as short (smallPrefill): a quarter, 2,048 tokens at the default
// chunk (latency.DefaultModel). At half a chunk, capacity under SLO was
// 1.41 of mooncake-conversation's rate instead of 1.43 and 1.34 of
// azure-code-mixed-gpu's instead of 1.35 (des, seeds 1-3).
const smallPrefillChunks = 0.25

// smallPrefill reports whether some candidate would prefill less of the
// prompt than smallPrefillChunks of a chunk: late binding places such a
// request at arrival.
func smallPrefill(cands []*datastore.View, promptTokens int, m latency.Model, prefill Prefill) bool {
	short := smallPrefillChunks * float64(m.ChunkTokens)
	for _, v := range cands {
		if float64(uncachedTokens(prefill, v, promptTokens)) < short {
			return true
		}
	}
	return false
}
