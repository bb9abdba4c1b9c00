package datastore

import (
	"math"
	"sync"

	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/wire"
)

// speedClass pools the measured speeds of the endpoints that share an
// accelerator (the wire.LabelGPUProduct label): what an endpoint of the
// class can be expected to run at when its own figures are out of date. An
// idle endpoint relaxes toward it (latency.Learner.Relax) rather than toward
// the fleet-wide prior, which is optimistic on purpose and, for a slow GPU in
// a mixed fleet, many times too fast. The class's figures are its best
// measured ones (highest prefill rate, shortest decode step): relaxing exists
// to get an endpoint tried again, so a member whose figures were spoilt (a
// pause, a long prefill taken for a step) heals toward its best peer, and
// drags no peer toward itself, as a mean did.
type speedClass struct {
	mu sync.Mutex
	// measured is each member's latest measured speed, by endpoint ID.
	measured map[int32]latency.Priors
	// best is the best figures of measured, recomputed after a change (dirty).
	best  latency.Priors
	dirty bool
	// spreads pools the members' finished streams (latency.StreamSpreads):
	// what a member's slow streams are taken to run at until enough of its
	// own finished (admission's streamSpread).
	spreads latency.StreamSpreads
}

// record keeps sp as member id's speed once it is measured.
func (c *speedClass) record(id int32, sp latency.Speed) {
	if c == nil || !sp.Measured() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.measured[id] = latency.Priors{PrefillTokensPerSecond: sp.PrefillTokensPerSecond, DecodeStepSeconds: sp.DecodeStepSeconds}
	c.dirty = true
}

// recordSpread counts a member's finished stream's time per token over
// its mean time between tokens (0: not measured).
func (c *speedClass) recordSpread(ratio float64) {
	if c == nil || ratio <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spreads.Add(ratio)
}

// forget drops member id.
func (c *speedClass) forget(id int32) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.measured, id)
	c.dirty = true
}

// priorFor is the class's best measured figures for member id, or the zero
// Priors (the learner's own priors then apply) while no other member is
// measured: a pod alone in its class whose rate collapsed must not be held
// there by its own figures.
//
// spread and samples are the class's pooled stream spread
// (latency.StreamSpreads), read under the same lock.
func (c *speedClass) priorFor(id int32) (prior latency.Priors, spread float64, samples int) {
	if c == nil {
		return latency.Priors{}, 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	spread, samples = c.spreads.Spread()
	others := len(c.measured)
	if _, ok := c.measured[id]; ok {
		others--
	}
	if others == 0 {
		return latency.Priors{}, spread, samples
	}
	if c.dirty {
		c.best = latency.Priors{DecodeStepSeconds: math.Inf(1)}
		for _, p := range c.measured {
			c.best.PrefillTokensPerSecond = max(c.best.PrefillTokensPerSecond, p.PrefillTokensPerSecond)
			c.best.DecodeStepSeconds = min(c.best.DecodeStepSeconds, p.DecodeStepSeconds)
		}
		c.dirty = false
	}
	return c.best, spread, samples
}

// classOf returns the speed class of an endpoint with labels (nil without
// the accelerator label), creating it on first use. Called with s.mu held.
func (s *Store) classOf(labels map[string]string) *speedClass {
	name := labels[wire.LabelGPUProduct]
	if name == "" {
		return nil
	}
	c := s.classes[name]
	if c == nil {
		c = &speedClass{measured: map[int32]latency.Priors{}, dirty: true}
		if s.classes == nil {
			s.classes = map[string]*speedClass{}
		}
		s.classes[name] = c
	}
	return c
}
