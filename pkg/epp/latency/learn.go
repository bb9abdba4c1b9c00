package latency

import (
	"math"
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
	minPrefillSeconds = 1e-4
	// maxIntervalSlowdown bounds the time one sample may count as prefill: the
	// interval's own tokens plus a chunk of the next request's, worked at
	// 1/maxIntervalSlowdown of the learned rate (or of the prior, if lower).
	// Time beyond it was a wait for something else (a full KV cache, an
	// adapter slot, another picker's traffic), which the scorers price
	// separately; counting it would collapse the rate, and a rate that looks
	// slow draws no traffic to correct it.
	maxIntervalSlowdown = 2.0
	// stepMedianRate is how far (relatively) one observed step moves the
	// decode-step estimate, a streaming median.
	stepMedianRate = 0.05
	// One step's weight in the mean inter-token time follows the mean output
	// tokens of the requests seen there (interTokenAlpha), within these
	// bounds: the mean spans about as many steps as a stream's life, over
	// which its time per token is what the SLO judges. A mean over twenty
	// steps where outputs are long (180 tokens) jumped with every prefill
	// step and sank between them, and admission, which takes a request
	// whenever the mean is under its bound, took them at its troughs:
	// streams ran at 1.4 (H100) to 1.75 times (A10G: a second's prefill a
	// prompt) the mean, over the SLO. A mean over fifty steps where outputs
	// are short (28 tokens, bursty arrivals: azure-code-mixed-gpu) missed the
	// bursts that stretched them: P99 TPOT 208 ms against 149 over twenty,
	// at 1.2 times its rate.
	minInterTokenAlpha = 0.01
	maxInterTokenAlpha = 0.1
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
	// maxGapSlowdown caps one inter-token gap, in decode steps, in the mean,
	// unless a step that also prefills a whole chunk takes longer (maxGap).
	maxGapSlowdown = 8.0
	// An endpoint that shows the picker nothing (no request of its waits
	// there) for relaxGrace forgets what it learned, its figures moving
	// toward the priors with time constant relaxSeconds. Learning happens
	// only on traffic, and an endpoint that looks slow gets none: without
	// this, a pod that once paused (a restart, a GPU hiccup) kept the rate it
	// showed then, and no traffic ever came to correct it.
	relaxGrace   = 5 * time.Second
	relaxSeconds = 15.0
	// The time between tokens is regressed on the KV-cache use it was
	// observed at over about 1/kvTrendAlpha steps (seconds to tens of
	// seconds: the cache fills and empties slower than a stream lives), and
	// the slope is trusted once kvTrendMinSamples steps spread over at least
	// kvTrendMinSpread of the cache (standard deviation) back it: over a
	// narrower spread, the steps' noise (prefill chunks) is all it measures.
	kvTrendAlpha      = 0.002
	kvTrendMinSamples = 200
	kvTrendMinSpread  = 0.05
)

// Learner learns one endpoint's Speed online from the timings of the
// requests sent there, starting from priors. It is not safe for concurrent
// use: the endpoint's state (datastore.EndpointState) holds it under its own
// lock and reports each request's first token, later tokens and completion
// as they happen, in the order the accounting sees them.
type Learner struct {
	priors Priors
	speed  Speed
	// prefillWork and prefillTime are the decayed sums of uncached prompt
	// tokens and prefill seconds of the busy intervals seen.
	prefillWork, prefillTime float64
	// lastFirstTokenAt is when the latest first token arrived: the end of
	// the previous busy interval.
	lastFirstTokenAt time.Time
	// lastStepAt is when the latest engine step was observed.
	lastStepAt time.Time
	// relaxedAt is when Relax last moved the figures toward the priors.
	relaxedAt time.Time
	// chunkTokens is the chunked-prefill budget of the latest first token.
	chunkTokens int
	// kvTrend regresses the time between tokens on the KV-cache use.
	kvTrend kvTrend
	// spreads holds the latest finished streams' time per token over the
	// mean time between tokens.
	spreads StreamSpreads
}

