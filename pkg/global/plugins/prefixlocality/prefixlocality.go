// Package prefixlocality scores member clusters by how much of the request's
// prompt their digest says they hold: the leading prompt blocks found in the
// member's digest over the prompt's blocks. It is what keeps a conversation's
// turns in the cluster that holds its prefix.
package prefixlocality

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "member-prefix-locality"

// Scorer scores matched blocks / prompt blocks, in [0, 1].
type Scorer struct {
	scheduling.PrefixMatch
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory. Its one parameter is minMatchTokens
// (scheduling.PrefixMatchParameters); 0 means no minimum.
var New = scheduling.WithMinMatch(Type, 0, func(m scheduling.PrefixMatch) scheduling.Plugin { return &Scorer{m} })

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
		if matched < s.MinMatchTokens || matched == 0 || blocks == 0 {
			continue
		}
		scores[i] = float64(matched/st.Summary.Digest.BlockTokens) / float64(blocks)
	}
}
