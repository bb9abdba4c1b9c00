// Package health decides whether a member cluster is in the global picker's
// rotation, from active checks (each summary fetch is one) and passive outlier
// detection on the requests sent there (5xx, connection resets, timeouts), and
// how much of its share a member that came back gets while it warms up (slow
// start). It reads no clock: every observation carries its time.
package health

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/globalsummary"
)

// Settings are the thresholds; the zero value of a field means its default.
type Settings struct {
	// ProbeFailures consecutive failed checks take a member out (2);
	// ProbeSuccesses consecutive good ones bring it back (2).
	ProbeFailures  int `json:"probeFailures,omitempty"`
	ProbeSuccesses int `json:"probeSuccesses,omitempty"`
	// ConsecutiveFailures failed requests in a row eject a member (3), and so
	// does a FailureRate share (0.5) of at least MinRequests (10) requests
	// ending within Window (10 s).
	ConsecutiveFailures int           `json:"consecutiveFailures,omitempty"`
	FailureRate         float64       `json:"failureRate,omitempty"`
	MinRequests         int           `json:"minRequests,omitempty"`
	Window              time.Duration `json:"window,omitempty"`
	// EjectFor is the shortest time out after an ejection (2 s), doubling
	// with each ejection that follows within MaxEject of returning, up to
	// MaxEject (30 s). A member comes back only after that time and a good check.
	EjectFor time.Duration `json:"ejectFor,omitempty"`
	MaxEject time.Duration `json:"maxEject,omitempty"`
	// SlowStart is how long a member that came back takes to reach its full
	// weight (10 s), from MinWeight (0.1). A member's first admission has no
	// slow start: nothing spilled away from it.
	SlowStart time.Duration `json:"slowStart,omitempty"`
	MinWeight float64       `json:"minWeight,omitempty"`
}

// DefaultSettings are the values zero fields take.
var DefaultSettings = Settings{
	ProbeFailures: 2, ProbeSuccesses: 2, ConsecutiveFailures: 3, FailureRate: 0.5, MinRequests: 10,
	Window: 10 * time.Second, EjectFor: 2 * time.Second, MaxEject: 30 * time.Second,
	SlowStart: 10 * time.Second, MinWeight: 0.1,
}

// WithDefaults fills zero fields from DefaultSettings and checks the result.
func (s Settings) WithDefaults() (Settings, error) {
	d := DefaultSettings
	fill(&s.ProbeFailures, d.ProbeFailures)
	fill(&s.ProbeSuccesses, d.ProbeSuccesses)
	fill(&s.ConsecutiveFailures, d.ConsecutiveFailures)
	fill(&s.FailureRate, d.FailureRate)
	fill(&s.MinRequests, d.MinRequests)
	fill(&s.Window, d.Window)
	fill(&s.EjectFor, d.EjectFor)
	fill(&s.MaxEject, d.MaxEject)
	fill(&s.SlowStart, d.SlowStart)
	fill(&s.MinWeight, d.MinWeight)
	switch {
	case s.ProbeFailures < 1 || s.ProbeSuccesses < 1 || s.ConsecutiveFailures < 1 || s.MinRequests < 1:
		return s, fmt.Errorf("probeFailures, probeSuccesses, consecutiveFailures and minRequests must be at least 1")
	case !(s.FailureRate > 0 && s.FailureRate <= 1):
		return s, fmt.Errorf("failureRate must be in (0, 1], got %v", s.FailureRate)
	case s.Window <= 0 || s.EjectFor <= 0 || s.SlowStart <= 0:
		return s, fmt.Errorf("window, ejectFor and slowStart must be positive")
	case s.MaxEject < s.EjectFor:
		return s, fmt.Errorf("maxEject (%v) must be at least ejectFor (%v)", s.MaxEject, s.EjectFor)
	case !(s.MinWeight > 0 && s.MinWeight <= 1):
		return s, fmt.Errorf("minWeight must be in (0, 1], got %v", s.MinWeight)
	}
	return s, nil
}

func fill[T int | float64 | time.Duration](dst *T, def T) {
	if *dst == 0 {
		*dst = def
	}
}

// Outcome is how a request sent to a member ended, as far as health goes.
type Outcome int

// Outcomes. Success is a response's first byte (or a whole response); Shed
// is a member that answered 429, turning the request away because it is
// saturated: alive, so no failure, and the request may spill over to another
// member. The others are failures before or after the first byte.
const (
	Success Outcome = iota
	Status5xx
	Reset
	Timeout
	Shed
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Status5xx:
		return "5xx response"
	case Reset:
		return "connection reset or refused"
	case Timeout:
		return "timeout"
	case Shed:
		return "shed (429)"
	}
	return fmt.Sprintf("outcome %d", int(o))
}

// Status is a member's health at one instant.
type Status struct {
	// InRotation: the member may be picked. Weight (0..1] is the share of its
	// traffic it should get: below 1 during slow start.
	InRotation bool
	Weight     float64
	// Reason says why the member is out (or warming up), for the 503 and status.
	Reason string
	// ErrorRate is the failed share of the Requests that ended within the window.
	ErrorRate float64
	Requests  int
}