// kvTrend is a least-squares line through (KV-cache use, time between
// tokens) pairs, kept as exponential means of the sums it needs.
type kvTrend struct {
	samples          int
	u, gap, uu, ugap float64
}

func (t *kvTrend) add(u, gap float64) {
	a := max(kvTrendAlpha, 1/float64(t.samples+1))
	t.samples++
	t.u += a * (u - t.u)
	t.gap += a * (gap - t.gap)
	t.uu += a * (u*u - t.uu)
	t.ugap += a * (u*gap - t.ugap)
}

// slope is the seconds the time between tokens grows per whole cache of
// use, or 0 while the line is not backed by enough steps over enough of the
// cache. It is never negative: a fuller cache never speeds a step up, and
// a falling line is load moving elsewhere, not the cache.
func (t kvTrend) slope() float64 {
	if t.samples < kvTrendMinSamples {
		return 0
	}
	spread := t.uu - t.u*t.u
	if spread < kvTrendMinSpread*kvTrendMinSpread {
		return 0
	}
	return max(0, (t.ugap-t.u*t.gap)/spread)
}

// NewLearner returns a learner that knows nothing yet: its speed is priors.
func NewLearner(priors Priors) Learner {
	return Learner{priors: priors, speed: Speed{PrefillTokensPerSecond: priors.PrefillTokensPerSecond,
		DecodeStepSeconds: priors.DecodeStepSeconds, InterTokenSeconds: priors.DecodeStepSeconds}}
}

// Speed is what has been learned so far.
func (l *Learner) Speed() Speed { return l.speed }

// PrefillRate is the learned prefill rate in tokens per second: what the
// picker's own backlog there drains at.
func (l *Learner) PrefillRate() float64 { return l.speed.PrefillTokensPerSecond }

// PredictFirstToken is the time to prefill work tokens at the learned speed,
// in steps of chunkTokens.
func (l *Learner) PredictFirstToken(work float64, chunkTokens int) time.Duration {
	return time.Duration(Model{ChunkTokens: chunkTokens}.PrefillSeconds(l.speed, work) * float64(time.Second))
}

// Relax moves the learned figures toward target for the time since the last
// observation (less relaxGrace), when idle says the endpoint has no request
// of the picker's waiting there; otherwise the clock only advances. The
// rate moves arithmetically (a collapsed rate of 44 tokens/s is half way
// back to a prior of 2,000 after a time constant's ln 2, not still near 88),
// so that an idle endpoint soon looks fast enough to be tried again. The
// target is the endpoint's class prior (what endpoints of the same
// accelerator were measured at, datastore's speed classes), else the
// learner's own priors: an idle slow GPU that relaxed toward the fleet-wide
// optimistic prior looked as fast as the fastest and drew bursts it took
// seconds to prefill.
func (l *Learner) Relax(now time.Time, idle bool, target Priors) {
	from := Later(l.relaxedAt, Later(l.lastFirstTokenAt, l.lastStepAt).Add(relaxGrace))
	if !now.After(l.relaxedAt) {
		return
	}
	l.relaxedAt = now
	if !idle || !now.After(from) || l.lastFirstTokenAt.IsZero() && l.lastStepAt.IsZero() {
		return
	}
	keep := math.Exp(-now.Sub(from).Seconds() / relaxSeconds)
	sp, pr := &l.speed, target
	if pr.PrefillTokensPerSecond <= 0 || pr.DecodeStepSeconds <= 0 {
		pr = l.priors
	}
	if sp.PrefillSamples > 0 && l.prefillWork > 0 {
		sp.PrefillTokensPerSecond = pr.PrefillTokensPerSecond + keep*(sp.PrefillTokensPerSecond-pr.PrefillTokensPerSecond)
		l.prefillTime = l.prefillWork / sp.PrefillTokensPerSecond
	}
	if sp.DecodeSamples > 0 {
		sp.DecodeStepSeconds = pr.DecodeStepSeconds + keep*(sp.DecodeStepSeconds-pr.DecodeStepSeconds)
		sp.InterTokenSeconds = pr.DecodeStepSeconds + keep*(sp.InterTokenSeconds-pr.DecodeStepSeconds)
	}
}

