// Package weightedrandom samples endpoints with probability proportional to
// their total score.
package weightedrandom

import (
	"slices"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/internal/rounds"
)

// Type is the plugin's type name.
const Type = "weighted-random-picker"

// New is the registry factory; the picker has no parameters and no state.
var New = scheduling.StatelessPicker(Type, pick)

// pick draws n distinct candidates, each draw proportional to the totals of
// those not drawn yet (uniform when they are all zero). Spreading by score
// avoids herding when many requests are scheduled on the same stale sample.
func pick(c *scheduling.Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int {
	return rounds.Pick(dst, n, len(cands), func(chosen []int) int {
		sum, left := 0.0, 0
		for i := range cands {
			if !slices.Contains(chosen, i) {
				sum += totals[i]
				left++
			}
		}
		pick := -1
		if sum > 0 {
			r := c.Rand.Float64() * sum
			for i := range cands {
				if slices.Contains(chosen, i) || totals[i] <= 0 {
					continue
				}
				pick = i
				if r < totals[i] {
					break
				}
				r -= totals[i]
			}
		} else {
			k := c.Rand.IntN(left)
			for i := range cands {
				if slices.Contains(chosen, i) {
					continue
				}
				if k == 0 {
					pick = i
					break
				}
				k--
			}
		}
		return pick
	})
}
