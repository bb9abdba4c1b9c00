// Package fairshare keeps every healthy endpoint in use: an endpoint whose
// share of the picks has fallen under a floor is owed the next request that
// is cheap for it and that it can serve within the route's SLO.
//
// Ranking by predicted latency alone sends a slow GPU almost nothing while a
// faster one has room (a mixed H100/A10G fleet gave the A10Gs 3% of an equal
// share): its speed is then measured from a handful of requests, a pause or a
// restart leaves it unmeasured for long, and capacity the fleet pays for
// waits idle until a burst finds it cold. The floor spends that capacity on
// the requests that cost it least: short prompts whose prefix no other
// endpoint holds, predicted to get their first token well within the SLO and
// their tokens within it, so requests sent under the floor still count as
// goodput.
package fairshare

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "fair-share-floor"

// Parameters of the floor.
type Parameters struct {
	// Floor is the share of an equal share of the picks (the candidates' mean
	// pick rate over datastore.PickRateWindow) under which an endpoint is
	// owed picks (default 0.3: the floor acts only when a request suits the
	// endpoint, so over a run an endpoint ends a little under it; at 0.25 a
	// mixed H100/A10G fleet's A10Gs ended at 0.19-0.24).
	Floor float64 `json:"floor"`
	// SLO is the promise to keep (unset: the route's, as admission has it,
	// or admission.DefaultSLO): a request goes to an endpoint under the
	// floor only if its first token is predicted there within TTFTBudget of
	// slo.ttftSeconds and the endpoint's time between tokens is within
	// TPOTBudget of slo.tpotSeconds.
	SLO admission.SLO `json:"slo"`
	// TTFTBudget and TPOTBudget are those fractions (defaults 0.15 and 0.6):
	// below the SLO, so that the requests the floor moves keep their
	// latency near the fleet's rather than just inside the promise. (At
	// 0.25, the A10Gs' 0.5 s first tokens made up half the slowest 1% of a
	// mixed fleet's and its P99 rose from 0.41 to 0.50 s; at 0.15 it stays.)
	TTFTBudget float64 `json:"ttftBudget"`
	TPOTBudget float64 `json:"tpotBudget"`
}

// Defaults are the parameters a configuration does not set.
var Defaults = Parameters{Floor: 0.3, TTFTBudget: 0.15, TPOTBudget: 0.6}

// minWindowPicks is the mean picks per candidate in the window below which
// shares say nothing yet (a picker just started, or a trickle of traffic).
const minWindowPicks = 4

// Scorer scores 1 the endpoint owed this request (the one furthest under
// the floor among those it suits) and 0 every other, so that with a weight
// above the other scorers' together it takes the request; with no endpoint
// under the floor, or none this request suits, every score is 0 and the
// others decide.
type Scorer struct {
	scheduling.Named
	p Parameters
	// routeSLO says the parameters named no SLO, so the route's applies.
	routeSLO bool
}

var (
	_ scheduling.Scorer      = (*Scorer)(nil)
	_ admission.RouteSLOUser = (*Scorer)(nil)
)

// UseRouteSLO implements admission.RouteSLOUser: the floor keeps the
// route's promise unless its parameters name one.
func (s *Scorer) UseRouteSLO(slo admission.SLO) {
	if s.routeSLO {
		s.p.SLO = slo
	}
}

// New is the registry factory.
var New = scheduling.WithParameters(Type, Defaults, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	if !(p.Floor >= 0 && p.Floor <= 1) {
		return nil, fmt.Errorf("floor must be in [0, 1], got %v", p.Floor)
	}
	routeSLO := p.SLO == admission.SLO{}
	if routeSLO {
		p.SLO = admission.DefaultSLO
	} else if !(p.SLO.TTFTSeconds > 0) || !(p.SLO.TPOTSeconds > 0) {
		return nil, fmt.Errorf("slo.ttftSeconds and slo.tpotSeconds must both be > 0 (or both unset for the route's SLO), got %v and %v", p.SLO.TTFTSeconds, p.SLO.TPOTSeconds)
	}
	if !(p.TTFTBudget > 0 && p.TTFTBudget <= 1) || !(p.TPOTBudget > 0 && p.TPOTBudget <= 1) {
		return nil, fmt.Errorf("ttftBudget and tpotBudget must be in (0, 1] (fractions of the SLO), got %v and %v", p.TTFTBudget, p.TPOTBudget)
	}
	return &Scorer{Named: n, p: p, routeSLO: routeSLO}, nil
})

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	owed := s.Owed(c, cands)
	for i := range scores {
		scores[i] = 0
	}
	if owed >= 0 {
		scores[owed] = 1
	}
}