// Later is the later of a and b.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// FirstToken is one request's first token as the endpoint's accounting saw it.
type FirstToken struct {
	// PickedAt is when the request was sent there, At when its first token came.
	PickedAt, At time.Time
	// WorkAhead is the prefill backlog (tokens) estimated ahead of the
	// request at its pick; UncachedTokens is its own prompt the server had to
	// prefill; ChunkTokens the chunked-prefill budget assumed.
	WorkAhead      float64
	UncachedTokens int
	ChunkTokens    int
	// LoadsAdapter: the request's LoRA adapter was neither running there nor
	// sent there since the telemetry sample, so the server probably loaded it.
	LoadsAdapter bool
}

// ObserveFirstToken learns the prefill rate from the busy interval that ended
// with ft or, when ft's request loaded an adapter, the load time from its
// time to first token.
func (l *Learner) ObserveFirstToken(ft FirstToken) {
	previous := l.lastFirstTokenAt
	l.chunkTokens = ft.ChunkTokens
	if ft.At.After(l.lastFirstTokenAt) {
		l.lastFirstTokenAt = ft.At
	}
	ttft := ft.At.Sub(ft.PickedAt).Seconds()
	work := ft.WorkAhead + float64(ft.UncachedTokens)
	if ttft <= 0 || work <= 0 {
		return
	}
	// Time not spent on prefill: at least one decode-sized step, plus one per
	// chunk of prefill work the server's token budget splits it into.
	steps := 1.0
	if ft.ChunkTokens > 0 {
		steps += math.Floor(work / float64(ft.ChunkTokens))
	}
	if ft.LoadsAdapter {
		// The wait beyond the predicted prefill is the adapter's load (zero
		// when it was resident after all): learn that, not a prefill rate.
		excess := math.Max(0, ttft-work/l.speed.PrefillTokensPerSecond-steps*l.speed.DecodeStepSeconds)
		excess = math.Min(excess, maxAdapterLoadSeconds)
		if l.speed.AdapterLoadSamples == 0 {
			l.speed.AdapterLoadSeconds = excess
		} else {
			l.speed.AdapterLoadSeconds += adapterLoadAlpha * (excess - l.speed.AdapterLoadSeconds)
		}
		l.speed.AdapterLoadSamples++
		return
	}
	l.learnPrefill(ft, previous)
}

// learnPrefill learns the prefill rate from ft. The sample is the busy
// interval that ended with it: from the previous first token here, or from
// ft's pick if that came later (the server had nothing of this picker's to
// prefill before it), and the tokens ft's prompt added. In a server that
// prefills in arrival order, these intervals add up to the time spent on the
// prompts whatever their overlap: requests that finish in the same engine
// step get one interval for all their tokens. The time to first token, by
// contrast, also holds prompts that arrived after ft's request and joined its
// last step, and the estimated work ahead at the pick, which itself drains at
// the learned rate; learning from it made the rate some 20% slow and noisy
// from endpoint to endpoint.
func (l *Learner) learnPrefill(ft FirstToken, previous time.Time) {
	work := float64(ft.UncachedTokens)
	// The interval's time not spent on prefill, as the latency model counts
	// it: a decode-sized step per full chunk of the prompt, plus the step in
	// flight when the request found nothing ahead.
	start, steps := ft.PickedAt, 1.0
	if previous.After(start) {
		start, steps = previous, 0
	}
	if ft.ChunkTokens > 0 {
		steps += math.Floor(work / float64(ft.ChunkTokens))
	}
	interval := ft.At.Sub(start).Seconds()
	if work <= 0 || interval < 0 {
		return
	}
	prefill := math.Max(interval-steps*l.speed.DecodeStepSeconds, math.Max(0.25*interval, minPrefillSeconds))
	if l.speed.PrefillSamples > 0 {
		// A rate learned above the (optimistic) prior does not tighten the
		// bound: early samples of tiny prompts can overstate it many times.
		rate := math.Min(l.speed.PrefillTokensPerSecond, l.priors.PrefillTokensPerSecond)
		prefill = math.Min(prefill, maxIntervalSlowdown*(work+float64(ft.ChunkTokens))/rate)
	}
	l.prefillWork = prefillDecay*l.prefillWork + work
	l.prefillTime = prefillDecay*l.prefillTime + prefill
	l.speed.PrefillSamples++
	// Blend with the prior while evidence is thin.
	observed := l.prefillWork / l.prefillTime
	if n := float64(l.speed.PrefillSamples); n < MeasuredSamples {
		observed = (observed*n + l.priors.PrefillTokensPerSecond) / (n + 1)
	}
	l.speed.PrefillTokensPerSecond = observed
}

