package latency

import "math"

// Speed is what the picker has learned about how fast an endpoint works.
type Speed struct {
	// PrefillTokensPerSecond is the rate at which the endpoint works through
	// uncached prompt tokens (queued ones included).
	PrefillTokensPerSecond float64
	// DecodeStepSeconds is the endpoint's typical engine step (the median time
	// between two tokens of a sequence): the overhead every step adds to a
	// prefill, and the pace of decoding when no prompt competes.
	DecodeStepSeconds float64
	// InterTokenSeconds is the mean time between two tokens, prompt chunks
	// sharing the steps included: what a new stream's time per token would be.
	InterTokenSeconds float64
	// InterTokenKVUse is the mean KV-cache use (0..1) over the steps behind
	// InterTokenSeconds; InterTokenPerKVUse how much the time between tokens
	// grows with it, in seconds per whole cache (0: not known). A decode step
	// reads every running sequence's context, so a fuller cache means slower
	// tokens for every stream there.
	InterTokenKVUse    float64
	InterTokenPerKVUse float64
	// AdapterLoadSeconds is the first-token delay beyond the predicted prefill
	// of requests whose LoRA adapter was not running there: the expected cost of
	// loading an adapter (resident idle adapters make it lower than a load).
	AdapterLoadSeconds float64
	// RequestSeconds is the mean time from pick to completion.
	RequestSeconds float64
	// OutputTokens is the mean output tokens of the requests completed
	// there: the life of a stream, in tokens (0: none completed yet).
	OutputTokens float64
	// StreamSpread is the 99th percentile (the second slowest) of the latest
	// 100 finished streams' time per output token over InterTokenSeconds at
	// their end: how far the slow streams run from the mean (0: none
	// finished). SpreadSamples counts the streams seen.
	StreamSpread  float64
	SpreadSamples int
	// PrefillSamples, DecodeSamples, AdapterLoadSamples and RequestSamples count
	// the observations behind each figure; zero means it is unknown (the prior).
	PrefillSamples     int
	DecodeSamples      int
	AdapterLoadSamples int
	RequestSamples     int
}

// StreamLife is the mean output tokens of the requests completed there, or
// DefaultOutputTokens before any did.
func (s Speed) StreamLife() float64 {
	if s.OutputTokens > 0 {
		return math.Max(s.OutputTokens, 1)
	}
	return DefaultOutputTokens
}

// MeasuredSamples is the first tokens after which the prefill rate is the
// endpoint's own: before, it is blended with the (optimistic) prior.
const MeasuredSamples = 3

// Measured reports whether both the prefill rate and the decode step come
// from the endpoint's own observations rather than the priors.
func (s Speed) Measured() bool { return s.PrefillSamples >= MeasuredSamples && s.DecodeSamples > 0 }

// Priors are the speeds assumed for an endpoint before any observation. They
// are deliberately optimistic so that a new endpoint receives traffic and is
// measured quickly.
type Priors struct {
	PrefillTokensPerSecond float64
	DecodeStepSeconds      float64
}

// DefaultPriors is roughly a current data-centre GPU serving an 8B model.
var DefaultPriors = Priors{PrefillTokensPerSecond: 20000, DecodeStepSeconds: 0.010}
