package datastore

import (
	"testing"
	"time"
)

func avoided(s *EndpointState, now time.Time) bool {
	var v View
	s.View(now, 0, &v)
	return v.Avoid
}

// failOne picks a request at now and fails it with status.
func failOne(s *EndpointState, status int, now time.Time) {
	r := &Request{PromptTokens: 100, UncachedTokens: 100}
	s.Picked(r, now)
	s.ObserveFailure(r, status, now)
}

func TestEjectionDoublesThenSlowStarts(t *testing.T) {
	s := newState()
	failOne(s, 400, at(0)) // a client error does not count
	failOne(s, 500, at(0))
	failOne(s, 0, at(0))
	if avoided(s, at(0)) {
		t.Fatal("ejected after two failures")
	}
	failOne(s, 503, at(0))
	if !avoided(s, at(1)) || !s.Ejected(at(4.9)) || s.Ejected(at(5)) {
		t.Fatal("three failures: want an ejection of 5 s")
	}
	// Slow start: one request in flight at first, a failure ejects again at once, for twice as long.
	r := &Request{PromptTokens: 100, UncachedTokens: 100}
	s.Picked(r, at(5))
	if !avoided(s, at(5.1)) {
		t.Error("slow start admitted a second request at once")
	}
	s.ObserveFailure(r, 500, at(5.2))
	if !s.Ejected(at(15)) || s.Ejected(at(15.3)) {
		t.Error("a failure in slow start: want an ejection of 10 s")
	}
	// After slow start, successes keep it in.
	for i := range 20 {
		r := &Request{PromptTokens: 100, UncachedTokens: 100}
		now := at(26 + float64(i))
		s.Picked(r, now)
		s.ObserveFirstToken(r, now.Add(10*time.Millisecond))
		s.ObserveCompletion(r, 5, now.Add(20*time.Millisecond))
	}
	if avoided(s, at(50)) {
		t.Error("a healthy endpoint is avoided")
	}
}

func TestStalledEndpointIsAvoidedUntilItProgresses(t *testing.T) {
	s := newState()
	done := &Request{PromptTokens: 100, UncachedTokens: 100}
	s.Picked(done, at(0))
	s.ObserveFirstToken(done, at(0.1))
	stuck := &Request{PromptTokens: 100, UncachedTokens: 100}
	s.Picked(stuck, at(1))
	bound := StallAfter.Seconds()
	if avoided(s, at(1+0.9*bound)) {
		t.Error("avoided before the stall bound")
	}
	if !avoided(s, at(1+1.2*bound)) {
		t.Errorf("a request waiting %.2f s with no progress: want the endpoint avoided", 1.2*bound)
	}
	// Tokens of another request are progress: the pod is busy, not hung.
	s.ObserveTokens(done, 1, at(1.3+1.2*bound))
	if avoided(s, at(1.4+1.2*bound)) {
		t.Error("avoided while tokens flow")
	}
	s.ObserveFirstToken(stuck, at(5))
	if avoided(s, at(7)) {
		t.Error("avoided after the stalled request got its first token")
	}
}
