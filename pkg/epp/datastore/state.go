package datastore

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Learning constants. The decode step moves with every token, so it follows
// fast; the prefill rate is a ratio of decayed sums of work and time, so large
// prompts (informative) weigh more than tiny ones (dominated by overhead). Its
// memory is about twenty first tokens: one sample is a busy interval between
// two first tokens, which varies a lot from request to request (requests that
// finish in one engine step share it), while the hardware's rate does not.
const (
	prefillDecay      = 0.95
	meanPromptAlpha   = 0.1
	minPrefillSeconds = 1e-4
	// maxIntervalSlowdown bounds the time one sample may count as prefill: the
	// interval's own tokens plus a chunk of the next request's, worked at
	// 1/maxIntervalSlowdown of the learned rate (or of the prior, if lower). Time beyond it was a wait for something else (a full
	// KV cache, an adapter slot, another picker's traffic), which the scorers
	// price separately; counting it would collapse the rate, and a rate that
	// looks slow draws no traffic to correct it.
	maxIntervalSlowdown = 2.0
	// stepMedianRate is how far (relatively) one observed step moves the
	// decode-step estimate, a streaming median; interTokenAlpha is one step's
	// weight in the mean inter-token time.
	stepMedianRate  = 0.05
	interTokenAlpha = 0.05
	// sameStepFraction: tokens observed within this fraction of a step of the
	// previous observation come from the same engine step.
	sameStepFraction = 0.25
	// adapterLoadAlpha and requestAlpha are one request's weight in the mean
	// adapter load time and the mean request duration.
	adapterLoadAlpha = 0.2
	requestAlpha     = 0.05
	// maxAdapterLoadSeconds caps one observed load: a longer delay is a wait
	// for a free adapter slot, which scorers price separately.
	maxAdapterLoadSeconds = 2.0
)

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
	queue         []*Request
	skippedTokens int64
	// lastFirstTokenAt is when the latest first token arrived here: the end
	// of the previous busy interval for prefill-rate learning.
	lastFirstTokenAt time.Time
	picksSince       int
	firstTokensSince int
	finishedSince    int
	meanPrompt       float64
	// adaptersSince lists adapters sent here since the last sample: the server
	// is loading them even though its telemetry does not show it yet.
	adaptersSince []string

	prefillWork, prefillTime float64
	// lastStepAt is when the latest engine step was observed.
	lastStepAt time.Time
	speed      Speed
	priors     Priors
}

func newEndpointState(id int32, ep Endpoint, priors Priors) *EndpointState {
	return &EndpointState{
		id: id, key: ep.Key(), endpoint: ep, priors: priors,
		speed: Speed{PrefillTokensPerSecond: priors.PrefillTokensPerSecond, DecodeStepSeconds: priors.DecodeStepSeconds,
			InterTokenSeconds: priors.DecodeStepSeconds},
	}
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
		s.backlog -= now.Sub(s.backlogAt).Seconds() * s.speed.PrefillTokensPerSecond
	}
	s.backlog = math.Max(float64(s.skippedTokens), math.Min(s.backlog, float64(s.pendingPrefillTokens)))
	if now.After(s.backlogAt) {
		s.backlogAt = now
	}
}

// View copies the state for a scheduling decision at now.
func (s *EndpointState) View(now time.Time, staleness time.Duration, v *View) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked(now)
	*v = View{
		ID: s.id, Key: s.key, Labels: s.endpoint.Labels,
		Metrics: s.metrics, HasMetrics: s.hasMetrics,
		InFlight: s.inFlight, PendingFirstToken: s.pendingFirstToken,
		PendingPrefillTokens: s.pendingPrefillTokens, BacklogTokens: s.backlog,
		PicksSinceSample: s.picksSince, FirstTokensSince: s.firstTokensSince, FinishedSinceSample: s.finishedSince,
		MeanPromptTokens: s.meanPrompt, Speed: s.speed, AdaptersSinceSample: s.adaptersSince,
		Models: s.models,
	}
	if staleness > 0 {
		v.Stale = !s.hasMetrics || now.Sub(s.metrics.SampledAt) > staleness
	}
}

