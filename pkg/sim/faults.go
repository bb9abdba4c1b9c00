package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FaultKind is one way a pod misbehaves.
type FaultKind string

// The fault kinds, as scenario files spell them.
const (
	// FaultHang: the pod accepts requests but no step makes progress;
	// connections stay open.
	FaultHang FaultKind = "hang"
	// FaultFailFast: every new request is answered 500 at once while the
	// metrics report an idle pod (a broken server behind a healthy exporter).
	FaultFailFast FaultKind = "fail-fast"
	// FaultCrash: requests in flight are reset, new connections refused; the
	// pod restarts with an empty cache when the fault ends.
	FaultCrash FaultKind = "crash"
	// FaultSlow: every step takes Factor times as long.
	FaultSlow FaultKind = "slow"
	// FaultMetricsGarbage: /metrics answers with text no parser accepts.
	FaultMetricsGarbage FaultKind = "metrics-garbage"
	// FaultMetricsAbsent: /metrics is not served.
	FaultMetricsAbsent FaultKind = "metrics-absent"
	// FaultEventsLost: KV cache events are dropped instead of published.
	FaultEventsLost FaultKind = "events-lost"
)

// FaultKinds lists every kind.
var FaultKinds = []FaultKind{FaultHang, FaultFailFast, FaultCrash, FaultSlow, FaultMetricsGarbage, FaultMetricsAbsent, FaultEventsLost}

// Fault is one misbehaviour of a pod over [At, At+For); For 0 lasts forever.
type Fault struct {
	Kind FaultKind
	At   time.Duration
	For  time.Duration
	// Factor is the slow-down of FaultSlow (> 1 is slower).
	Factor float64
}

// Validate reports a fault that cannot be applied.
func (f Fault) Validate() error {
	if !slices.Contains(FaultKinds, f.Kind) {
		return fmt.Errorf("unknown fault kind %q (known: %s)", f.Kind, joinKinds())
	}
	if f.At < 0 || f.For < 0 {
		return fmt.Errorf("fault %s: at and for must not be negative", f.Kind)
	}
	if f.Kind == FaultSlow {
		if !(f.Factor >= 1) || f.Factor > 1e6 {
			return fmt.Errorf("fault slow needs a factor in [1, 1e6], got %v", f.Factor)
		}
	} else if f.Factor != 0 {
		return fmt.Errorf("fault %s takes no factor (only slow does)", f.Kind)
	}
	return nil
}

