// Package predictedttft scores member clusters by the time to first token
// predicted for the request there, in seconds, network included: the round
// trip from the hub, the wait for the member's queued prefill work (drained at
// its summed prefill rate since the summary, plus what the hub sent since),
// the request's own uncached prompt (less what the member's digest holds) at
// the member's fastest endpoint's rate, and one decode step, all but the round
// trip times the member's KV pressure.
package predictedttft

import (
	"fmt"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "member-predicted-ttft"

// Parameters of the scorer.
type Parameters struct {
	// ToleranceSeconds is added to every prediction before the ratio (default 0.01).
	ToleranceSeconds float64 `json:"toleranceSeconds"`
	// UnknownRTTSeconds stands for the round trip of a member not measured yet
	// (default: the largest measured among the candidates, or 0.1 s).
	UnknownRTTSeconds *float64 `json:"unknownRTTSeconds"`
}

// Scorer scores (best+tolerance)/(predicted+tolerance). Members whose summary
// is stale or missing score 0.
type Scorer struct {
	scheduling.Named
	tolerance  float64
	unknownRTT float64 // < 0: from the candidates
}

var _ scheduling.Scorer = (*Scorer)(nil)

// defaultUnknownRTT is the round trip assumed when no candidate's is measured.
const defaultUnknownRTT = 0.1

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{ToleranceSeconds: 0.01}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	s := &Scorer{Named: n, tolerance: p.ToleranceSeconds, unknownRTT: -1}
	if p.UnknownRTTSeconds != nil {
		s.unknownRTT = *p.UnknownRTTSeconds
	}
	if s.tolerance < 0 || (p.UnknownRTTSeconds != nil && s.unknownRTT < 0) {
		return nil, fmt.Errorf("toleranceSeconds and unknownRTTSeconds must not be negative")
	}
	return s, nil
})

// Predict is the predicted time to first token at v's member, in seconds;
// false when its summary is missing or stale. unknownRTT stands for an
// unmeasured round trip.
func Predict(c *scheduling.Cycle, v *datastore.View, unknownRTT float64) (float64, bool) {
	t := member.From(c)
	s := t.Of(v)
	if s == nil || s.Summary == nil || v.Stale {
		return 0, false
	}
	m := s.Summary
	total := m.PrefillTokensPerSecond
	if total <= 0 {
		total = latency.DefaultPriors.PrefillTokensPerSecond * float64(max(1, m.ReadyEndpoints))
	}
	one := m.EndpointPrefillTokensPerSecond
	if one <= 0 {
		one = total / float64(max(1, m.ReadyEndpoints))
	}
	queued := max(0, m.QueuedPrefillTokens+s.SentTokens-total*s.SummaryAge(c.Now).Seconds())
	uncached := c.PromptTokens - t.MatchedTokens(c, v)
	work := queued/total + float64(uncached)/one + m.DecodeStepSeconds
	kv, _ := v.KVUtilization()
	rtt := unknownRTT
	if s.RTTKnown {
		rtt = s.RTT.Seconds()
	}
	return rtt + work*c.Latency.KVPressure(kv), true
}

// UnknownRTT is the round trip assumed for candidates not measured yet: the
// largest measured one among cands, or fallback when none is.
func UnknownRTT(c *scheduling.Cycle, cands []*datastore.View, fallback float64) float64 {
	t := member.From(c)
	var worst time.Duration
	known := false
	for _, v := range cands {
		if s := t.Of(v); s != nil && s.RTTKnown {
			worst, known = max(worst, s.RTT), true
		}
	}
	if !known {
		return fallback
	}
	return worst.Seconds()
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	rtt := s.unknownRTT
	if rtt < 0 {
		rtt = UnknownRTT(c, cands, defaultUnknownRTT)
	}
	member.ScoreByCost(cands, scores, s.tolerance, func(v *datastore.View) (float64, bool) { return Predict(c, v, rtt) })
}
