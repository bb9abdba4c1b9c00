// Package weightedrandom samples endpoints with probability proportional to
// their total score.
package weightedrandom

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "weighted-random-picker"

// Picker draws n distinct candidates, each draw proportional to the totals of
// those not drawn yet (uniform when they are all zero). Spreading by score
// avoids herding when many requests are scheduled on the same stale sample.
type Picker struct{ scheduling.Named }

// New is the registry factory; the picker has no parameters.
func New(name string, params scheduling.Parameters) (scheduling.Plugin, error) {
	if err := params.Decode(&struct{}{}); err != nil {
		return nil, err
	}
	return &Picker{scheduling.Named{TypeName: Type, InstanceName: name}}, nil
}

// Pick implements scheduling.Picker.
func (p *Picker) Pick(c *scheduling.Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int {
	n = min(n, len(cands))
	base := len(dst)
	for len(dst)-base < n {
		sum, left := 0.0, 0
		for i := range cands {
			if !taken(dst[base:], i) {
				sum += totals[i]
				left++
			}
		}
		pick := -1
		if sum > 0 {
			r := c.Rand.Float64() * sum
			for i := range cands {
				if taken(dst[base:], i) || totals[i] <= 0 {
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
				if taken(dst[base:], i) {
					continue
				}
				if k == 0 {
					pick = i
					break
				}
				k--
			}
		}
		dst = append(dst, pick)
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
