// Package queue scores endpoints by how few requests wait in their queue.
package queue

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/internal/norm"
)

// Type is the plugin's type name.
const Type = "queue"

// New is the registry factory of the scorer (a norm.Scorer; no parameters): it
// gives 1 to the shortest queue and 0 to the longest (linear between),
// counting requests sent since the last telemetry sample as queued. A stale
// endpoint scores 0.
var New = norm.LowerIsBetterScorer(Type, func(v *datastore.View) float64 { return float64(v.WaitingEstimate()) })
