// Package load scores endpoints by how loaded they are, the least loaded
// best: the queue scorer by the requests waiting, the running-requests scorer
// by all the requests an endpoint holds.
package load

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// The plugins' type names.
const (
	// QueueType gives 1 to the shortest queue and 0 to the longest (linear
	// between), counting requests sent since the last telemetry sample as
	// queued: datastore.View.WaitingEstimate.
	QueueType = "queue"
	// RunningRequestsType gives 1 to the endpoint with the fewest requests
	// (running plus waiting, corrected with picks and completions since the
	// sample) and 0 to the most loaded, least-request balancing as a scorer:
	// datastore.View.LoadEstimate.
	RunningRequestsType = "running-requests"
)

// The registry factories; neither scorer takes parameters.
var (
	NewQueue           = lowerIsBetterScorer(QueueType, func(v *datastore.View) float64 { return float64(v.WaitingEstimate()) })
	NewRunningRequests = lowerIsBetterScorer(RunningRequestsType, func(v *datastore.View) float64 { return float64(v.LoadEstimate()) })
)

// Scorer scores candidates by one quantity of their views, the lowest best
// (lowerIsBetter); a stale endpoint scores 0.
type Scorer struct {
	scheduling.Named
	value func(*datastore.View) float64
}

var _ scheduling.Scorer = (*Scorer)(nil)

// lowerIsBetterScorer is the registry factory of a Scorer type over value.
func lowerIsBetterScorer(typ string, value func(*datastore.View) float64) scheduling.Factory {
	return scheduling.NoParameters(typ, func(n scheduling.Named) scheduling.Plugin { return &Scorer{Named: n, value: value} })
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	lowerIsBetter(cands, scores, s.value)
}

// lowerIsBetter writes min-max normalised scores: the lowest value scores 1,
// the highest 0; all equal scores 1. Stale endpoints score 0 and do not take
// part in the range.
func lowerIsBetter(cands []*datastore.View, scores []float64, value func(*datastore.View) float64) {
	lo, hi := 0.0, 0.0
	first := true
	for i, v := range cands {
		if v.Stale {
			continue
		}
		x := value(v)
		scores[i] = x
		if first || x < lo {
			lo = x
		}
		if first || x > hi {
			hi = x
		}
		first = false
	}
	for i, v := range cands {
		switch {
		case v.Stale:
			scores[i] = 0
		case hi == lo:
			scores[i] = 1
		default:
			scores[i] = (hi - scores[i]) / (hi - lo)
		}
	}
}
