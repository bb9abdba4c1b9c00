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
// most loaded: least-request balancing as a scorer. It is a norm.Scorer over
// datastore.View.LoadEstimate.
type Scorer = norm.Scorer

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory; the scorer has no parameters.
var New = norm.LowerIsBetterScorer(Type, func(v *datastore.View) float64 { return float64(v.LoadEstimate()) })
