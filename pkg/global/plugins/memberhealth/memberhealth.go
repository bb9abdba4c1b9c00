// Package memberhealth keeps the global picker's requests off member clusters
// that are out of rotation (failed checks, ejected by outlier detection; see
// pkg/global/health), and lets a member that came back take its share
// gradually: during slow start it stays a candidate with probability equal to
// its weight, so the traffic that spilled elsewhere returns without a burst.
package memberhealth

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "member-health"

// New is the registry factory; the filter has no parameters and no state.
var New = scheduling.StatelessFilter(Type, filter)

// filter drops members out of rotation, and members in slow start with
// probability 1 − weight. When only members in slow start were left and all
// were drawn out, they are kept: slow start shapes a share, it never refuses.
func filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	t := member.From(c)
	out := in[:0]
	warming := 0
	for _, v := range in {
		s := t.Of(v)
		switch {
		case s == nil || !s.Health.InRotation:
		case s.Health.Weight >= 1 || c.Rand.Float64() < s.Health.Weight:
			out = append(out, v)
		default:
			warming++
		}
	}
	if len(out) > 0 {
		return out
	}
	// Nothing was kept, so in is intact.
	if warming > 0 {
		for _, v := range in {
			if s := t.Of(v); s != nil && s.Health.InRotation {
				out = append(out, v)
			}
		}
		return out
	}
	t.RejectEach("no member cluster is in rotation", in, func(s *member.State) string { return s.Health.Reason })
	return out
}
