// Package prefixlocality scores member clusters by how much of the request's
// prompt their digest says they hold: the leading prompt blocks found in the
// member's digest over the prompt's blocks. It is what keeps a conversation's
// turns in the cluster that holds its prefix.
package prefixlocality

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "member-prefix-locality"

// Parameters of the scorer.
type Parameters struct {
	// MinMatchTokens: a shorter match scores 0 (default 128), so that a
	// shared system prompt alone does not pull traffic across regions.
	MinMatchTokens int `json:"minMatchTokens"`
}

// Scorer scores matched blocks / prompt blocks, in [0, 1].
type Scorer struct {
	scheduling.Named
	minMatch int
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{MinMatchTokens: 128}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	if p.MinMatchTokens < 0 {
		return nil, fmt.Errorf("minMatchTokens must not be negative")
	}
	return &Scorer{Named: n, minMatch: p.MinMatchTokens}, nil
})

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	t := member.From(c)
	for i, v := range cands {
		scores[i] = 0
		st := t.Of(v)
		if st == nil || st.Summary == nil || st.Summary.Digest == nil {
			continue
		}
		matched := t.MatchedTokens(c, v)
		blocks := t.PromptBlocks(c, st.Summary.Digest.BlockTokens)
		if matched < s.minMatch || matched == 0 || blocks == 0 {
			continue
		}
		scores[i] = float64(matched/st.Summary.Digest.BlockTokens) / float64(blocks)
	}
}
