package datastore

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/latency"
)

// meanPromptAlpha is one request's weight in the mean prompt sent to an endpoint.
const meanPromptAlpha = 0.1

// Request is one request's life on an endpoint, from pick to completion. The
// picker creates it on Pick; the response path (or a benchmark) reports its
// first token, later tokens and completion through the endpoint's methods.
type Request struct {
	PickedAt time.Time
	// PromptTokens is the estimated prompt length; UncachedTokens the part the
	// picker expected the endpoint not to hold in its prefix cache.
	PromptTokens   int
	UncachedTokens int
	// WorkAhead is the prefill backlog (tokens) estimated ahead of this request at pick.
	WorkAhead float64
	// ChunkTokens is the chunked-prefill budget assumed at pick.
	ChunkTokens int
	// Adapter is the LoRA adapter the request names ("" for the base model).
	Adapter string

	firstTokenAt time.Time
	lastTokenAt  time.Time
	tokens       int
	done         bool
	// loadsAdapter: the adapter was neither running there nor sent there since
	// the sample, so the server probably loads it for this request.
	loadsAdapter bool
	// predictedTTFT is its time to first token as the learned speed predicted
	// it at the pick: how long it may wait before the endpoint looks hung.
	predictedTTFT time.Duration
	// skipped: a request picked after this one got its first token first, so
	// the server passed this one over (waiting for an adapter slot or memory).
	skipped bool
}

// FirstTokenAt is zero until the first token was observed.
func (r *Request) FirstTokenAt() time.Time { return r.firstTokenAt }

// LastTokenAt is when the latest output token was observed (zero before the first).
func (r *Request) LastTokenAt() time.Time { return r.lastTokenAt }

// Tokens is the number of output tokens observed so far.
func (r *Request) Tokens() int { return r.tokens }

// EndpointState is one endpoint's mutable state. All methods are safe for
// concurrent use.
type EndpointState struct {
	id       int32
	key      string
	endpoint Endpoint

	mu         sync.Mutex
	metrics    Metrics
	hasMetrics bool
	legacyKV   bool
	// models is replaced, never mutated, so views can share it.
	models *ServedModels

	inFlight             int
	pendingFirstToken    int
	pendingPrefillTokens int64
	backlog              float64
	backlogAt            time.Time
	// queue holds the requests awaiting their first token in pick order;
	// skippedTokens is the uncached prompt of those the server passed over.
	queue            []*Request
	skippedTokens    int64
	picksSince       int
	lastPickAt       time.Time
	firstTokensSince int
	finishedSince    int
	meanPrompt       float64
	// adaptersSince lists adapters sent here since the last sample: the server
	// is loading them even though its telemetry does not show it yet.
	adaptersSince []string

	// pickRate is the picks per second sent here, decaying over
	// PickRateWindow, as of lastPickAt.
	pickRate float64
	// placed is the uncached prompt tokens sent here, decaying over
	// PlacedWindow, as of lastPickAt.
	placed float64
	// class pools the measured speeds of the endpoints on the same
	// accelerator (nil: no accelerator label); an idle endpoint's figures
	// relax toward it.
	class *speedClass

	// learner is the timing model's learning of the endpoint's speed, fed
	// by the accounting below as each observation happens.
	learner latency.Learner
	// health decides whether the endpoint gets new picks (health.go).
	health health
}

func newEndpointState(id int32, ep Endpoint, priors latency.Priors) *EndpointState {
	return &EndpointState{id: id, key: ep.Key(), endpoint: ep, learner: latency.NewLearner(priors)}
}

// ID is a small dense integer, stable while the endpoint exists, reused after.
func (s *EndpointState) ID() int32 { return s.id }

// Key is "ip:port".
func (s *EndpointState) Key() string { return s.key }

// Endpoint returns the address and labels.
func (s *EndpointState) Endpoint() Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoint
}

// UpdateMetrics stores a telemetry sample taken at m.SampledAt (now when zero).
// The corrections counted since the previous sample start again from zero: the
// new sample already reflects them.
func (s *EndpointState) UpdateMetrics(m Metrics, now time.Time) {
	if m.SampledAt.IsZero() {
		m.SampledAt = now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics = m
	s.hasMetrics = true
	s.picksSince, s.firstTokensSince, s.finishedSince = 0, 0, 0
	s.adaptersSince = nil
}

// SetServedModels stores the endpoint's model list. Only a successful read
// calls it: after a failed one the previous list stays, with its time.
func (s *EndpointState) SetServedModels(m *ServedModels) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = m
}

// ServedModels returns the last stored model list, or nil if none was read.
func (s *EndpointState) ServedModels() *ServedModels {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.models
}

