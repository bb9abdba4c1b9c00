// Package proximity scores member clusters by how near their region is to
// the region the request comes from (the x-igw-client-region header set by
// the hub's edge, else the hub replica's own region), by a table of one-way
// network delays between regions: the managed global router's "region
// proximity" term.
package proximity

import (
	"fmt"
	"time"

	"github.com/igw-dev/igw/internal/jsontime"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/wire"
)

// Type is the plugin's type name.
const Type = "region-proximity"

// Delay is the one-way delay between two regions, both ways.
type Delay struct {
	From  string            `json:"from"`
	To    string            `json:"to"`
	Delay jsontime.Duration `json:"delay"`
}

// Parameters of the scorer (the benchmark scenarios' network section has the same shape).
type Parameters struct {
	Delays []Delay `json:"delays"`
	// SameRegion is the delay within a region (default 1ms); Unknown the delay
	// between regions the table does not list (default 100ms).
	SameRegion *jsontime.Duration `json:"sameRegion"`
	Unknown    *jsontime.Duration `json:"unknown"`
	// Tolerance is added before the ratio (default 5ms).
	Tolerance *jsontime.Duration `json:"tolerance"`
}

type pair struct{ a, b string }

// Scorer scores (best+tolerance)/(delay+tolerance).
type Scorer struct {
	scheduling.Named
	delays                   map[pair]time.Duration
	same, unknown, tolerance time.Duration
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	s := &Scorer{Named: n, delays: map[pair]time.Duration{},
		same: time.Millisecond, unknown: 100 * time.Millisecond, tolerance: 5 * time.Millisecond}
	for _, o := range []struct {
		dst *time.Duration
		src *jsontime.Duration
	}{{&s.same, p.SameRegion}, {&s.unknown, p.Unknown}, {&s.tolerance, p.Tolerance}} {
		if o.src != nil {
			*o.dst = o.src.Duration
		}
	}
	for i, d := range p.Delays {
		if d.From == "" || d.To == "" {
			return nil, fmt.Errorf("delays[%d]: from and to are required", i)
		}
		if _, dup := s.delays[pair{d.From, d.To}]; dup {
			return nil, fmt.Errorf("delays[%d]: %s-%s is listed twice (delays are symmetric)", i, d.From, d.To)
		}
		s.delays[pair{d.From, d.To}] = d.Delay.Duration
		s.delays[pair{d.To, d.From}] = d.Delay.Duration
	}
	return s, nil
})

// Delay is the one-way delay between regions a and b.
func (s *Scorer) Delay(a, b string) time.Duration {
	if d, ok := s.delays[pair{a, b}]; ok {
		return d
	}
	if a == b {
		return s.same
	}
	return s.unknown
}

// Origin is the region the request comes from.
func Origin(c *scheduling.Cycle) string {
	if r := c.Request.Headers[wire.HeaderClientRegion]; r != "" {
		return r
	}
	if t := member.From(c); t != nil {
		return t.Origin
	}
	return ""
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	t, origin := member.From(c), Origin(c)
	member.ScoreByCost(cands, scores, s.tolerance.Seconds(), func(v *datastore.View) (float64, bool) {
		st := t.Of(v)
		if st == nil {
			return 0, false
		}
		return s.Delay(origin, st.Region).Seconds(), true
	})
}
