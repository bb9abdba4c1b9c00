package datastore

import (
	"net/http"
	"time"

	"github.com/igw-dev/igw/pkg/epp/latency"
)

// Passive health: what the response path reports about an endpoint decides
// whether it gets new picks, so a pod that fails, resets or hangs stops
// drawing traffic without any probe, and comes back gradually.
const (
	// EjectAfterFailures consecutive failures (a 5xx, a reset, a timeout
	// before the first byte) eject an endpoint.
	EjectAfterFailures = 3
	// EjectBase is the first ejection's length; each repeat doubles it, up to
	// EjectMax. An endpoint that served well for EjectMax starts again from
	// EjectBase.
	EjectBase = 5 * time.Second
	EjectMax  = 5 * time.Minute
	// SlowStart follows an ejection: the endpoint's requests in flight are
	// capped, the cap rising from 1 to slowStartCap over it, and one failure
	// ejects it again at once.
	SlowStart    = 10 * time.Second
	slowStartCap = 16
	// StallAfter: an endpoint whose oldest request awaiting its first token
	// was picked more than this long ago, and which has shown no progress (a
	// first token, a token, a completion) for as long, is stalled (hung):
	// it gets no new picks until it progresses again. At 1 s, pods busy
	// loading adapters looked hung (multi-lora, des, seeds 1-3: P99 TTFT
	// 1.72/6.94/4.97 s against 1.49/4.71/1.51 s at 1.5 s); at 1.5 s a hung
	// pod's last pick still comes within 1.6 s (fault-hang, same seeds).
	// The bound grows with the oldest request's predicted time to first
	// token (stallPredictedFactor times it): a long prompt on a slow GPU is
	// seconds of honest work without a token, not a hang.
	StallAfter           = 1500 * time.Millisecond
	stallPredictedFactor = 2
)

// health is an endpoint's passive health, guarded by EndpointState.mu.
type health struct {
	consecutiveFailures int
	// ejections counts ejections in a row, for the doubling.
	ejections    int
	ejectedAt    time.Time
	ejectedUntil time.Time
	// lastProgress is the latest first token, token or completion seen.
	lastProgress time.Time
}

// countsAsFailure: server errors and failures without a status eject; a 4xx
// is the request's fault, not the endpoint's.
func countsAsFailure(status int) bool {
	return status == 0 || status >= http.StatusInternalServerError
}

func (h *health) progressed(now time.Time) {
	if now.After(h.lastProgress) {
		h.lastProgress = now
	}
}

// succeeded resets the failure count; a long healthy stretch after the last
// ejection forgets the ejections.
func (h *health) succeeded(now time.Time) {
	h.consecutiveFailures = 0
	h.progressed(now)
	if h.ejections > 0 && now.Sub(h.ejectedUntil) > EjectMax {
		h.ejections = 0
	}
}

func (h *health) failed(now time.Time) {
	h.consecutiveFailures++
	probation := !h.ejectedUntil.IsZero() && now.Before(h.ejectedUntil.Add(SlowStart))
	if h.consecutiveFailures < EjectAfterFailures && !probation {
		return
	}
	length := min(EjectBase<<min(h.ejections, 10), EjectMax)
	h.ejections++
	h.consecutiveFailures = 0
	h.ejectedAt, h.ejectedUntil = now, now.Add(length)
}

// avoidLocked reports whether the endpoint should get no new pick at now:
// ejected, stalled, or at its slow-start cap.
func (s *EndpointState) avoidLocked(now time.Time) bool {
	h := &s.health
	if now.Before(h.ejectedUntil) {
		return true
	}
	if len(s.queue) > 0 {
		oldest := s.queue[0]
		bound := max(StallAfter, stallPredictedFactor*oldest.predictedTTFT)
		if now.Sub(oldest.PickedAt) > bound && now.Sub(latency.Later(oldest.PickedAt, h.lastProgress)) > bound {
			return true
		}
	}
	if !h.ejectedUntil.IsZero() {
		if since := now.Sub(h.ejectedUntil); since < SlowStart {
			limit := 1 + int(float64(slowStartCap-1)*since.Seconds()/SlowStart.Seconds())
			return s.inFlight >= limit
		}
	}
	return false
}

// ObserveFailure ends r at now as a failure with the server's status (0:
// none came — refused, reset, or timed out before the first byte): nothing
// is learned from its timing, and a server error or a missing status counts
// toward ejecting the endpoint.
func (s *EndpointState) ObserveFailure(r *Request, status int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done {
		return
	}
	s.endLocked(r, 0, now)
	if countsAsFailure(status) {
		s.health.failed(now)
	}
}

// Ejected reports whether the endpoint is ejected at now (for tests and
// metrics).
func (s *EndpointState) Ejected(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.health.ejectedUntil)
}
