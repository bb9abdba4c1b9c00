// Package predictedlatency scores endpoints by their predicted time to first
// token, in seconds, from the work queued ahead, the request's own uncached
// prompt tokens (prefix index), the endpoint's learned prefill rate and decode
// step time, KV-cache pressure and adapter loading. Scoring in seconds rather
// than queue lengths is what lets a mixed fleet of GPU generations be used well:
// an idle slow GPU can lose to a busy fast one.
package predictedlatency

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/loraaffinity"
)

// Type is the plugin's type name.
const Type = "predicted-latency"

// Parameters of the predicted-latency scorer. The timing model itself
// (chunk budget, KV pressure) is the configuration's latency section, shared
// with admission control and speed learning; it arrives in the cycle.
type Parameters struct {
	// AdapterLoadSeconds is added where the adapter must be loaded into a free
	// slot (default 0.05); AdapterWaitSeconds where every slot is busy (default 1).
	AdapterLoadSeconds *float64 `json:"adapterLoadSeconds"`
	AdapterWaitSeconds *float64 `json:"adapterWaitSeconds"`
	// DecodeTokens, when positive, adds that many of the endpoint's decode steps
	// to the cost, so that among similar first-token times the endpoint that
	// streams faster wins (default 0: pure time to first token).
	DecodeTokens float64 `json:"decodeTokens"`
	// ToleranceSeconds is added to every prediction before the ratio, so that
	// differences far below it (1 ms against 2 ms) do not look like 2× (default 0.01).
	ToleranceSeconds *float64 `json:"toleranceSeconds"`
}

// Scorer scores (best+tolerance)/(predicted+tolerance): the fastest endpoint
// scores 1, one predicted twice as slow about 0.5. Stale endpoints score 0.
type Scorer struct {
	scheduling.Named
	adapterLoad float64
	adapterWait float64
	decode      float64
	tolerance   float64
}

// New is the registry factory.
func New(name string, params scheduling.Parameters) (scheduling.Plugin, error) {
	var p Parameters
	if err := params.Decode(&p); err != nil {
		return nil, err
	}
	s := &Scorer{Named: scheduling.Named{TypeName: Type, InstanceName: name},
		adapterLoad: 0.05, adapterWait: 1, decode: p.DecodeTokens}
	if p.AdapterLoadSeconds != nil {
		s.adapterLoad = *p.AdapterLoadSeconds
	}
	s.tolerance = 0.01
	if p.ToleranceSeconds != nil {
		s.tolerance = *p.ToleranceSeconds
	}
	if p.AdapterWaitSeconds != nil {
		s.adapterWait = *p.AdapterWaitSeconds
	}
	if s.adapterLoad < 0 || s.adapterWait < 0 || s.decode < 0 || s.tolerance < 0 {
		return nil, fmt.Errorf("adapterLoadSeconds, adapterWaitSeconds, decodeTokens and toleranceSeconds must not be negative")
	}
	return s, nil
}

// Predict is the scorer's cost for v in seconds.
func (s *Scorer) Predict(c *scheduling.Cycle, v *datastore.View) float64 {
	kv, _ := v.KVUtilization()
	t := c.Latency.TTFT(v, c.UncachedTokens(v), c.PromptTokens, kv)
	if a := c.Request.Adapter; a != "" {
		switch loraaffinity.AdapterState(v, a) {
		case loraaffinity.FreeSlot:
			t += s.adapterLoad
		case loraaffinity.Queued, loraaffinity.Full:
			t += s.adapterWait
		}
	}
	return t + s.decode*v.Speed.DecodeStepSeconds
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	best := -1.0
	for i, v := range cands {
		if v.Stale {
			continue
		}
		scores[i] = s.Predict(c, v)
		if best < 0 || scores[i] < best {
			best = scores[i]
		}
	}
	for i, v := range cands {
		switch {
		case v.Stale:
			scores[i] = 0
		case scores[i]+s.tolerance <= 0:
			scores[i] = 1
		default:
			scores[i] = (best + s.tolerance) / (scores[i] + s.tolerance)
		}
	}
}
