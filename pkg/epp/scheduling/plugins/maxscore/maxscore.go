// Package maxscore ranks endpoints by total score, breaking ties at random.
package maxscore

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "max-score-picker"

// tie is how close two totals must be to count as equal.
const tie = 1e-9

// Picker returns the n best candidates; among equal totals the order is random,
// so equally good endpoints share the load.
type Picker struct{ scheduling.Named }

// New is the registry factory; the picker has no parameters.
func New(name string, params scheduling.Parameters) (scheduling.Plugin, error) {
	if err := params.Decode(&struct{}{}); err != nil {
		return nil, err
	}
	return &Picker{scheduling.Named{TypeName: Type, InstanceName: name}}, nil
}

// Pick implements scheduling.Picker by n rounds of selection (n is small).
func (p *Picker) Pick(c *scheduling.Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int {
	n = min(n, len(cands))
	base := len(dst)
	for len(dst)-base < n {
		best, ties := -1, 0
		for i := range cands {
			if taken(dst[base:], i) {
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
		dst = append(dst, best)
	}
	return dst
}

func taken(picked []int, i int) bool {
	for _, j := range picked {
		if j == i {
			return true
		}
	}
	return false
}