// Tracker is one member's health. Safe for concurrent use.
type Tracker struct {
	s Settings

	mu sync.Mutex
	// Active checks.
	checked                bool // a check ever succeeded
	probeFails, probeGoods int
	probeDown              bool
	lastProbeError         string
	lastGoodProbe          time.Time
	// Passive detection.
	consecutive  int
	lastFailure  Outcome
	window       *globalsummary.ErrorWindow
	ejected      bool
	ejectedAt    time.Time
	ejectedUntil time.Time
	ejections    int
	ejectReason  string
	// backAt is when the member last came back into rotation (zero: never left).
	backAt time.Time
}

// NewTracker returns the health of a member never checked: out of rotation
// until its first good check. s must have been through WithDefaults.
func NewTracker(s Settings) *Tracker {
	return &Tracker{s: s, window: globalsummary.NewErrorWindow(s.Window, 10)}
}

// ProbeSucceeded records a good active check at now.
func (t *Tracker) ProbeSucceeded(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastGoodProbe = now
	t.probeFails = 0
	t.probeGoods++
	if !t.checked { // a first admission: in at once, at full weight
		t.checked, t.probeDown = true, false
		return
	}
	if t.probeDown && t.probeGoods >= t.s.ProbeSuccesses {
		t.probeDown = false
		t.cameBack(now)
	}
	t.maybeReturn(now)
}

// ProbeFailed records a failed active check (no answer, or garbage) at now.
func (t *Tracker) ProbeFailed(reason string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.probeGoods = 0
	t.probeFails++
	t.lastProbeError = reason
	if t.probeFails >= t.s.ProbeFailures {
		t.probeDown = true
	}
}

// ObserveRequest records how a request sent to the member ended at now.
func (t *Tracker) ObserveRequest(o Outcome, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.maybeReturn(now)
	failed := o != Success && o != Shed
	t.window.Record(failed, now)
	if !failed {
		t.consecutive = 0
		return
	}
	t.consecutive++
	t.lastFailure = o
	if t.ejected {
		return
	}
	if t.consecutive >= t.s.ConsecutiveFailures {
		t.eject(fmt.Sprintf("%d consecutive request failures (last: %s)", t.consecutive, o), now)
		return
	}
	if rate, n := t.window.Rate(now); n >= t.s.MinRequests && rate >= t.s.FailureRate {
		t.eject(fmt.Sprintf("%.0f%% of %d requests failed within %v (last: %s)", 100*rate, n, t.s.Window, o), now)
	}
}

func (t *Tracker) eject(reason string, now time.Time) {
	// Ejections in a row: one that follows a return by less than MaxEject
	// lengthens the next time out.
	if t.backAt.IsZero() || now.Sub(t.backAt) > t.s.MaxEject {
		t.ejections = 0
	}
	t.ejections++
	d := t.s.EjectFor << min(t.ejections-1, 16)
	d = min(d, t.s.MaxEject)
	t.ejected, t.ejectedAt, t.ejectedUntil, t.ejectReason = true, now, now.Add(d), reason
	t.consecutive = 0
	t.window.Reset() // what led to the ejection must not eject it again on return
}

// maybeReturn ends an ejection whose time is over once a check after it succeeded.
func (t *Tracker) maybeReturn(now time.Time) {
	if !t.ejected || now.Before(t.ejectedUntil) || !t.lastGoodProbe.After(t.ejectedAt) || t.probeFails > 0 {
		return
	}
	t.ejected = false
	t.cameBack(now)
}

func (t *Tracker) cameBack(now time.Time) {
	if !t.probeDown && !t.ejected {
		t.backAt = now
	}
}

// Status returns the member's health at now.
func (t *Tracker) Status(now time.Time) Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.maybeReturn(now)
	st := Status{Weight: 1}
	st.ErrorRate, st.Requests = t.window.Rate(now)
	var out []string
	if !t.checked {
		out = append(out, "no successful summary fetch yet")
		if t.lastProbeError != "" {
			out[0] += " (last: " + t.lastProbeError + ")"
		}
	}
	if t.probeDown {
		out = append(out, fmt.Sprintf("%d consecutive failed summary fetches (last: %s)", t.probeFails, t.lastProbeError))
	}
	if t.ejected {
		out = append(out, "ejected after "+t.ejectReason+", for "+t.ejectedUntil.Sub(t.ejectedAt).String()+" and until a summary fetch succeeds")
	}
	if len(out) > 0 {
		st.Weight = 0
		st.Reason = strings.Join(out, "; ")
		return st
	}
	st.InRotation = true
	if !t.backAt.IsZero() {
		if since := now.Sub(t.backAt); since < t.s.SlowStart {
			st.Weight = max(t.s.MinWeight, float64(since)/float64(t.s.SlowStart))
			st.Reason = fmt.Sprintf("slow start: back in rotation %v ago, weight %.2f", since.Round(time.Millisecond), st.Weight)
		}
	}
	return st
}