// Picked counts r against the endpoint from now on; r.PickedAt is set to now.
func (s *EndpointState) Picked(r *Request, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked(now)
	r.PickedAt = now
	r.WorkAhead = s.backlog
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

// ObserveFirstToken records r's first token at now and learns the prefill rate
// from the busy interval that ended with it (or, when r loaded an adapter, the
// load time from its time to first token).
func (s *EndpointState) ObserveFirstToken(r *Request, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || !r.firstTokenAt.IsZero() {
		return
	}
	r.firstTokenAt, r.lastTokenAt, r.tokens = now, now, 1
	s.leavePrefillLocked(r, now)
	previous := s.lastFirstTokenAt
	if now.After(s.lastFirstTokenAt) {
		s.lastFirstTokenAt = now
	}
	ttft := now.Sub(r.PickedAt).Seconds()
	work := r.WorkAhead + float64(r.UncachedTokens)
	if ttft <= 0 || work <= 0 {
		return
	}
	// Time not spent on prefill: at least one decode-sized step, plus one per
	// chunk of prefill work the server's token budget splits it into.
	steps := 1.0
	if r.ChunkTokens > 0 {
		steps += math.Floor(work / float64(r.ChunkTokens))
	}
	if r.loadsAdapter {
		// The wait beyond the predicted prefill is the adapter's load (zero
		// when it was resident after all): learn that, not a prefill rate.
		excess := math.Max(0, ttft-work/s.speed.PrefillTokensPerSecond-steps*s.speed.DecodeStepSeconds)
		excess = math.Min(excess, maxAdapterLoadSeconds)
		if s.speed.AdapterLoadSamples == 0 {
			s.speed.AdapterLoadSeconds = excess
		} else {
			s.speed.AdapterLoadSeconds += adapterLoadAlpha * (excess - s.speed.AdapterLoadSeconds)
		}
		s.speed.AdapterLoadSamples++
		return
	}
	s.learnPrefillLocked(r, previous, now)
}

// learnPrefillLocked learns the prefill rate from r's first token at now. The
// sample is the busy interval that ended with it: from the previous first
// token here, or from r's pick if that came later (the server had nothing of
// this picker's to prefill before r), and the tokens r's prompt added. In a
// server that prefills in arrival order, these intervals add up to the time
// spent on the prompts whatever their overlap: requests that finish in the
// same engine step get one interval for all their tokens. The time to first
// token, by contrast, also holds prompts that arrived after r and joined its
// last step, and the estimated work ahead at the pick, which itself drains at
// the learned rate; learning from it made the rate some 20% slow and noisy
// from endpoint to endpoint.
func (s *EndpointState) learnPrefillLocked(r *Request, previous, now time.Time) {
	work := float64(r.UncachedTokens)
	// The interval's time not spent on prefill, as the latency model counts
	// it: a decode-sized step per full chunk of the prompt, plus the step in
	// flight when r found nothing ahead.
	start, steps := r.PickedAt, 1.0
	if previous.After(start) {
		start, steps = previous, 0
	}
	if r.ChunkTokens > 0 {
		steps += math.Floor(work / float64(r.ChunkTokens))
	}
	interval := now.Sub(start).Seconds()
	if work <= 0 || interval < 0 {
		return
	}
	prefill := math.Max(interval-steps*s.speed.DecodeStepSeconds, math.Max(0.25*interval, minPrefillSeconds))
	if s.speed.PrefillSamples > 0 {
		// A rate learned above the (optimistic) prior does not tighten the
		// bound: early samples of tiny prompts can overstate it many times.
		rate := math.Min(s.speed.PrefillTokensPerSecond, s.priors.PrefillTokensPerSecond)
		prefill = math.Min(prefill, maxIntervalSlowdown*(work+float64(r.ChunkTokens))/rate)
	}
	s.prefillWork = prefillDecay*s.prefillWork + work
	s.prefillTime = prefillDecay*s.prefillTime + prefill
	s.speed.PrefillSamples++
	// Blend with the prior while evidence is thin.
	observed := s.prefillWork / s.prefillTime
	if n := float64(s.speed.PrefillSamples); n < 3 {
		observed = (observed*n + s.priors.PrefillTokensPerSecond) / (n + 1)
	}
	s.speed.PrefillTokensPerSecond = observed
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

// ObserveTokens records n more output tokens of r arriving together at now and
// learns the decode step from the gap since the previous token.
func (s *EndpointState) ObserveTokens(r *Request, n int, now time.Time) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || r.firstTokenAt.IsZero() {
		return
	}
	gap := now.Sub(r.lastTokenAt).Seconds() / float64(n)
	r.lastTokenAt = now
	r.tokens += n
	if gap <= 0 {
		return
	}
	s.observeDecodeLocked(gap, now)
}

// observeDecodeLocked learns from one inter-token gap observed at now. Every
// sequence of a batch reports the same engine step, so a step counts once;
// otherwise the latest step — often one that also computed a prompt chunk and
// took several times longer — would stand for the endpoint's speed.
func (s *EndpointState) observeDecodeLocked(gap float64, now time.Time) {
	if s.speed.DecodeSamples > 0 && now.Sub(s.lastStepAt).Seconds() < sameStepFraction*s.speed.DecodeStepSeconds {
		return
	}
	s.lastStepAt = now
	sp := &s.speed
	if sp.DecodeSamples == 0 {
		sp.DecodeStepSeconds, sp.InterTokenSeconds = gap, gap
	} else {
		// A streaming median: the typical step, which the occasional long
		// prefill step does not stretch.
		switch {
		case gap > sp.DecodeStepSeconds:
			sp.DecodeStepSeconds = math.Min(gap, sp.DecodeStepSeconds*(1+stepMedianRate))
		case gap < sp.DecodeStepSeconds:
			sp.DecodeStepSeconds = math.Max(gap, sp.DecodeStepSeconds*(1-stepMedianRate))
		}
		sp.InterTokenSeconds += interTokenAlpha * (gap - sp.InterTokenSeconds)
	}
	sp.DecodeSamples++
}

// ObserveCompletion ends r at now. outputTokens, when positive and larger than
// what was observed (a non-streamed response reports usage only), teaches the
// decode step from the time after the first token.
func (s *EndpointState) ObserveCompletion(r *Request, outputTokens int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done {
		return
	}
	if r.firstTokenAt.IsZero() {
		s.leavePrefillLocked(r, now)
	} else if outputTokens > r.tokens && r.tokens <= 1 {
		if d := now.Sub(r.firstTokenAt).Seconds(); d > 0 {
			s.observeDecodeLocked(d/float64(outputTokens-1), now)
		}
	}
	r.done = true
	s.inFlight--
	s.finishedSince++
	if d := now.Sub(r.PickedAt).Seconds(); outputTokens > 0 && d > 0 {
		if s.speed.RequestSamples == 0 {
			s.speed.RequestSeconds = d
		} else {
			s.speed.RequestSeconds += requestAlpha * (d - s.speed.RequestSeconds)
		}
		s.speed.RequestSamples++
	}
}

// Speed returns the learned speed.
func (s *EndpointState) Speed() Speed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.speed
}
