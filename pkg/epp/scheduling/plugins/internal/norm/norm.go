// Package norm turns per-endpoint quantities into scores in [0, 1].
package norm

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Scorer scores candidates by one quantity of their views, the lowest best
// (LowerIsBetter). The queue and running-requests scorers are both this, over
// different quantities.
type Scorer struct {
	scheduling.Named
	value func(*datastore.View) float64
}

var _ scheduling.Scorer = (*Scorer)(nil)

// LowerIsBetterScorer is the registry factory of a Scorer type over value; it
// takes no parameters.
func LowerIsBetterScorer(typ string, value func(*datastore.View) float64) scheduling.Factory {
	return scheduling.NoParameters(typ, func(n scheduling.Named) scheduling.Plugin { return &Scorer{Named: n, value: value} })
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	LowerIsBetter(cands, scores, s.value)
}

// LowerIsBetter writes min-max normalised scores: the lowest value scores 1,
// the highest 0; all equal scores 1. Stale endpoints score 0 and do not take
// part in the range.
func LowerIsBetter(cands []*datastore.View, scores []float64, value func(*datastore.View) float64) {
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