// ObserveTokens learns the decode step from n more output tokens of a
// request arriving together at now, the previous one having come at
// previous, with the endpoint's KV cache at use kv (0..1) if kvKnown.
func (l *Learner) ObserveTokens(previous time.Time, n int, now time.Time, kv float64, kvKnown bool) {
	if gap := now.Sub(previous).Seconds() / float64(n); gap > 0 {
		l.observeStep(gap, now, kv, kvKnown)
	}
}

// observeStep learns from one inter-token gap observed at now. Every
// sequence of a batch reports the same engine step, so a step counts once;
// otherwise the latest step — often one that also computed a prompt chunk and
// took several times longer — would stand for the endpoint's speed.
func (l *Learner) observeStep(gap float64, now time.Time, kv float64, kvKnown bool) {
	if l.speed.DecodeSamples > 0 && now.Sub(l.lastStepAt).Seconds() < sameStepFraction*l.speed.DecodeStepSeconds {
		return
	}
	l.lastStepAt = now
	sp := &l.speed
	if sp.DecodeSamples == 0 {
		// The first gap may hold another request's prefill step (seconds on
		// a slow GPU): taken whole, it became the step, which the median
		// then needed some seventy tokens to walk back down, and an idle
		// endpoint showed no tokens to walk it with. Bounded as any later
		// gap is, by the prior's step; the median climbs from there if the
		// endpoint really is slower.
		gap = math.Min(gap, maxGapSlowdown*l.priors.DecodeStepSeconds)
		sp.DecodeStepSeconds, sp.InterTokenSeconds = gap, gap
		if kvKnown {
			sp.InterTokenKVUse = kv
		}
	} else {
		// A streaming median: the typical step, which the occasional long
		// prefill step does not stretch.
		switch {
		case gap > sp.DecodeStepSeconds:
			sp.DecodeStepSeconds = math.Min(gap, sp.DecodeStepSeconds*(1+stepMedianRate))
		case gap < sp.DecodeStepSeconds:
			sp.DecodeStepSeconds = math.Max(gap, sp.DecodeStepSeconds*(1-stepMedianRate))
		}
		// One gap moves the mean by a bounded amount: a pod that paused (hung,
		// restarted) must not look slow for long after.
		counted, alpha := math.Min(gap, l.maxGap()), l.interTokenAlpha()
		sp.InterTokenSeconds += alpha * (counted - sp.InterTokenSeconds)
		if kvKnown {
			sp.InterTokenKVUse += alpha * (kv - sp.InterTokenKVUse)
			l.kvTrend.add(kv, counted)
			sp.InterTokenPerKVUse = l.kvTrend.slope()
		}
	}
	sp.DecodeSamples++
}

// interTokenAlpha is one step's weight in the mean inter-token time: that of
// an exponential mean as long-sighted as a plain mean over the mean output
// tokens n, 2/(n+1), within [minInterTokenAlpha, maxInterTokenAlpha].
func (l *Learner) interTokenAlpha() float64 {
	if l.speed.OutputTokens <= 0 {
		return maxInterTokenAlpha
	}
	return min(maxInterTokenAlpha, max(minInterTokenAlpha, 2/(l.speed.OutputTokens+1)))
}