// MarkLegacyKV records that the endpoint reports only the legacy KV metric
// name and reports whether this is the first time.
func (s *EndpointState) MarkLegacyKV() (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = !s.legacyKV
	s.legacyKV = true
	return first
}

// drainLocked advances the prefill backlog to now at the learned rate. It
// never drains the prompts of passed-over requests: the server is not working
// on them, and will owe them until they are served.
func (s *EndpointState) drainLocked(now time.Time) {
	if !s.backlogAt.IsZero() && now.After(s.backlogAt) {
		s.backlog -= now.Sub(s.backlogAt).Seconds() * s.learner.PrefillRate()
	}
	s.backlog = math.Max(float64(s.skippedTokens), math.Min(s.backlog, float64(s.pendingPrefillTokens)))
	if now.After(s.backlogAt) {
		s.backlogAt = now
	}
}

// View copies the state for a scheduling decision at now. Fields are set in
// place: a View is some 450 bytes, and a composite literal built it aside
// and copied it, for every endpoint at every pick.
func (s *EndpointState) View(now time.Time, staleness time.Duration, v *View) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked(now)
	prior, classSpread, classSpreadSamples := s.class.priorFor(s.id)
	s.learner.Relax(now, s.pendingFirstToken == 0, prior)
	v.ClassStreamSpread, v.ClassSpreadSamples = classSpread, classSpreadSamples
	v.ID, v.Key, v.Labels = s.id, s.key, s.endpoint.Labels
	v.Metrics, v.HasMetrics = s.metrics, s.hasMetrics
	v.InFlight, v.PendingFirstToken = s.inFlight, s.pendingFirstToken
	v.PendingPrefillTokens, v.BacklogTokens = s.pendingPrefillTokens, s.backlog
	v.PicksSinceSample, v.FirstTokensSince, v.FinishedSinceSample = s.picksSince, s.firstTokensSince, s.finishedSince
	v.MeanPromptTokens, v.Speed, v.AdaptersSinceSample = s.meanPrompt, s.learner.Speed(), s.adaptersSince
	v.Models, v.Avoid, v.LastPickAt, v.PickRate = s.models, s.avoidLocked(now), s.lastPickAt, s.pickRateLocked(now)
	v.PlacedTokens = s.placed
	v.OldestWait, v.Overdue, v.OverdueInLine = 0, 0, 0
	v.AdapterSlotWaitSeconds = 0
	if len(s.queue) > 0 {
		v.OldestWait = now.Sub(s.queue[0].PickedAt)
		for _, r := range s.queue {
			late := now.Sub(r.PickedAt) - r.predictedTTFT
			v.Overdue = max(v.Overdue, late)
			if !r.skipped {
				v.OverdueInLine = max(v.OverdueInLine, late)
			}
		}
	}
	v.Stale = false
	if staleness > 0 {
		v.Stale = !s.hasMetrics || now.Sub(s.metrics.SampledAt) > staleness
	}
}

// PickRateWindow is the time constant over which View.PickRate forgets
// picks: long enough to hold tens of picks of an endpoint that gets a small
// share, short enough that a share lost minutes ago does not count now.
const PickRateWindow = 30 * time.Second

// pickRateLocked is the pick rate decayed to now.
func (s *EndpointState) pickRateLocked(now time.Time) float64 {
	return decayed(s.pickRate, s.lastPickAt, now, PickRateWindow)
}

// PlacedWindow is the time constant over which View.PlacedTokens forgets
// the prompts sent to an endpoint: about as long as a busy server keeps a
// prefix in its cache, so that it weighs the content the endpoint still
// holds and draws requests with.
const PlacedWindow = 10 * time.Minute

// placedLocked is the placed prompt tokens decayed to now.
func (s *EndpointState) placedLocked(now time.Time) float64 {
	return decayed(s.placed, s.lastPickAt, now, PlacedWindow)
}

// decayed is x, as of since, decayed exponentially over window to now.
func decayed(x float64, since, now time.Time, window time.Duration) float64 {
	if x == 0 || !now.After(since) {
		return x
	}
	return x * math.Exp(-now.Sub(since).Seconds()/window.Seconds())
}

