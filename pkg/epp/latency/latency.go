// Package latency is the picker's timing model of a model server: how fast
// each endpoint works (Speed), learned online from the requests sent there
// (Learner), and what that predicts for a new request (Model): its time to
// first token, and the time between tokens of the streams there once it
// joins, which the predicted-latency scorer and admission control read. It
// follows the form of
// calibrated LLM-serving simulators: a server works through queued prefill
// tokens at a prefill rate, in steps of at most a chunk budget, and every step
// also carries the decode batch, which costs about one decode step.
//
// The package holds no endpoint state of its own: the datastore keeps one
// Learner per endpoint and feeds it each first token, later tokens and
// completion as its accounting sees them, and a decision's view of an
// endpoint gives the model its Queue.
package latency

import "math"

// Model holds the constants that are not learned.
type Model struct {
	// ChunkTokens is the server's chunked-prefill token budget per step.
	ChunkTokens int
	// KVPressureThreshold is the KV utilisation above which queueing for memory
	// (and preemption) is expected; KVPressureFactor scales the slowdown from 1×
	// at the threshold to 1+factor× at a full cache.
	KVPressureThreshold float64
	KVPressureFactor    float64
}

// DefaultModel fits vLLM's defaults.
var DefaultModel = Model{ChunkTokens: 8192, KVPressureThreshold: 0.9, KVPressureFactor: 4}

// DefaultPromptTokens stands for a queued request's prompt when nothing better
// is known, so that a queue of unknown requests still weighs.
const DefaultPromptTokens = 256

// Queue is what the model reads of an endpoint at a decision
// (datastore.View.Queue).
type Queue struct {
	// BacklogTokens is the uncached prompt tokens of the picker's own
	// requests there that the endpoint has probably not worked through yet.
	BacklogTokens float64
	// OthersWaiting is the waiting requests the telemetry shows beyond the
	// picker's own (other pickers', or clients that bypass it).
	OthersWaiting int
	// MeanPromptTokens is the mean uncached prompt of the requests sent there
	// (0: none yet).
	MeanPromptTokens float64
	// PendingFirstToken is the picker's requests there still awaiting their
	// first token.
	PendingFirstToken int
	// ArrivingTokensPerSecond is the uncached prompt tokens the picker sends
	// there per second, of late.
	ArrivingTokensPerSecond float64
	// Speed points at the endpoint's learned speed (the view's; never nil).
	// Admission and the scorers build a Queue for every endpoint several
	// times a pick, and a copy of the Speed in each was most of its cost.
	Speed *Speed
}

// WorkAhead is the uncached prefill tokens the endpoint must work through
// before a new request: the picker's own backlog (its requests' prompts, which
// it knows exactly, drained at the learned rate), plus the mean prompt for
// each waiting request the telemetry shows beyond the picker's own (other
// pickers' and requests that bypass this one). The picker's own waiting
// requests are in the backlog already: counting them again as waiting × mean
// prompt overstated the work ahead wherever prompts vary in size (one long
// prompt lifts the mean for every small one queued behind it), so endpoints
// with a few small requests queued looked busier than one in the middle of a
// long prefill. fallbackPrompt stands in for the mean before any request was
// sent there.
func WorkAhead(q Queue, fallbackPrompt int) float64 {
	mean := q.MeanPromptTokens
	if mean <= 0 {
		mean = float64(fallbackPrompt)
	}
	if mean <= 0 {
		mean = DefaultPromptTokens
	}
	return q.BacklogTokens + float64(q.OthersWaiting)*mean
}

// PrefillSeconds is the time to prefill work tokens from an empty queue at speed sp.
func (m Model) PrefillSeconds(sp Speed, work float64) float64 {
	rate := sp.PrefillTokensPerSecond
	if rate <= 0 {
		rate = DefaultPriors.PrefillTokensPerSecond
	}
	steps := 1.0
	if m.ChunkTokens > 0 {
		steps += math.Floor(work / float64(m.ChunkTokens))
	}
	return work/rate + steps*sp.DecodeStepSeconds
}

