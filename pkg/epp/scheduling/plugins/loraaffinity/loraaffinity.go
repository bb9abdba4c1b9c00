// Package loraaffinity scores endpoints by whether the request's LoRA adapter
// is resident or can be loaded there without waiting.
package loraaffinity

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "lora-affinity"

// Parameters are the scores of each adapter situation.
type Parameters struct {
	Resident float64 `json:"resident"` // adapter running there (or sent there since the sample); default 1
	FreeSlot float64 `json:"freeSlot"` // not resident, an adapter slot is free; default 0.8
	Queued   float64 `json:"queued"`   // only waiting requests use it; default 0.6
	Full     float64 `json:"full"`     // not resident and every slot taken; default 0
}

// Scorer rates each endpoint by the adapter's state there. Requests for the
// base model score 1 everywhere.
type Scorer struct {
	scheduling.Named
	p Parameters
}

var _ scheduling.Scorer = (*Scorer)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{Resident: 1, FreeSlot: 0.8, Queued: 0.6, Full: 0},
	func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) { return &Scorer{Named: n, p: p}, nil })

// Score implements scheduling.Scorer.
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	adapter := c.Request.Adapter
	for i, v := range cands {
		if adapter == "" {
			scores[i] = 1
			continue
		}
		switch v.AdapterPlace(adapter) {
		case datastore.AdapterResident:
			scores[i] = s.p.Resident
		case datastore.AdapterFreeSlot:
			scores[i] = s.p.FreeSlot
		case datastore.AdapterQueued:
			scores[i] = s.p.Queued
		default:
			scores[i] = s.p.Full
		}
	}
}