// Picked counts r against the endpoint from now on; r.PickedAt is set to now.
func (s *EndpointState) Picked(r *Request, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked(now)
	r.PickedAt = now
	r.WorkAhead = s.backlog
	r.predictedTTFT = s.learner.PredictFirstToken(r.WorkAhead+float64(r.UncachedTokens), r.ChunkTokens)
	s.pickRate = s.pickRateLocked(now) + 1/PickRateWindow.Seconds()
	s.placed = s.placedLocked(now) + float64(r.UncachedTokens)
	s.lastPickAt = latency.Later(s.lastPickAt, now)
	s.inFlight++
	s.pendingFirstToken++
	s.pendingPrefillTokens += int64(r.UncachedTokens)
	s.backlog += float64(r.UncachedTokens)
	s.queue = append(s.queue, r)
	s.picksSince++
	if r.Adapter != "" && !slices.Contains(s.adaptersSince, r.Adapter) {
		running, _ := s.metrics.HasAdapter(r.Adapter)
		r.loadsAdapter = !running
		s.adaptersSince = append(s.adaptersSince, r.Adapter)
	}
	if s.meanPrompt == 0 {
		s.meanPrompt = float64(r.UncachedTokens)
	} else {
		s.meanPrompt += meanPromptAlpha * (float64(r.UncachedTokens) - s.meanPrompt)
	}
}

// ObserveFirstToken records r's first token at now; the timing model learns
// from it (the prefill rate, or an adapter's load time).
func (s *EndpointState) ObserveFirstToken(r *Request, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || !r.firstTokenAt.IsZero() {
		return
	}
	r.firstTokenAt, r.lastTokenAt, r.tokens = now, now, 1
	s.health.succeeded(now)
	s.leavePrefillLocked(r, now)
	s.learner.ObserveFirstToken(latency.FirstToken{PickedAt: r.PickedAt, At: now, WorkAhead: r.WorkAhead,
		UncachedTokens: r.UncachedTokens, ChunkTokens: r.ChunkTokens, LoadsAdapter: r.loadsAdapter})
	s.class.record(s.id, s.learner.Speed())
}

// leavePrefillLocked removes r's prefill from the pending accounting. Requests
// picked before r that still wait for their first token were passed over by
// the server: their prompts stay in the backlog until they are served.
func (s *EndpointState) leavePrefillLocked(r *Request, now time.Time) {
	s.drainLocked(now)
	if i := slices.Index(s.queue, r); i >= 0 {
		for _, q := range s.queue[:i] {
			if !q.skipped {
				q.skipped = true
				s.skippedTokens += int64(q.UncachedTokens)
			}
		}
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	if r.skipped {
		s.skippedTokens -= int64(r.UncachedTokens)
	}
	s.pendingFirstToken--
	s.pendingPrefillTokens -= int64(r.UncachedTokens)
	if s.pendingPrefillTokens < 0 {
		s.pendingPrefillTokens = 0
	}
	// FIFO: everything queued before r is done too (or passed over), so the
	// backlog is at most the work picked after it.
	s.backlog = math.Max(float64(s.skippedTokens), math.Min(s.backlog, float64(s.pendingPrefillTokens)))
	s.firstTokensSince++
}

// ObserveTokens records n more output tokens of r arriving together at now;
// the timing model learns the decode step from the gap since the previous one.
func (s *EndpointState) ObserveTokens(r *Request, n int, now time.Time) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || r.firstTokenAt.IsZero() {
		return
	}
	kv, kvKnown := kvUtilization(s.metrics, s.hasMetrics, s.picksSince, s.meanPrompt, 0)
	s.learner.ObserveTokens(r.lastTokenAt, n, now, kv, kvKnown)
	s.health.progressed(now)
	r.lastTokenAt = now
	r.tokens += n
}

// ObserveCompletion ends r at now (finished or failed). outputTokens is the
// count the server reported (0: unknown, or the request failed); the timing
// model learns the request's duration from it and, for a response that
// reported usage only, the decode step.
func (s *EndpointState) ObserveCompletion(r *Request, outputTokens int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done {
		return
	}
	if outputTokens > 0 || !r.firstTokenAt.IsZero() {
		s.health.progressed(now)
	}
	s.endLocked(r, outputTokens, now)
}

// endLocked ends r at now with the server's output count (0: unknown or failed).
func (s *EndpointState) endLocked(r *Request, outputTokens int, now time.Time) {
	if r.firstTokenAt.IsZero() {
		s.leavePrefillLocked(r, now)
	}
	r.done = true
	s.inFlight--
	s.finishedSince++
	spread := s.learner.ObserveCompletion(latency.Completion{PickedAt: r.PickedAt, FirstTokenAt: r.firstTokenAt, At: now,
		TokensSeen: r.tokens, OutputTokens: outputTokens})
	s.class.record(s.id, s.learner.Speed())
	s.class.recordSpread(spread)
}

// Speed returns the learned speed.
func (s *EndpointState) Speed() latency.Speed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.learner.Speed()
}
