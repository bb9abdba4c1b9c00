// Package membertest builds decisions over member clusters for the global
// plugins' tests: a cycle with its member table, and the members' views as the
// global picker makes them.
package membertest

import (
	"math/rand/v2"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

// Now is the decision time of the global plugins' tests.
var Now = time.Unix(1_700_000_000, 0)

// Healthy is the health of a member in rotation at full weight.
var Healthy = health.Status{InRotation: true, Weight: 1}

// Model returns a summary entry of an idle model pool of one ready endpoint.
func Model(name string) *globalsummary.Model {
	h := 0.5
	return &globalsummary.Model{Model: name, Endpoints: 1, ReadyEndpoints: 1,
		PrefillTokensPerSecond: 20000, EndpointPrefillTokensPerSecond: 20000, DecodeStepSeconds: 0.01,
		KVHeadroom: &h, KVCapacityTokens: 100000}
}

// Member returns a healthy member with a fresh summary of model received at now.
func Member(name, region string, model *globalsummary.Model, rtt time.Duration, now time.Time) member.State {
	return member.State{Name: name, Region: region, Address: name + ".example:443", Summary: model, SummaryAt: now,
		RTT: rtt, RTTKnown: rtt > 0, Health: Healthy}
}

// Cycle returns a cycle for req at now whose table holds states (ids in
// order), the origin region and the views the picker would build.
func Cycle(req *scheduling.Request, origin string, now time.Time, states ...member.State) (*scheduling.Cycle, []*datastore.View) {
	c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 2)))
	c.Reset(req, now, scheduling.PrefixSettings{})
	c.Latency = latency.DefaultModel
	t := &member.Table{}
	t.Reset(origin, 256, len(states))
	views := make([]*datastore.View, len(states))
	for i, s := range states {
		t.Set(int32(i), s)
		v := &datastore.View{ID: int32(i), Key: s.Address, Labels: map[string]string{"region": s.Region}}
		if s.Summary != nil {
			v.HasMetrics, v.Metrics = true, member.MetricsOf(s.Summary, s.SummaryAt)
		}
		views[i] = v
	}
	c.Data = t
	return c, views
}

// Names lists the members of views, in order.
func Names(c *scheduling.Cycle, views []*datastore.View) []string {
	t := member.From(c)
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = t.Of(v).Name
	}
	return out
}

// Ready is the member most tests need: a healthy one, 1 ms away, whose
// summary of model arrived at Now.
func Ready(name, region string, model *globalsummary.Model) member.State {
	return Member(name, region, model, time.Millisecond, Now)
}

// Decide is Cycle at Now for a hub with no region of its own.
func Decide(req *scheduling.Request, states ...member.State) (*scheduling.Cycle, []*datastore.View) {
	return Cycle(req, "", Now, states...)
}
