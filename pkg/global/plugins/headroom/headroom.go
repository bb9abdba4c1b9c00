// Package headroom scores member clusters by the KV-cache room they have
// left, in tokens: members differ in size, and a large cluster at 60% has
// more room for new conversations than a small one at 40%. The KV use is the
// member's view's estimate (datastore.View.KVUtilization: the summary raised
// by the prompts sent since), so a burst does not pile onto the member that
// looked emptiest.
package headroom

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "member-headroom"

// New is the registry factory; the scorer has no parameters and no state.
var New = scheduling.StatelessScorer(Type, score)

func capacity(v *datastore.View) float64 {
	return float64(v.Metrics.NumGPUBlocks) * float64(v.Metrics.BlockSizeTokens)
}

// score scores free KV tokens relative to the roomiest candidate. When a
// candidate's capacity is unknown, every candidate is scored by its free
// share instead; unknown KV use scores 0.5 and a stale member 0.
func score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	byTokens := true
	for _, v := range cands {
		if _, ok := v.KVUtilization(); ok && !v.Stale && capacity(v) <= 0 {
			byTokens = false
		}
	}
	best := 0.0
	for i, v := range cands {
		u, ok := v.KVUtilization()
		switch {
		case v.Stale:
			scores[i] = 0
		case !ok:
			scores[i] = -1 // unknown
		case byTokens:
			scores[i] = (1 - u) * capacity(v)
		default:
			scores[i] = 1 - u
		}
		best = max(best, scores[i])
	}
	for i := range scores {
		switch {
		case scores[i] < 0:
			scores[i] = 0.5
		case best > 0:
			scores[i] /= best
		}
	}
}
