package des

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/workload"
	"github.com/igw-dev/igw/pkg/sim"
)

// event is the next thing to happen in a run: its time, kind and subject
// (a pod, or a member cluster and its pod).
type event struct {
	at         time.Duration
	kind       string
	which, sub int
}

// offer makes the event at t the next one if it is earlier; on equal times
// the one offered first stays.
func (e *event) offer(t time.Duration, kind string, which, sub int) {
	if t < e.at {
		*e = event{at: t, kind: kind, which: which, sub: sub}
	}
}

// eventLoop is what a run's loop shares: the pods, whose step ends come
// first on equal times (their events happened), the workload, the warmup
// mark and the fleet's counters over the measured window.
type eventLoop struct {
	job      bench.Job
	rec      *bench.Recorder
	gen      *workload.Generator
	pods     []*sim.Engine
	handle   func([]sim.Event)
	arrive   func(*workload.Request)
	inFlight func() int
	// stepped, when set, follows the handling of a pod's step end.
	stepped func(at time.Duration)
	// giveUpAfter, when set, fails the run once an event comes this long
	// after the end of arrivals: requests are stuck in flight.
	giveUpAfter time.Duration
	snap        sim.Snapshot
	// last is the time of the last event that moved virtual time on.
	last time.Duration
}

// run handles events in time order until arrivals have stopped and nothing
// is in flight. Each turn the next event is the earliest of the pods' step
// ends ("step", the pod), then what offer adds, then the warmup mark, then
// the next arrival ("arrival"). The loop handles the step ends, arrivals and
// the warmup mark; do handles every other event (kind "" when there is none)
// and says whether virtual time moved on.
// Progress is reported and the SLO guard checked once a simulated second.
func (l *eventLoop) run(ctx context.Context, progress func(float64), offer func(*event), do func(event) (bool, error)) error {
	sc := l.job.Scenario
	warmupDone := false
	var baseline bench.FleetCounters
	reported, guarded := time.Duration(-1), time.Duration(0)
	for iter := 0; ; iter++ {
		if iter&4095 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		ev := event{at: math.MaxInt64, which: -1, sub: -1}
		for i, e := range l.pods {
			if t, busy := e.NextEventTime(); busy {
				ev.offer(t, "step", i, -1)
			}
		}
		arrival, more := l.gen.Next()
		if !more && l.inFlight() == 0 {
			break
		}
		offer(&ev)
		if !warmupDone {
			ev.offer(sc.Warmup, "warmup", -1, -1)
		}
		if more {
			ev.offer(arrival, "arrival", -1, -1)
		}
		switch ev.kind {
		case "warmup":
			warmupDone = true
			baseline = l.counters(ev.at)
		case "step":
			l.handle(l.pods[ev.which].Advance(ev.at))
			if l.stepped != nil {
				l.stepped(ev.at)
			}
		case "arrival":
			l.arrive(l.gen.Pop())
		default:
			if moved, err := do(ev); err != nil {
				return err
			} else if !moved {
				continue
			}
		}
		if ev.kind != "warmup" {
			l.last = ev.at
			if l.giveUpAfter > 0 && ev.at > sc.Duration+l.giveUpAfter {
				return fmt.Errorf("requests in flight %v after the end of arrivals (virtual time %v)", l.giveUpAfter, ev.at)
			}
		}
		if t := min(ev.at, sc.Duration); t-reported >= time.Second {
			reported = t
			progress(0.99 * t.Seconds() / sc.Duration.Seconds())
		}
		if g := l.job.Guard; g != nil && ev.at-guarded >= time.Second {
			guarded = ev.at
			if g.Broken(l.rec.Trace(), ev.at) {
				return bench.ErrSLOBroken
			}
		}
	}
	end := time.Duration(0)
	for _, e := range l.pods {
		end = max(end, e.Now())
	}
	final := l.counters(end)
	l.rec.SetFleet(bench.FleetCounters{
		PrefixQueries: final.PrefixQueries - baseline.PrefixQueries,
		PrefixHits:    final.PrefixHits - baseline.PrefixHits,
		LoRALoads:     final.LoRALoads - baseline.LoRALoads,
	})
	progress(1)
	return nil
}

// counters sums the pods' cumulative server counters at t, handing the
// events of steps up to t over first.
func (l *eventLoop) counters(t time.Duration) bench.FleetCounters {
	var c bench.FleetCounters
	for _, e := range l.pods {
		l.handle(e.Advance(max(t, e.Now())))
		e.SnapshotInto(&l.snap)
		c.PrefixQueries += l.snap.PrefixCacheQueries
		c.PrefixHits += l.snap.PrefixCacheHits
		c.LoRALoads += l.snap.LoRALoads
	}
	return c
}