func joinKinds() string {
	s := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// end is when the fault stops (math.MaxInt64 for one that never does).
func (f Fault) end() time.Duration {
	if f.For == 0 || f.For > math.MaxInt64-f.At {
		return math.MaxInt64
	}
	return f.At + f.For
}

func (f Fault) activeAt(t time.Duration) bool { return t >= f.At && t < f.end() }

// Faults is a pod's fault schedule.
type Faults []Fault

// Validate checks every fault.
func (fs Faults) Validate() error {
	var errs []error
	for i, f := range fs {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("fault %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Active reports whether a fault of kind is in force at t.
func (fs Faults) Active(kind FaultKind, t time.Duration) bool {
	for _, f := range fs {
		if f.Kind == kind && f.activeAt(t) {
			return true
		}
	}
	return false
}

// rate is the pod's speed at t relative to a healthy one (0 while hung) and
// when it next changes (math.MaxInt64: never).
func (fs Faults) rate(t time.Duration) (float64, time.Duration) {
	speed, next := 1.0, time.Duration(math.MaxInt64)
	for _, f := range fs {
		if f.Kind != FaultHang && f.Kind != FaultSlow {
			continue
		}
		switch {
		case f.activeAt(t):
			next = min(next, f.end())
			if f.Kind == FaultHang {
				speed = 0
			} else {
				speed /= f.Factor
			}
		case f.At > t:
			next = min(next, f.At)
		}
	}
	return speed, next
}

// finish is when work (healthy-pod time) started at start ends, with hangs
// stopping the clock and slow-downs stretching it; math.MaxInt64 if a hang
// never ends.
func (fs Faults) finish(start, work time.Duration) time.Duration {
	t, left := start, float64(work)
	for {
		speed, next := fs.rate(t)
		if speed > 0 && (next == math.MaxInt64 || float64(next-t)*speed >= left) {
			return t + time.Duration(math.Ceil(left/speed))
		}
		if next == math.MaxInt64 {
			return math.MaxInt64
		}
		left -= float64(next-t) * speed
		t = next
	}
}

// ParseFaults reads the simulator's --faults flag: comma-separated
// KIND@AT+FOR, with xFACTOR after a slow fault's FOR (FOR 0: until the
// process ends), e.g. "hang@30s+30s,slow@2m+1mx3".
func ParseFaults(s string) (Faults, error) {
	var out Faults
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, rest, ok := strings.Cut(item, "@")
		at, span, ok2 := strings.Cut(rest, "+")
		if !ok || !ok2 {
			return nil, fmt.Errorf("fault %q: want KIND@AT+FOR (e.g. hang@30s+30s, slow@0s+1mx2)", item)
		}
		f := Fault{Kind: FaultKind(kind)}
		if span, factor, ok := strings.Cut(span, "x"); ok {
			v, err := strconv.ParseFloat(factor, 64)
			if err != nil {
				return nil, fmt.Errorf("fault %q: factor %q is not a number", item, factor)
			}
			f.Factor = v
			rest = span
		} else {
			rest = span
		}
		var err error
		if f.At, err = time.ParseDuration(at); err != nil {
			return nil, fmt.Errorf("fault %q: at: %w", item, err)
		}
		if f.For, err = time.ParseDuration(rest); err != nil {
			return nil, fmt.Errorf("fault %q: for: %w", item, err)
		}
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("fault %q: %w", item, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// String is the --faults spelling of fs.
func (fs Faults) String() string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%s@%s+%s", f.Kind, f.At, f.For)
		if f.Kind == FaultSlow {
			parts[i] += "x" + strconv.FormatFloat(f.Factor, 'g', -1, 64)
		}
	}
	return strings.Join(parts, ",")
}

// SetFaults gives the engine its fault schedule (engine time), replacing any
// earlier one; call it before the first request.
func (e *Engine) SetFaults(fs Faults) error {
	if err := fs.Validate(); err != nil {
		return err
	}
	e.faults = slices.Clone(fs)
	e.pod.faults = nil
	e.crashes, e.crashed = nil, 0
	for _, f := range fs {
		switch f.Kind {
		case FaultHang, FaultSlow:
			e.pod.faults = e.faults
		case FaultCrash:
			e.crashes = append(e.crashes, f.At)
		}
	}
	slices.Sort(e.crashes)
	return nil
}

// Faults is the engine's fault schedule.
func (e *Engine) Faults() Faults { return e.faults }

// MetricsFault is the metrics fault in force at t: FaultMetricsAbsent,
// FaultMetricsGarbage, or "" when /metrics answers truthfully. A crashed pod
// serves no metrics.
func (e *Engine) MetricsFault(t time.Duration) FaultKind {
	switch {
	case e.faults.Active(FaultCrash, t), e.faults.Active(FaultMetricsAbsent, t):
		return FaultMetricsAbsent
	case e.faults.Active(FaultMetricsGarbage, t):
		return FaultMetricsGarbage
	}
	return ""
}

// crash resets the pod at at: every request in flight ends with EventFailed
// (in ID order) and the KV cache and adapter slots start empty.
func (e *Engine) crash(at time.Duration) {
	ids := make([]uint64, 0, len(e.byID))
	for id := range e.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	old := e.pod
	for _, id := range ids {
		old.events = append(old.events, Event{Kind: EventFailed, RequestID: id, Time: at, Tokens: int(e.byID[id].generated)})
	}
	clear(e.byID)
	events := e.kv.events
	e.kv = newKVCache(e.kv.numBlocks)
	e.pod = e.freshPod(old.rng, old.stats)
	e.pod.events, e.pod.emitTokens, e.pod.faults = old.events, old.emitTokens, old.faults
	if events != nil {
		_ = e.enableKVEvents(events.sink, events.noneHash)
		e.kv.events.cleared()
		e.flushKVEvents(at)
	}
}

// eventsLost reports whether KV events published at t are dropped.
func (e *Engine) eventsLost(t time.Duration) bool { return e.faults.Active(FaultEventsLost, t) }
