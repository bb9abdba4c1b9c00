package admission

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

func view(waiting int, interToken float64) *datastore.View {
	learner := latency.NewLearner(latency.DefaultPriors)
	v := &datastore.View{HasMetrics: true, MeanPromptTokens: 1000,
		Metrics: datastore.Metrics{Waiting: waiting}, Speed: learner.Speed()}
	if interToken > 0 {
		v.Speed.DecodeSamples, v.Speed.InterTokenSeconds = 10, interToken
	}
	return v
}

// Priority 0 is shed only when every candidate is overloaded; a negative
// priority already when every candidate is saturated.
func TestOverloadBoundsShedAtAnyPriority(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel
	p.MaxWaitSeconds, p.MaxInterTokenSeconds = 1, 0.04
	saturated := []*datastore.View{view(5, 0), view(6, 0)}
	if d := p.Decide(saturated, -1, 1000, m); !d.Shed || d.RetryAfterSeconds < 1 {
		t.Errorf("priority -1 on a saturated fleet: %+v", d)
	}
	if d := p.Decide(saturated, 0, 1000, m); d.Shed {
		t.Errorf("priority 0 on a saturated but not overloaded fleet: %+v", d)
	}
	overloaded := []*datastore.View{view(500, 0), view(10, 0.2)}
	d := p.Decide(overloaded, 0, 1000, m)
	if !d.Shed || d.RetryAfterSeconds < 1 || d.RetryAfterSeconds > p.MaxRetryAfterSeconds {
		t.Errorf("priority 0 on an overloaded fleet: %+v", d)
	}
	if d := p.Decide(append(overloaded, view(0, 0.01)), 10, 1000, m); d.Shed {
		t.Errorf("one endpoint with room: %+v", d)
	}
	off := p
	off.MaxWaitSeconds, off.MaxInterTokenSeconds = 0, 0
	if d := off.Decide(overloaded, 0, 1000, m); d.Shed {
		t.Errorf("bounds off: %+v", d)
	}
}
