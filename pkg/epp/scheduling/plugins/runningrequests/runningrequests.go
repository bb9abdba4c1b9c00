// Package runningrequests scores endpoints by their total request load.
package runningrequests

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/internal/norm"
)

// Type is the plugin's type name.
const Type = "running-requests"

// Scorer gives 1 to the endpoint with the fewest requests (running plus
// waiting, corrected with picks and completions since the sample) and 0 to the
// most loaded: least-request balancing as a scorer.
type Scorer struct{ scheduling.Named }

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory; the scorer has no parameters.
var New = scheduling.NoParameters(Type, func(n scheduling.Named) scheduling.Plugin { return &Scorer{n} })

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	norm.LowerIsBetter(cands, scores, func(v *datastore.View) float64 { return float64(v.LoadEstimate()) })
}
