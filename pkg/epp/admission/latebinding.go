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
// It is off by default: what it gains in capacity it costs elsewhere.
// Capacity under SLO (des, median of seeds 1-3, then 11-13, as a multiple
// of the trace's rate), off and at two chunks: mooncake-synthetic 1.02 and
// 1.02, then 1.06 and 1.07; mooncake-conversation 1.30 and 1.38, then 1.30
// and 1.37; azure-code-mixed-gpu 1.45 and 1.63, then 1.40 and 1.65 (at one
// chunk 1.09, 1.37 and 1.56, then 1.09, 1.38 and 1.70; at four, less than
// at two). At the grid's own rates (seeds 1-3) two chunks took
// mooncake-synthetic's P99 time to first token from 2.92 to 2.62 s but
// mooncake-conversation's from 4.23 to 4.49 s; llm-d-precise-prefix, whose
// pods hold long shared prefixes, went from 0.100 to 0.131 s (its time per
// token from 58 to 75 ms), since a held request goes where it starts soon,
// not where its prefix is; bursty's goodput fell from 5.99 to 5.95 req/s.
// At one chunk, steps ran with less than a chunk of prefill and
// llm-d-precise-prefix's P99 reached 0.33 s.
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

// DefaultLateBinding is off; switched on, it holds at most 128 requests and
// 256 MiB of bodies at once, beside the overload queue's own room: held in
// the overload queue's 8 places, requests that every endpoint was
// overloaded for found it full and were shed, and mooncake-conversation's
// capacity under SLO fell to 0.88 of its rate.
var DefaultLateBinding = LateBinding{Room: Room{MaxRequests: 128, MaxBytes: 256 << 20}}

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
	// NotBound: late binding has no say (it is off, an endpoint's
	// telemetry is stale, or every endpoint is over the bounds, which the
	// usual admission (Decide) judges).
	NotBound Binding = iota
	// StartNow: an endpoint within the bounds would start the request
	// within StartSeconds; it goes to one that would (StartsSoon).
	StartNow
	// Hold: every endpoint within the bounds has more queued; the request
	// waits in the picker for one to free up.
	Hold
	// PlaceLate: it was held for the wait bound: it goes to an endpoint
	// within the bounds.
	PlaceLate
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
	return !v.Stale && !p.WaitExceeded(v, predictedWait(v, promptTokens, m))
}

// Bind judges a request of promptTokens that has been held (its time is
// not up: mayHold) or not. Endpoints are judged against the bounds as if
// the request were new: the time it was held is the picker's choice, not
// load. For Hold, retry is how long until the soonest endpoint within the
// bounds is predicted to come within StartSeconds (+Inf: none will before
// something frees up): nothing that frees an endpoint (a first token, an
// end) may happen before, while its queued prefill drains all the same.
func (p Policy) Bind(cands []*datastore.View, promptTokens int, mayHold bool, m latency.Model, prefill Prefill) (b Binding, retry float64) {
	if !p.LateBindingOn() {
		return NotBound, 0
	}
	start := p.StartSeconds(cands, m)
	within := false
	retry = math.Inf(1)
	for _, v := range cands {
		if v.Stale {
			return NotBound, 0
		}
		wait := predictedWait(v, promptTokens, m)
		if p.Overloaded(v, wait, 0, uncachedTokens(prefill, v, promptTokens), m) {
			continue
		}
		within = true
		if mayHold && p.StartsSoon(v, promptTokens, m, start) {
			return StartNow, 0
		}
		if until := wait - start; until > 0 {
			// Time brings it near as its queued prefill drains. One whose
			// wait is short already (until ≤ 0) but is held back by a
			// request long in line there comes near only when something
			// frees up.
			retry = min(retry, max(until, minRetrySeconds))
		}
	}
	switch {
	case !within:
		return NotBound, 0
	case mayHold:
		return Hold, retry
	}
	return PlaceLate, 0
}

// minRetrySeconds is the least time between two decisions on a held request.
const minRetrySeconds = 0.005
