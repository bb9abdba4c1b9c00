// Package maxscore ranks endpoints by total score, breaking ties at random.
package maxscore

import (
	"slices"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/internal/rounds"
)

// Type is the plugin's type name.
const Type = "max-score-picker"

// tie is how close two totals must be to count as equal.
const tie = 1e-9

// New is the registry factory; the picker has no parameters and no state.
var New = scheduling.StatelessPicker(Type, pick)

// pick returns the n best candidates, by n rounds of selection (n is small);
// among equal totals the order is random, so equally good endpoints share the
// load.
func pick(c *scheduling.Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int {
	return rounds.Pick(dst, n, len(cands), func(chosen []int) int {
		best, ties := -1, 0
		for i := range cands {
			if slices.Contains(chosen, i) {
				continue
			}
			switch {
			case best < 0 || totals[i] > totals[best]+tie:
				best, ties = i, 1
			case totals[i] >= totals[best]-tie:
				// Reservoir sampling keeps a uniform choice among ties.
				ties++
				if c.Rand.IntN(ties) == 0 {
					best = i
				}
			}
		}
		return best
	})
}
