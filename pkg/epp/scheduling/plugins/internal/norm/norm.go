// Package norm turns per-endpoint quantities into scores in [0, 1].
package norm

import "github.com/igw-dev/igw/pkg/epp/datastore"

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
