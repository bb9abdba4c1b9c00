// Package prefixcache scores endpoints by how much of the prompt they are
// believed to hold in their prefix cache (from the picker's own prefix index).
package prefixcache

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "prefix-cache"

// Scorer gives matched blocks / prompt blocks when the match is long enough.
type Scorer struct {
	scheduling.PrefixMatch
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory. Its one parameter is minMatchTokens
// (scheduling.PrefixMatchParameters), at least 1.
var New = scheduling.WithMinMatch(Type, 1, func(m scheduling.PrefixMatch) scheduling.Plugin { return &Scorer{m} })

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	total := c.PrefixBlocks()
	if total == 0 {
		return
	}
	for i, v := range cands {
		if m := c.MatchedBlocks(v); m > 0 && m*c.BlockTokens() >= s.MinMatchTokens {
			scores[i] = float64(m) / float64(total)
		}
	}
}
