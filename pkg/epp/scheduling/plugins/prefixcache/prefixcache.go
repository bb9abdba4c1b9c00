// Package prefixcache scores endpoints by how much of the prompt they are
// believed to hold in their prefix cache (from the picker's own prefix index).
package prefixcache

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "prefix-cache"

// Parameters of the prefix-cache scorer.
type Parameters struct {
	// MinMatchTokens is the shortest match that counts. Shorter matches score
	// 0: in some traces every request shares its first block, and honouring that
	// would send all traffic to one endpoint. Default 128.
	MinMatchTokens int `json:"minMatchTokens"`
}

// Scorer gives matched blocks / prompt blocks when the match is long enough.
type Scorer struct {
	scheduling.Named
	minMatch int
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{MinMatchTokens: 128}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	if p.MinMatchTokens < 1 {
		return nil, fmt.Errorf("minMatchTokens must be at least 1, got %d", p.MinMatchTokens)
	}
	return &Scorer{Named: n, minMatch: p.MinMatchTokens}, nil
})

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	total := c.PrefixBlocks()
	if total == 0 {
		return
	}
	for i, v := range cands {
		if m := c.MatchedBlocks(v); m > 0 && m*c.BlockTokens() >= s.minMatch {
			scores[i] = float64(m) / float64(total)
		}
	}
}
