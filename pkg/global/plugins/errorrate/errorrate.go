// Package errorrate scores member clusters by how rarely their requests fail:
// the larger of the failure rate the member reports (its pickers' view of its
// own servers) and the one the hub observes on the requests it sent there
// (which also sees the network and the member's gateway).
package errorrate

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "member-error-rate"

// Parameters of the scorer.
type Parameters struct {
	// MinRequests: a rate over fewer requests counts as 0 (default 10), so
	// that one failure among two requests does not halve a member's score.
	MinRequests int `json:"minRequests"`
}

// Scorer scores 1 − failure rate.
type Scorer struct {
	scheduling.Named
	minRequests int
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{MinRequests: 10}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	if p.MinRequests < 1 {
		return nil, fmt.Errorf("minRequests must be at least 1")
	}
	return &Scorer{Named: n, minRequests: p.MinRequests}, nil
})

// Rate is the failure rate counted for s.
func (s *Scorer) Rate(st *member.State) float64 {
	rate := 0.0
	if m := st.Summary; m != nil && m.Requests >= s.minRequests {
		rate = m.ErrorRate
	}
	if st.Health.Requests >= s.minRequests {
		rate = max(rate, st.Health.ErrorRate)
	}
	return rate
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	t := member.From(c)
	for i, v := range cands {
		scores[i] = 0
		if st := t.Of(v); st != nil {
			scores[i] = 1 - s.Rate(st)
		}
	}
}