// maxGap is the longest one inter-token gap counts as in the mean: a step
// that also prefills a whole chunk at the learned rate, or maxGapSlowdown
// decode steps if more. Longer, the server paused. Every stream in the batch
// waits out a prefill step, so its time per token holds them: capped at
// eight decode steps, a slow-prefill GPU's (an A10G's 1,500 tokens/s: a
// second a chunk, against 46 ms a step) mean read some 0.6 of its streams'
// time per token, and admission let its batch grow until they missed the SLO.
func (l *Learner) maxGap() float64 {
	sp := &l.speed
	steps := maxGapSlowdown * sp.DecodeStepSeconds
	if l.chunkTokens <= 0 || sp.PrefillTokensPerSecond <= 0 {
		return steps
	}
	return math.Max(steps, sp.DecodeStepSeconds+float64(l.chunkTokens)/sp.PrefillTokensPerSecond)
}

// Completion is a request's end as the endpoint's accounting saw it.
type Completion struct {
	// PickedAt is when the request was sent there; FirstTokenAt when its
	// first token came (zero: none did); At when it ended.
	PickedAt, FirstTokenAt, At time.Time
	// TokensSeen is the output tokens observed on the way; OutputTokens the
	// count the server reported at the end (0: unknown, or the request failed).
	TokensSeen   int
	OutputTokens int
}

// ObserveCompletion learns the mean request duration from c and, when the
// server reported more tokens than were seen (a non-streamed response
// reports usage only), the decode step from the time after the first token.
// It returns the stream's time per token over the mean time between tokens
// (0: not measured), which the endpoint's class pools (StreamSpreads).
func (l *Learner) ObserveCompletion(c Completion) (spread float64) {
	if !c.FirstTokenAt.IsZero() && c.OutputTokens > c.TokensSeen && c.TokensSeen <= 1 {
		if d := c.At.Sub(c.FirstTokenAt).Seconds(); d > 0 {
			l.observeStep(d/float64(c.OutputTokens-1), c.At, 0, false)
		}
	}
	spread = l.observeSpread(c)
	if d := c.At.Sub(c.PickedAt).Seconds(); c.OutputTokens > 0 && d > 0 {
		if l.speed.RequestSamples == 0 {
			l.speed.RequestSeconds, l.speed.OutputTokens = d, DefaultOutputTokens
		} else {
			l.speed.RequestSeconds += requestAlpha * (d - l.speed.RequestSeconds)
		}
		// The prior counts as one completion until requestAlpha weighs less
		// than a plain mean's share: outputs vary widely, and the first few
		// (often the shortest, done first) would set a stream's life alone.
		l.speed.RequestSamples++
		l.speed.OutputTokens += max(requestAlpha, 1/float64(l.speed.RequestSamples+1)) * (float64(c.OutputTokens) - l.speed.OutputTokens)
	}
	return spread
}

// observeSpread counts a finished stream's time per token over the mean
// time between tokens now in the spread (StreamSpreads), and returns it (0
// when the stream or the mean is unknown). One pass under the endpoint's
// lock, on every completion.
func (l *Learner) observeSpread(c Completion) float64 {
	tokens := max(c.OutputTokens, c.TokensSeen)
	if c.FirstTokenAt.IsZero() || tokens < 2 || l.speed.DecodeSamples == 0 || l.speed.InterTokenSeconds <= 0 {
		return 0
	}
	tpot := c.At.Sub(c.FirstTokenAt).Seconds() / float64(tokens-1)
	if !(tpot > 0) {
		return 0
	}
	r := tpot / l.speed.InterTokenSeconds
	l.spreads.Add(r)
	l.speed.StreamSpread, l.speed.SpreadSamples = l.spreads.Spread()
	return r
}
