package director

import (
	"cmp"
	"slices"
	"time"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// bind is late binding's verdict on req (admission.Policy.Bind) when it
// may wait in the picker (queuing) and is not sheddable by priority: a new
// request, or one held by late binding before (place) for waited seconds.
func (d *Director) bind(p *Pipeline, c *cycle, req *scheduling.Request, place *Place, queuing bool, waited float64, now time.Time) (admission.Binding, float64) {
	if !queuing || req.Priority < p.Admission.ShedBelowPriority || place != nil && place.kind != held {
		return admission.NotBound, 0
	}
	return p.Admission.Bind(c.cands, c.PromptTokens, waited, place.mayHold(now), p.Latency, c.Cycle)
}

// startingSoon keeps, of cands, the endpoints that would start the request
// soon (admission.Policy.StartsSoon); all of cands when none would.
func startingSoon(p *Pipeline, c *cycle, cands []*datastore.View) []*datastore.View {
	start := p.Admission.StartSeconds(c.cands, p.Latency)
	c.soon = c.soon[:0]
	for _, v := range cands {
		if p.Admission.StartsSoon(v, c.PromptTokens, p.Latency, start) {
			c.soon = append(c.soon, v)
		}
	}
	if len(c.soon) == 0 {
		return cands
	}
	return c.soon
}

// laterFallbacks returns res's fallbacks filled up to the profile's number
// from later, soonest start first: a request placed where it starts soon
// still has somewhere to go should its destination fail before the first
// byte, as without late binding.
func laterFallbacks(p *Pipeline, c *cycle, res *Result, later []*datastore.View) []string {
	fallbacks := res.Fallbacks
	if len(fallbacks) >= p.Profile.Fallbacks {
		return fallbacks
	}
	type start struct {
		key  string
		wait float64
	}
	var rest []start
	for _, v := range later {
		if v.Key != res.Primary && !slices.Contains(fallbacks, v.Key) {
			rest = append(rest, start{v.Key, admission.PredictedWait(v, c.PromptTokens, p.Latency)})
		}
	}
	slices.SortStableFunc(rest, func(a, b start) int { return cmp.Compare(a.wait, b.wait) })
	for _, s := range rest[:min(len(rest), p.Profile.Fallbacks-len(fallbacks))] {
		fallbacks = append(fallbacks, s.key)
	}
	return fallbacks
}

// hold takes a place for req held by late binding at now, for at most the
// wait bound; nil when there is no room.
func (d *Director) hold(p *Pipeline, req *scheduling.Request, now time.Time) *Place {
	return d.queue.enter(held, requestBytes(req), p.Admission.LateBinding.Room, now, seconds(p.Admission.MaxWaitSeconds))
}
