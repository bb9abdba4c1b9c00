package datastore

import "slices"

// AdapterPlace is where a request's LoRA adapter stands on an endpoint.
type AdapterPlace int

// Adapter places, best first.
const (
	// AdapterResident: running there, or sent there since the sample.
	AdapterResident AdapterPlace = iota
	// AdapterFreeSlot: not resident, and an adapter slot is free (or the
	// slot count is unknown).
	AdapterFreeSlot
	// AdapterQueued: every slot taken, and requests for it wait there.
	AdapterQueued
	// AdapterFull: not resident and every slot taken.
	AdapterFull
)

// AdapterPlace classifies adapter on v. Unknown slot counts (no LoRA
// telemetry) count as a free slot.
func (v *View) AdapterPlace(adapter string) AdapterPlace {
	running, waiting := v.Metrics.HasAdapter(adapter)
	if running || slices.Contains(v.AdaptersSinceSample, adapter) {
		return AdapterResident
	}
	if v.Metrics.MaxAdapters == 0 || v.adapterSlotsUsed() < v.Metrics.MaxAdapters {
		return AdapterFreeSlot
	}
	if waiting {
		return AdapterQueued
	}
	return AdapterFull
}

// adapterSlotsUsed counts the distinct adapters running or sent since the
// sample: an adapter sent again while it runs takes no second slot.
func (v *View) adapterSlotsUsed() int {
	n := len(v.Metrics.RunningAdapters)
	for _, a := range v.AdaptersSinceSample {
		if !slices.Contains(v.Metrics.RunningAdapters, a) {
			n++
		}
	}
	return n
}

// ServesAdapters reports whether LoRA adapters run or wait on v, or were
// sent there since the sample.
func (v *View) ServesAdapters() bool {
	return len(v.Metrics.RunningAdapters) > 0 || len(v.Metrics.WaitingAdapters) > 0 || len(v.AdaptersSinceSample) > 0
}
