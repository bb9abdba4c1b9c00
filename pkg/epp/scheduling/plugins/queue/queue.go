// Package queue scores endpoints by how few requests wait in their queue.
package queue

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/internal/norm"
)

// Type is the plugin's type name.
const Type = "queue"

// Scorer gives 1 to the shortest queue and 0 to the longest (linear between),
// counting requests sent since the last telemetry sample as queued. A stale
// endpoint scores 0. It is a norm.Scorer over
// datastore.View.WaitingEstimate.
type Scorer = norm.Scorer

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory; the scorer has no parameters.
var New = norm.LowerIsBetterScorer(Type, func(v *datastore.View) float64 { return float64(v.WaitingEstimate()) })
