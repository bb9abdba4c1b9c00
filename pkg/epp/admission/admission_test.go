package admission

import (
	"math"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

func view(waiting int, interToken float64) *datastore.View {
	learner := latency.NewLearner(latency.DefaultPriors)
	v := &datastore.View{HasMetrics: true, MeanPromptTokens: 1000,
		Metrics: datastore.Metrics{Waiting: waiting}, Speed: learner.Speed()}
	if interToken > 0 {
		v.Speed.DecodeSamples, v.Speed.InterTokenSeconds = 10, interToken
	}
	return v
}

// Priority 0 is shed only when every candidate is overloaded; a negative
// priority already when every candidate is saturated.
func TestOverloadBoundsShedAtAnyPriority(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel
	p.MaxWaitSeconds, p.MaxInterTokenSeconds = 1, 0.04
	saturated := []*datastore.View{view(5, 0), view(6, 0)}
	if d := p.Decide(saturated, -1, 1000, 0, m, nil); !d.Shed || d.RetryAfterSeconds < 1 {
		t.Errorf("priority -1 on a saturated fleet: %+v", d)
	}
	if d := p.Decide(saturated, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("priority 0 on a saturated but not overloaded fleet: %+v", d)
	}
	overloaded := []*datastore.View{view(500, 0), view(100, 0.01)}
	d := p.Decide(overloaded, 0, 1000, 0, m, nil)
	if !d.Shed || d.RetryAfterSeconds < 1 || d.RetryAfterSeconds > p.MaxRetryAfterSeconds {
		t.Errorf("priority 0 on an overloaded fleet: %+v", d)
	}
	if d := p.Decide(append(overloaded, view(0, 0.01)), 10, 1000, 0, m, nil); d.Shed {
		t.Errorf("one endpoint with room: %+v", d)
	}
	off := p
	off.MaxWaitSeconds, off.MaxInterTokenSeconds = 0, 0
	if d := off.Decide(overloaded, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("bounds off: %+v", d)
	}
}

// Tokens far apart mark an endpoint busy with the picker's streams
// overloaded, and picks go elsewhere while another is within the bounds; one
// with nothing in flight is not judged on its past batch's pace.
func TestInterTokenBoundSteersPicks(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel
	p.MaxWaitSeconds, p.MaxInterTokenSeconds = 1, 0.06
	slow, idleSlow, fast := view(0, 0.2), view(0, 0.2), view(0, 0.01)
	slow.InFlight, fast.InFlight = 3, 3
	if d := p.Decide([]*datastore.View{slow, idleSlow}, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("shed with an idle endpoint: %+v", d)
	}
	if d := p.Decide([]*datastore.View{slow, slow}, 0, 1000, 0, m, nil); !d.Shed {
		t.Errorf("not shed with every endpoint decoding at 0.2 s a token: %+v", d)
	}
	got := p.WithinBounds([]*datastore.View{slow, idleSlow, fast}, 1000, 0, m, nil, nil)
	if len(got) != 2 || got[0] != idleSlow || got[1] != fast {
		t.Errorf("within bounds: %d endpoints, want the idle one and the fast one", len(got))
	}
	late := view(0, 0.01)
	late.OldestWait, late.Overdue = 2*time.Second, 2*time.Second
	if d := p.Decide([]*datastore.View{late}, 0, 1000, 0, m, nil); !d.Shed {
		t.Errorf("a request 2 s past its predicted first token there already: not shed")
	}
}

// A long prompt's own prefill is no overload: the age of the requests
// waiting for their first token counts against the wait bound only past the
// first token predicted for them (a server that stopped prefilling), not
// while the prefill runs to schedule.
func TestOnlyLatenessCountsAgainstTheWaitBound(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel // wait bound 1.5 s
	prefilling := view(0, 0.01)
	prefilling.InFlight, prefilling.OldestWait = 1, 5*time.Second
	if d := p.Decide([]*datastore.View{prefilling}, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("shed while a request of 5 s of prefill runs to schedule: %+v", d)
	}
	late := *prefilling
	late.Overdue = 600 * time.Millisecond
	if d := p.Decide([]*datastore.View{&late}, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("shed with the server 0.6 s late and nothing ahead: %+v", d)
	}
	behind := view(20, 0.01) // about 1 s of prefill ahead
	behind.Overdue = 600 * time.Millisecond
	if d := p.Decide([]*datastore.View{behind}, 0, 1000, 0, m, nil); !d.Shed {
		t.Errorf("not shed with about 1 s of prefill ahead and the server 0.6 s late")
	}
}

// streaming is an endpoint with eight streams whose tokens come interToken
// seconds apart, under a policy that bounds the time between tokens at 60 ms
// (and the wait far away).
func streaming(interToken float64) (Policy, latency.Model, *datastore.View) {
	p := DefaultPolicy
	p.MaxWaitSeconds, p.MaxInterTokenSeconds = 100, 0.06
	v := view(0, interToken)
	v.InFlight = 8
	return p, latency.DefaultModel, v
}

// A request's own prefill is steps every stream of the endpoint waits out:
// where tokens come just under the bound, a long prompt would push them
// over it and is held off, while a short one still goes there.
func TestOwnPrefillCountsAgainstTheInterTokenBound(t *testing.T) {
	p, m, near := streaming(0.055)
	// 20k tokens/s; streams live 100 tokens: 20,000 tokens more are a second
	// of prefill, 10 ms on every token of a stream there.
	near.Speed.PrefillTokensPerSecond, near.Speed.OutputTokens = 20000, 100
	if got := m.InterTokenWith(near.Speed, 20000, 0, false); math.Abs(got-0.065) > 1e-9 {
		t.Errorf("predicted time between tokens with a 20k-token prompt: %v s, want 0.065", got)
	}
	if d := p.Decide([]*datastore.View{near}, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("a 1,000-token prompt (0.5 ms a token more there) shed: %+v", d)
	}
	if d := p.Decide([]*datastore.View{near}, 0, 20000, 0, m, nil); !d.Shed {
		t.Errorf("a 20,000-token prompt, which would take the streams there to 65 ms a token (bound 60 ms): not shed")
	}
	cached := uncached{near: 500}
	if got := p.WithinBounds([]*datastore.View{near}, 20000, 0, m, cached, nil); len(got) != 1 {
		t.Errorf("a 20,000-token prompt of which the endpoint would prefill 500: not within the bounds")
	}
}

// Where the time between tokens grows with the KV cache's use, a request
// that would fill much of the cache slows every stream there: on an endpoint
// whose tokens come at 50 ms with half its 100,000-token cache used, 40 ms
// more per whole cache, a 30,000-token prompt (the cache at about 0.8 with
// it) would take them to 62 ms and is shed (bound 60 ms); a 5,000-token
// one is not, nor is the long one where no line was learned.
func TestKVUseCountsAgainstTheInterTokenBound(t *testing.T) {
	p, m, fill := streaming(0.05)
	fill.Metrics.KVCacheKnown, fill.Metrics.KVCacheUsage = true, 0.5
	fill.Metrics.NumGPUBlocks, fill.Metrics.BlockSizeTokens = 6250, 16
	// The prefill's own share kept out of the way: a fast endpoint, long streams.
	fill.Speed.PrefillTokensPerSecond, fill.Speed.OutputTokens = 1e9, 100
	fill.Speed.InterTokenKVUse, fill.Speed.InterTokenPerKVUse = 0.5, 0.04
	if d := p.Decide([]*datastore.View{fill}, 0, 30000, 0, m, nil); !d.Shed {
		t.Errorf("a 30,000-token prompt that would take the cache from 0.5 to 0.8: not shed")
	}
	if d := p.Decide([]*datastore.View{fill}, 0, 5000, 0, m, nil); d.Shed {
		t.Errorf("a 5,000-token prompt (the cache to 0.55): shed: %+v", d)
	}
	fill.Speed.InterTokenPerKVUse = 0
	if d := p.Decide([]*datastore.View{fill}, 0, 30000, 0, m, nil); d.Shed {
		t.Errorf("no line of time between tokens against KV use learned: shed: %+v", d)
	}
}

// On an endpoint serving LoRA adapters, requests passed over for an adapter
// slot are not load: the oldest wait is held to twice the first-token budget,
// not the wait bound, while the lateness of the requests in line, the prefill
// backlog and the request's own wait for a slot are held to the wait bound. Its time
// between tokens is held to the same bound as any endpoint's.
func TestAdapterSlotWaitsAreNotOverload(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel // wait bound 1.5 s, first-token budget 2 s, 60 ms between tokens
	base := view(20, 0.03)                      // 20 waiting × 1,000 tokens: about 1 s of prefill
	base.InFlight, base.OldestWait, base.Overdue = 40, 3*time.Second, 3*time.Second
	if d := p.Decide([]*datastore.View{base}, 0, 1000, 0, m, nil); !d.Shed {
		t.Fatalf("a base-model endpoint whose oldest request is 3 s late: not shed")
	}
	running, waiting, sent := *base, *base, *base
	running.Metrics.RunningAdapters = []string{"a"}
	waiting.Metrics.WaitingAdapters = []string{"b"}
	sent.AdaptersSinceSample = []string{"c"}
	for name, v := range map[string]*datastore.View{"running": &running, "waiting": &waiting, "sent since the sample": &sent} {
		if d := p.Decide([]*datastore.View{v}, 0, 1000, 0, m, nil); d.Shed {
			t.Errorf("adapter %s, the oldest request waiting 3 s for a slot: shed %+v", name, d)
		}
		if got := p.WithinBounds([]*datastore.View{v}, 1000, 0, m, nil, nil); len(got) != 1 {
			t.Errorf("adapter %s: not within the bounds", name)
		}
		overloaded := map[string]func(w *datastore.View){
			"its oldest request waited 5 s":    func(w *datastore.View) { w.OldestWait = 5 * time.Second },
			"a request in line is 2 s late":    func(w *datastore.View) { w.OverdueInLine = 2 * time.Second },
			"5 s of prefill queued":            func(w *datastore.View) { w.Metrics.Waiting = 100 },
			"the request waits 1 s for a slot": func(w *datastore.View) { w.AdapterSlotWaitSeconds = 1 },
			"tokens 70 ms apart (bound 60 ms)": func(w *datastore.View) { w.Speed.InterTokenSeconds = 0.07 },
		}
		for why, set := range overloaded {
			w := *v
			set(&w)
			if d := p.Decide([]*datastore.View{&w}, 0, 1000, 0, m, nil); !d.Shed {
				t.Errorf("adapter %s, %s: not shed", name, why)
			}
		}
	}
	fine := *base
	fine.Overdue, fine.Speed.InterTokenSeconds = 0, 0.05
	if p.Overloaded(&fine, 0, 0, 1000, m) {
		t.Error("a base-model endpoint with tokens 50 ms apart (bound 60 ms) is overloaded")
	}
}

// The bounds are on by default: no configuration is needed for the excess of
// an overloaded fleet to be shed.
func TestOverloadBoundsAreOnByDefault(t *testing.T) {
	if DefaultPolicy.MaxWaitSeconds <= 0 || DefaultPolicy.MaxInterTokenSeconds <= 0 || !DefaultPolicy.Enabled {
		t.Errorf("default policy %+v: overload bounds off", DefaultPolicy)
	}
}

// uncached is a Prefill that knows each endpoint's uncached prompt tokens.
type uncached map[*datastore.View]int

func (u uncached) UncachedTokens(v *datastore.View) int { return u[v] }

// An endpoint past the bound between tokens alone stays a candidate when it
// holds more of the prompt than every endpoint within the bounds (moving the
// request would prefill the rest there); one that holds no more, or whose
// wait is past its bound, does not.
func TestInterTokenBoundKeepsTheEndpointHoldingThePrompt(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel
	p.MaxWaitSeconds, p.MaxInterTokenSeconds = 1, 0.06
	holder, other, fast := view(0, 0.07), view(0, 0.07), view(0, 0.03)
	waitingHolder := view(0, 0.07)
	waitingHolder.OldestWait, waitingHolder.Overdue = 2*time.Second, 2*time.Second
	for _, v := range []*datastore.View{holder, other, fast, waitingHolder} {
		v.InFlight = 40
	}
	prefill := uncached{holder: 16, other: 7200, fast: 7200, waitingHolder: 16}
	got := p.WithinBounds([]*datastore.View{holder, other, fast, waitingHolder}, 7200, 0, m, prefill, nil)
	if len(got) != 2 || got[0] != fast || got[1] != holder {
		t.Errorf("within bounds: %d endpoints, want the fast one and the one holding the prompt", len(got))
	}
	prefill[fast] = 16
	got = p.WithinBounds([]*datastore.View{holder, other, fast, waitingHolder}, 7200, 0, m, prefill, nil)
	if len(got) != 1 || got[0] != fast {
		t.Errorf("within bounds with the fast one holding the prompt too: %d endpoints, want it alone", len(got))
	}
	if got := p.WithinBounds([]*datastore.View{holder, other}, 7200, 0, m, prefill, nil); len(got) != 0 {
		t.Errorf("every endpoint past a bound: %d within, want none", len(got))
	}
}

// A request waits in the picker's queue only when every candidate is over
// the bounds (not for its priority alone), the soonest start is over the
// wait bound by less than the time it may still wait there, the queue is on
// and its budget is not spent; the time it waited counts against the wait
// bound.
func TestQueueDecisions(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel
	// 1.64 and 1.70 s ahead: over the 1.5 s bound by less than the 0.25 s
	// the request may wait in the queue.
	overloaded := []*datastore.View{view(32, 0), view(33, 0)}
	if d := p.Decide(overloaded, 0, 1000, 0, m, nil); !d.Shed || !d.Queue {
		t.Errorf("overloaded fleet: %+v, want shed to the queue", d)
	}
	if d := p.Decide(overloaded, 0, 1000, 0.2, m, nil); !d.Shed || d.Queue {
		t.Errorf("1.64 s ahead after 0.2 s in the queue: %+v, want shed outright", d)
	}
	if d := p.Decide([]*datastore.View{view(500, 0), view(400, 0)}, 0, 1000, 0, m, nil); !d.Shed || d.Queue {
		t.Errorf("a fleet far over the bounds (20 s and more ahead): %+v, want shed outright", d)
	}
	if d := p.Decide(overloaded, 0, 1000, p.QueueWaitSeconds(), m, nil); !d.Shed || d.Queue {
		t.Errorf("budget spent: %+v, want shed outright", d)
	}
	off := p
	off.Queue.MaxRequests = 0
	if d := off.Decide(overloaded, 0, 1000, 0, m, nil); !d.Shed || d.Queue {
		t.Errorf("queue off: %+v", d)
	}
	saturated := []*datastore.View{view(5, 0)}
	if d := p.Decide(saturated, -1, 1000, 0, m, nil); !d.Shed || d.Queue {
		t.Errorf("a low priority on a saturated fleet: %+v, want shed outright", d)
	}
	// 0.5 s of work ahead: within the 1.5 s bound fresh, over it after 1.2 s in the queue.
	half := []*datastore.View{view(10, 0)}
	if d := p.Decide(half, 0, 1000, 0, m, nil); d.Shed {
		t.Errorf("0.5 s ahead: %+v", d)
	}
	if d := p.Decide(half, 0, 1000, 1.2, m, nil); !d.Shed {
		t.Errorf("0.5 s ahead after 1.2 s in the queue: %+v, want over the bound", d)
	}
	short := p
	short.Queue.MaxWaitSeconds = 0.25
	if got := short.QueueWaitSeconds(); got != 0.25 {
		t.Errorf("queue wait %v, want its own 0.25 s", got)
	}
	short.Queue.MaxWaitSeconds = 5
	if got := short.QueueWaitSeconds(); got != p.MaxWaitSeconds {
		t.Errorf("queue wait %v, want at most the wait bound %v", got, p.MaxWaitSeconds)
	}
}

// Fitted to a per-token budget, the bound between tokens rises toward it on
// an endpoint whose slow streams are learned to run close to the mean, and
// stays at its share of the budget where they spread wide, before enough
// streams finished, or where the bound was set as is.
func TestInterTokenBoundFollowsTheStreamsSpread(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel // 100 ms a token: bound 65 ms
	spread := func(q float64, samples int) *datastore.View {
		v := view(0, 0.08)
		v.InFlight = 10
		v.Speed.StreamSpread, v.Speed.SpreadSamples = q, samples
		return v
	}
	if p.TokensTooFarApart(spread(1.05, 100), 0, m) {
		t.Error("tokens 80 ms apart, slow streams 5% over the mean: 84 ms within 90% of 100 ms, yet too far apart")
	}
	for why, v := range map[string]*datastore.View{
		"nothing learned":                spread(0, 0),
		"20 streams finished":            spread(1.05, 20),
		"slow streams 60% over the mean": spread(1.6, 100),
	} {
		if !p.TokensTooFarApart(v, 0, m) {
			t.Errorf("tokens 80 ms apart, %s: not too far apart (bound 65 ms)", why)
		}
	}
	asIs := p
	asIs.TPOTSeconds = 0
	if !asIs.TokensTooFarApart(spread(1.05, 100), 0, m) {
		t.Error("a bound of 65 ms set as is: tokens 80 ms apart not too far apart")
	}
	// Before its own, an endpoint takes its speed class's spread once as
	// many streams finished across the class; its own once it has them.
	pooled := spread(1.6, 20)
	pooled.ClassStreamSpread, pooled.ClassSpreadSamples = 1.05, 100
	if p.TokensTooFarApart(pooled, 0, m) {
		t.Error("20 streams of its own, the class's slow streams 5% over the mean: too far apart")
	}
	pooled.ClassSpreadSamples = 20
	if !p.TokensTooFarApart(pooled, 0, m) {
		t.Error("20 streams of its own, 20 across the class: not too far apart (bound 65 ms)")
	}
	own := spread(1.6, 100)
	own.ClassStreamSpread, own.ClassSpreadSamples = 1.05, 500
	if !p.TokensTooFarApart(own, 0, m) {
		t.Error("its own slow streams 60% over the mean, the class's 5%: the class's spread taken over its own")
	}
}

// Picks may go to an endpoint whose slow streams would run within 93% of
// the per-token budget, and the shed decision keeps such a request; while
// the picker sheds a steady share of its requests, the shed decision holds
// them to 90%.
func TestShedDecisionKeepsTheFullMarginInASustainedOverload(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel // 100 ms a token
	v := view(0, 0.0915)                        // streams at their mean: 91.5 ms
	v.InFlight = 10
	v.Speed.StreamSpread, v.Speed.SpreadSamples = 1, 100
	cands := []*datastore.View{v}
	if got := p.WithinBounds(cands, 100, 0, m, nil, nil); len(got) != 1 {
		t.Errorf("tokens 91.5 ms apart: left out of the picks (bound 93 ms)")
	}
	for _, share := range []float64{0, 0.05} {
		if d := p.WithShedShare(share).Decide(cands, 0, 100, 0, m, nil); d.Shed {
			t.Errorf("%.0f%% of requests shed lately, tokens 91.5 ms apart: %+v, want kept (bound 93 ms)", 100*share, d)
		}
	}
	if d := p.WithShedShare(0.2).Decide(cands, 0, 100, 0, m, nil); !d.Shed {
		t.Errorf("20%% of requests shed lately, tokens 91.5 ms apart: %+v, want shed (bound 90 ms)", d)
	}
}

// A full KV cache makes a request wait for memory however short the queued
// prefill: the share of the cache to be freed before the prompt fits, times
// the mean request duration there. A 20,000-token prompt on a 100,000-token
// cache at 0.95 must wait for 0.15 of it, 3 s at 20 s a request, past the
// 1.5 s wait bound; with half the cache free, or before any request
// finished there, it waits for nothing.
func TestAFullKVCacheIsAWaitForMemory(t *testing.T) {
	p, m := DefaultPolicy, latency.DefaultModel
	full := view(0, 0)
	full.Metrics.KVCacheKnown, full.Metrics.KVCacheUsage = true, 0.95
	full.Metrics.NumGPUBlocks, full.Metrics.BlockSizeTokens = 6250, 16
	full.Speed.RequestSamples, full.Speed.RequestSeconds = 5, 20
	drain := m.DrainSeconds(full.Queue(), 20000)
	if got := PredictedWait(full, 20000, m); math.Abs(got-drain-3) > 1e-9 {
		t.Errorf("predicted wait on a full cache: %v s, want the %v s of queued prefill and 3 s for memory", got, drain)
	}
	if d := p.Decide([]*datastore.View{full}, 0, 20000, 0, m, nil); !d.Shed {
		t.Errorf("a 20,000-token prompt that must wait 3 s for memory (wait bound 1.5 s): not shed")
	}
	if p.StartsSoon(full, 20000, m, 0.5) {
		t.Errorf("a full cache said to start a 20,000-token prompt soon")
	}
	roomy := *full
	roomy.Metrics.KVCacheUsage = 0.5
	unmeasured := *full
	unmeasured.Speed.RequestSamples = 0
	for name, v := range map[string]*datastore.View{"half the cache free": &roomy, "no request finished yet": &unmeasured} {
		if got := PredictedWait(v, 20000, m); got != drain {
			t.Errorf("%s: predicted wait %v s, want the queued prefill's %v s", name, got, drain)
		}
	}
}