// KVPressure is the multiplicative slowdown expected from a nearly full KV cache.
func (m Model) KVPressure(utilization float64) float64 {
	if m.KVPressureThreshold >= 1 || utilization <= m.KVPressureThreshold {
		return 1
	}
	return 1 + m.KVPressureFactor*(math.Min(utilization, 1)-m.KVPressureThreshold)/(1-m.KVPressureThreshold)
}

// TTFT predicts the time to first token of a request with uncached prompt
// tokens on an endpoint with queue q, given the KV utilisation estimate. While a request of the
// picker's awaits its first token there, the step that will produce it is
// running or about to: a new request waits for that step's end before its
// own, one decode step more than the backlog's tokens (which drain at the
// prefill rate alone) account for.
func (m Model) TTFT(q Queue, uncached int, fallbackPrompt int, kvUtilization float64) float64 {
	ahead := WorkAhead(q, fallbackPrompt)
	work := ahead + float64(uncached) + m.joiningTokens(q, ahead, uncached)
	t := m.PrefillSeconds(*q.Speed, work)
	if q.PendingFirstToken > 0 {
		t += q.Speed.DecodeStepSeconds
	}
	return t * m.KVPressure(kvUtilization)
}

// joiningTokens is the prompt tokens expected to join the step that
// prefills a new request: a step takes every prompt waiting when it starts,
// up to the chunk budget, so those that arrive while the work ahead drains
// are prefilled with the request's own before its first token. On a slow GPU
// with a large budget this is most of the wait: an A10G's step with one
// prompt lasts a second, the next takes the three or four that came
// meanwhile, and requests waited 0.8 s more than the work ahead of them took
// at the median (mixed-gpu at twice its capacity, des).
func (m Model) joiningTokens(q Queue, ahead float64, uncached int) float64 {
	room := float64(m.ChunkTokens) - ahead - float64(uncached)
	rate := q.Speed.PrefillTokensPerSecond
	if m.ChunkTokens <= 0 || room <= 0 || rate <= 0 || q.ArrivingTokensPerSecond <= 0 {
		return 0
	}
	return math.Min(room, q.ArrivingTokensPerSecond*ahead/rate)
}

// DrainSeconds predicts when the queue q will have been worked off.
func (m Model) DrainSeconds(q Queue, fallbackPrompt int) float64 {
	return m.PrefillSeconds(*q.Speed, WorkAhead(q, fallbackPrompt))
}

// InterTokenWith predicts the mean time between tokens of the streams on an
// endpoint at speed sp once a request with uncached prompt tokens joins it,
// its KV cache then at use kvWith (0..1) if kvKnown: the learned mean, moved
// along the learned line of time between tokens against KV use
// (Speed.InterTokenPerKVUse) from the use it was learned at to kvWith, plus
// the new prompt's prefill, which every stream there waits out, spread over
// a stream's life (the mean output tokens). A long prompt sent to an
// endpoint whose tokens already come near the bound pushes every stream
// there over it; a short one barely moves them. The mean never drops below
// a decode step for a cache emptier than it was learned at.
func (m Model) InterTokenWith(sp Speed, uncached int, kvWith float64, kvKnown bool) float64 {
	t := sp.InterTokenSeconds
	if kvKnown && sp.InterTokenPerKVUse > 0 {
		t = max(t+sp.InterTokenPerKVUse*(kvWith-sp.InterTokenKVUse), min(t, sp.DecodeStepSeconds))
	}
	rate := sp.PrefillTokensPerSecond
	if rate <= 0 || uncached <= 0 {
		return t
	}
	added := float64(uncached) / rate / sp.StreamLife()
	if m.ChunkTokens > 0 {
		// A stream whose whole life falls in the prefill waits out one step
		// of a full chunk per token, no more.
		added = math.Min(added, float64(m.ChunkTokens)/rate)
	}
	return t + added
}

// DefaultOutputTokens stands for a stream's life, in tokens, before any
// request completed on an endpoint.
const DefaultOutputTokens = 128.0
