// Package kvcacheutilization scores endpoints by free KV-cache space.
package kvcacheutilization

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "kv-cache-utilization"

// New is the registry factory; the scorer has no parameters and no state.
var New = scheduling.StatelessScorer(Type, score)

// score gives 1 − utilisation (datastore.View.KVUtilization: corrected for
// prompts sent since the sample). Unknown utilisation scores 0.5; stale
// endpoints 0.
func score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	for i, v := range cands {
		if v.Stale {
			scores[i] = 0
			continue
		}
		u, ok := v.KVUtilization()
		if !ok {
			scores[i] = 0.5
			continue
		}
		scores[i] = 1 - u
	}
}