// Owed is the index in cands of the endpoint owed the request, or -1.
func (s *Scorer) Owed(c *scheduling.Cycle, cands []*datastore.View) int {
	if len(cands) < 2 || s.p.Floor == 0 {
		return -1
	}
	var total, meanPrompt float64
	var prompts int
	for _, v := range cands {
		total += v.PickRate
		if v.MeanPromptTokens > 0 {
			meanPrompt += v.MeanPromptTokens
			prompts++
		}
	}
	equal := total / float64(len(cands))
	if equal*datastore.PickRateWindow.Seconds() < minWindowPicks {
		return -1
	}
	if prompts > 0 {
		meanPrompt /= float64(prompts)
	}
	slowest, measured := slowestSpeed(cands)
	owed := -1
	for i, v := range cands {
		if v.Stale || v.Avoid || v.PickRate >= s.p.Floor*equal || owed >= 0 && v.PickRate >= cands[owed].PickRate {
			continue
		}
		if !v.Speed.Measured() {
			// Its speed is still the optimistic prior: taken at its word, a
			// slow GPU looked fast and was handed a burst it took seconds to
			// prefill. Until measured it is judged as the slowest measured
			// candidate (and not at all while none is).
			if !measured {
				continue
			}
			assumed := *v
			assumed.Speed.PrefillTokensPerSecond = slowest.PrefillTokensPerSecond
			assumed.Speed.DecodeStepSeconds = slowest.DecodeStepSeconds
			assumed.Speed.InterTokenSeconds = slowest.InterTokenSeconds
			v = &assumed
		}
		if s.suits(c, cands, v, meanPrompt) {
			owed = i
		}
	}
	return owed
}

// slowestSpeed is the lowest prefill rate and the longest decode step and
// time between tokens among the measured candidates, and whether any is
// measured.
func slowestSpeed(cands []*datastore.View) (latency.Speed, bool) {
	var slow latency.Speed
	measured := false
	for _, v := range cands {
		if !v.Speed.Measured() {
			continue
		}
		if !measured || v.Speed.PrefillTokensPerSecond < slow.PrefillTokensPerSecond {
			slow.PrefillTokensPerSecond = v.Speed.PrefillTokensPerSecond
		}
		slow.DecodeStepSeconds = max(slow.DecodeStepSeconds, v.Speed.DecodeStepSeconds)
		slow.InterTokenSeconds = max(slow.InterTokenSeconds, v.Speed.InterTokenSeconds)
		measured = true
	}
	return slow, measured
}

// suits reports whether the request is cheap for v and v can serve it
// within the budgets: no longer than the fleet's mean prompt, no other
// candidate holding more of its prefix (there it would cost less), its
// adapter (if any) resident on v, its first token predicted within the TTFT
// budget and v's time between tokens within the TPOT budget.
func (s *Scorer) suits(c *scheduling.Cycle, cands []*datastore.View, v *datastore.View, meanPrompt float64) bool {
	uncached := c.UncachedTokens(v)
	if meanPrompt > 0 && float64(uncached) > meanPrompt {
		return false
	}
	for _, o := range cands {
		if o != v && c.UncachedTokens(o)+c.BlockTokens() < uncached {
			return false
		}
	}
	if a := c.Request.Adapter; a != "" && v.AdapterPlace(a) != datastore.AdapterResident {
		return false
	}
	if v.Speed.InterTokenSeconds > s.p.TPOTBudget*s.p.SLO.TPOTSeconds {
		return false
	}
	kv, _ := v.KVUtilization()
	return c.Latency.TTFT(v.Queue(), uncached, c.PromptTokens, kv) <= s.p.TTFTBudget*s.p.SLO.TTFTSeconds
}
