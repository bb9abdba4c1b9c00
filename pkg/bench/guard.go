package bench

import (
	"errors"
	"math"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// ErrSLOBroken ends a run whose Guard found the SLO surely missed.
var ErrSLOBroken = errors.New("the run has already missed its SLO")

// Guard ends a run as soon as it surely misses its SLO (P99 TTFT and P99 TPOT
// within bounds, no failed request), so that a capacity search pays little
// for probes far above capacity, where queues (and the oracle's cost, which
// grows with them) would otherwise grow until the end of the arrivals. It
// never stops a run that could still meet the SLO: it counts only requests
// that already broke it (failed; first token later than slo.ttft, or none yet
// that late; TPOT over slo.tpot at the finish) and stops once they are more
// than a P99 over the most requests the run can count lets through.
type Guard struct {
	SLO scenario.SLO
	// Allowed is how many counted requests may exceed each bound: for at most
	// n counted requests, n − ⌈0.99 n⌉.
	Allowed int
}

// NewGuard returns the guard of a run that counts at most maxCounted requests.
func NewGuard(slo scenario.SLO, maxCounted int) *Guard {
	return &Guard{SLO: slo, Allowed: maxCounted - int(math.Ceil(0.99*float64(maxCounted)))}
}

// Broken says whether the run recorded in t has surely missed the SLO by now.
func (g *Guard) Broken(t *Trace, now time.Duration) bool {
	late, slow := 0, 0
	for i := range t.Records {
		r := &t.Records[i]
		if !r.Counted {
			continue
		}
		if r.Failed && !r.Cut {
			return true
		}
		if g.SLO.TTFT > 0 {
			first := r.FirstToken
			if first == 0 {
				first = now // no first token yet: at least this late
			}
			if first-r.Arrival > g.SLO.TTFT {
				late++
			}
		}
		if g.SLO.TPOT > 0 && r.Done && r.OutputTokens > 1 &&
			(r.Finish-r.FirstToken)/time.Duration(r.OutputTokens-1) > g.SLO.TPOT {
			slow++
		}
	}
	return late > g.Allowed || slow > g.Allowed
}

// MeetsSLO says whether a run's metrics meet slo: P99 TTFT and P99 TPOT
// within their bounds (0: unbounded) and no failed request but those cut
// by a member's outage after their first byte.
func MeetsSLO(m Metrics, slo scenario.SLO) bool {
	return m.Failed-m.CutByOutage == 0 && within(m.TTFTP99, slo.TTFT) && within(m.TPOTP99, slo.TPOT)
}
