// Package latency is the picker's timing model of a model server, shared by the
// predicted-latency scorer and admission control. It follows the form of
// calibrated LLM-serving simulators: a server works through queued prefill
// tokens at a prefill rate, in steps of at most a chunk budget, and every step
// also carries the decode batch, which costs about one decode step. Both rates
// are learned per endpoint online (see datastore.EndpointState).
package latency

import (
	"math"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

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
func WorkAhead(v *datastore.View, fallbackPrompt int) float64 {
	mean := v.MeanPromptTokens
	if mean <= 0 {
		mean = float64(fallbackPrompt)
	}
	if mean <= 0 {
		mean = DefaultPromptTokens
	}
	return v.BacklogTokens + float64(v.UnaccountedWaiting())*mean
}

// PrefillSeconds is the time to prefill work tokens from an empty queue.
func (m Model) PrefillSeconds(v *datastore.View, work float64) float64 {
	rate := v.Speed.PrefillTokensPerSecond
	if rate <= 0 {
		rate = datastore.DefaultPriors.PrefillTokensPerSecond
	}
	steps := 1.0
	if m.ChunkTokens > 0 {
		steps += math.Floor(work / float64(m.ChunkTokens))
	}
	return work/rate + steps*v.Speed.DecodeStepSeconds
}

// KVPressure is the multiplicative slowdown expected from a nearly full KV cache.
func (m Model) KVPressure(utilization float64) float64 {
	if m.KVPressureThreshold >= 1 || utilization <= m.KVPressureThreshold {
		return 1
	}
	return 1 + m.KVPressureFactor*(math.Min(utilization, 1)-m.KVPressureThreshold)/(1-m.KVPressureThreshold)
}

// TTFT predicts the time to first token of a request with uncached prompt
// tokens on v, given the KV utilisation estimate. While a request of the
// picker's awaits its first token there, the step that will produce it is
// running or about to: a new request waits for that step's end before its
// own, one decode step more than the backlog's tokens (which drain at the
// prefill rate alone) account for.
func (m Model) TTFT(v *datastore.View, uncached int, fallbackPrompt int, kvUtilization float64) float64 {
	work := WorkAhead(v, fallbackPrompt) + float64(uncached)
	t := m.PrefillSeconds(v, work)
	if v.PendingFirstToken > 0 {
		t += v.Speed.DecodeStepSeconds
	}
	return t * m.KVPressure(kvUtilization)
}

// DrainSeconds predicts when v's current queue will have been worked off.
func (m Model) DrainSeconds(v *datastore.View, fallbackPrompt int) float64 {
	return m.PrefillSeconds(v, WorkAhead(v, fallbackPrompt))
}
