// Package regionshaping applies per-region traffic shaping to the requests
// of a client region: while members in that region can take a request, at
// most MaxShare of the region's requests may leave it, and when some do (or
// when none is left at home) they go to the first region of the spill-over
// order that has a candidate. Region pins (data residency) run before it and
// are never widened by it.
package regionshaping

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "region-shaping"

// Window is the time constant over which a region's share of requests sent
// out of it is measured: long enough to hold a cap over bursts, short enough
// that the cap follows the load.
const Window = 10 * time.Second

// Rule shapes the requests whose origin is Region.
type Rule struct {
	Region string `json:"region"`
	// SpillOver lists, in order of preference, where requests go when they
	// leave Region. Empty: wherever the scorers send them.
	SpillOver []string `json:"spillOver,omitempty"`
	// MaxShare caps the share (0..1) of Region's requests that may leave it
	// while members there are candidates. Absent: no cap.
	MaxShare *float64 `json:"maxShare,omitempty"`
}

// Parameters of the filter.
type Parameters struct {
	Regions []Rule `json:"regions"`
}

// Filter keeps a request's candidates within its origin region's rule.
type Filter struct {
	scheduling.Named
	rules map[string]*rule
}

type rule struct {
	Rule
	mu sync.Mutex
	// all and out decay with Window: the region's requests, and those
	// allowed to leave it. out counts every allowance as a departure, so
	// the share that really left stays at or under the cap.
	all, out float64
	at       time.Time
}

var _ scheduling.Filter = (*Filter)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	f := &Filter{Named: n, rules: map[string]*rule{}}
	for i, r := range p.Regions {
		switch {
		case r.Region == "":
			return nil, fmt.Errorf("regions[%d]: region is required", i)
		case f.rules[r.Region] != nil:
			return nil, fmt.Errorf("regions[%d]: region %s has two rules; merge them into one", i, r.Region)
		case slices.Contains(r.SpillOver, "") || slices.Contains(r.SpillOver, r.Region):
			return nil, fmt.Errorf("regions[%d] (%s): spillOver must name other regions, none empty", i, r.Region)
		case r.MaxShare != nil && !(*r.MaxShare >= 0 && *r.MaxShare <= 1):
			return nil, fmt.Errorf("regions[%d] (%s): maxShare %v; want a share from 0 to 1", i, r.Region, *r.MaxShare)
		}
		f.rules[r.Region] = &rule{Rule: Rule{Region: r.Region, SpillOver: slices.Clone(r.SpillOver), MaxShare: r.MaxShare}}
	}
	return f, nil
})

// Filter implements scheduling.Filter.
func (f *Filter) Filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	t := member.From(c)
	r := f.rules[t.Origin]
	if r == nil || len(in) == 0 {
		return in
	}
	home := 0
	for _, v := range in {
		if s := t.Of(v); s != nil && s.Region == r.Region {
			home++
		}
	}
	mayLeave := home == 0 || r.allowLeave(c.Now)
	if !mayLeave {
		return keep(t, in, func(region string) bool { return region == r.Region })
	}
	if len(r.SpillOver) == 0 {
		return in
	}
	// Leaving (or free to): the home region and the first spill-over region
	// with a candidate; with none of those, the rest (availability first).
	for _, next := range r.SpillOver {
		if slices.ContainsFunc(in, func(v *datastore.View) bool { s := t.Of(v); return s != nil && s.Region == next }) {
			return keep(t, in, func(region string) bool { return region == r.Region || region == next })
		}
	}
	return in
}

// allowLeave counts a request of the region and says whether it may leave:
// the decayed share allowed out stays under MaxShare.
func (r *rule) allowLeave(now time.Time) bool {
	if r.MaxShare == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && now.After(r.at) {
		d := math.Exp(-float64(now.Sub(r.at)) / float64(Window))
		r.all, r.out = r.all*d, r.out*d
	}
	if now.After(r.at) {
		r.at = now
	}
	r.all++
	if r.out+1 > *r.MaxShare*r.all {
		return false
	}
	r.out++
	return true
}

func keep(t *member.Table, in []*datastore.View, ok func(region string) bool) []*datastore.View {
	out := in[:0]
	for _, v := range in {
		if s := t.Of(v); s != nil && ok(s.Region) {
			out = append(out, v)
		}
	}
	return out
}
