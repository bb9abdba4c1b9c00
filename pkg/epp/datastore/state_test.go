package datastore

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func newState() *EndpointState {
	s := NewStore(DefaultPriors)
	s.SetEndpoints([]Endpoint{{Address: "10.0.0.1", Port: 8000}})
	return s.Get("10.0.0.1:8000")
}

// TestLearnsSpeedFromObservations drives one endpoint like a server with a
// known prefill rate and decode step (requests one after another) and checks
// the learned figures approach the truth from the priors.
func TestLearnsSpeedFromObservations(t *testing.T) {
	const rate, step = 1500.0, 0.040 // an A10G-like server, far from the priors
	st := newState()
	now := 0.0
	for i := 0; i < 30; i++ {
		r := &Request{UncachedTokens: 1000 + 100*(i%5), ChunkTokens: 8192}
		st.Picked(r, at(now))
		ttft := float64(r.UncachedTokens)/rate + step
		st.ObserveFirstToken(r, at(now+ttft))
		for k := 1; k <= 10; k++ {
			st.ObserveTokens(r, 1, at(now+ttft+float64(k)*step))
		}
		st.ObserveCompletion(r, 11, at(now+ttft+10*step))
		now += ttft + 10*step + 0.5
	}
	sp := st.Speed()
	if math.Abs(sp.PrefillTokensPerSecond-rate)/rate > 0.15 {
		t.Errorf("prefill rate learned %.0f, true %.0f", sp.PrefillTokensPerSecond, rate)
	}
	if math.Abs(sp.DecodeStepSeconds-step)/step > 0.05 {
		t.Errorf("decode step learned %.4f, true %.4f", sp.DecodeStepSeconds, step)
	}
}

func TestPickCountsImmediatelyAndSampleResetsCorrections(t *testing.T) {
	st := newState()
	st.UpdateMetrics(Metrics{Waiting: 2, Running: 3}, at(0))
	var v View
	r1 := &Request{UncachedTokens: 400}
	r2 := &Request{UncachedTokens: 600}
	st.Picked(r1, at(0.01))
	st.Picked(r2, at(0.02))
	st.View(at(0.02), 0, &v)
	if v.WaitingEstimate() != 4 || v.LoadEstimate() != 7 || v.InFlight != 2 || v.PendingPrefillTokens != 1000 {
		t.Fatalf("after two picks: waiting %d load %d inflight %d pending %d",
			v.WaitingEstimate(), v.LoadEstimate(), v.InFlight, v.PendingPrefillTokens)
	}
	st.ObserveFirstToken(r1, at(0.05))
	st.View(at(0.05), 0, &v)
	if v.WaitingEstimate() != 3 || v.RunningEstimate() != 4 || v.PendingFirstToken != 1 {
		t.Fatalf("after a first token: waiting %d running %d pending %d", v.WaitingEstimate(), v.RunningEstimate(), v.PendingFirstToken)
	}
	st.UpdateMetrics(Metrics{Waiting: 1, Running: 4}, at(0.06))
	st.View(at(0.06), 0, &v)
	if v.WaitingEstimate() != 1 || v.LoadEstimate() != 5 {
		t.Fatalf("new sample: waiting %d load %d", v.WaitingEstimate(), v.LoadEstimate())
	}
	st.ObserveCompletion(r1, 5, at(0.1))
	st.ObserveCompletion(r2, 0, at(0.1)) // failed before its first token
	st.ObserveCompletion(r2, 0, at(0.2)) // reported twice: counted once
	st.View(at(0.2), 0, &v)
	if v.InFlight != 0 || v.PendingFirstToken != 0 || v.PendingPrefillTokens != 0 || v.BacklogTokens != 0 {
		t.Fatalf("after completion: %+v", v)
	}
}

func TestBacklogDrainsAtLearnedRate(t *testing.T) {
	st := newState() // prior 20k tokens/s
	var v View
	st.Picked(&Request{UncachedTokens: 10000}, at(0))
	st.View(at(0.25), 0, &v)
	if math.Abs(v.BacklogTokens-5000) > 1 {
		t.Fatalf("backlog after 0.25 s = %.0f, want 5000", v.BacklogTokens)
	}
	st.View(at(1), 0, &v)
	if v.BacklogTokens != 0 || v.PendingPrefillTokens != 10000 {
		t.Fatalf("backlog %.0f pending %d", v.BacklogTokens, v.PendingPrefillTokens)
	}
}

func TestStaleness(t *testing.T) {
	st := newState()
	var v View
	st.View(at(0), 200*time.Millisecond, &v)
	if !v.Stale {
		t.Fatal("never-sampled endpoint is not stale")
	}
	st.UpdateMetrics(Metrics{SampledAt: at(0)}, at(0))
	st.View(at(0.1), 200*time.Millisecond, &v)
	if v.Stale {
		t.Fatal("fresh sample is stale")
	}
	st.View(at(0.3), 200*time.Millisecond, &v)
	if !v.Stale {
		t.Fatal("old sample is not stale")
	}
}

func TestStoreKeepsStateAndReusesIDs(t *testing.T) {
	s := NewStore(DefaultPriors)
	var removedIDs []int32
	s.OnRemove(func(id int32) { removedIDs = append(removedIDs, id) })
	a, b := Endpoint{Address: "10.0.0.1", Port: 8000}, Endpoint{Address: "10.0.0.2", Port: 8000}
	s.SetEndpoints([]Endpoint{a, b})
	s.Get(a.Key()).Picked(&Request{UncachedTokens: 1}, at(0))
	added, removed := s.SetEndpoints([]Endpoint{a, {Address: "10.0.0.2", Port: 8000, Labels: map[string]string{"gpu": "h100"}}})
	if len(added)+len(removed) != 0 {
		t.Fatalf("label change added %v removed %v", added, removed)
	}
	var v View
	s.Get(a.Key()).View(at(0), 0, &v)
	if v.InFlight != 1 {
		t.Fatal("state lost across SetEndpoints")
	}
	s.Get(b.Key()).View(at(0), 0, &v)
	if v.Labels["gpu"] != "h100" {
		t.Fatal("labels not updated")
	}
	bid := s.Get(b.Key()).ID()
	_, removed = s.SetEndpoints([]Endpoint{a})
	if len(removed) != 1 || len(removedIDs) != 1 || removedIDs[0] != bid {
		t.Fatalf("removed %v ids %v", removed, removedIDs)
	}
	s.SetEndpoints([]Endpoint{a, {Address: "10.0.0.3", Port: 9000}})
	if got := s.Get("10.0.0.3:9000").ID(); got != bid {
		t.Fatalf("freed id %d not reused, got %d", bid, got)
	}
	if s.Len() != 2 || s.MaxID() != 2 {
		t.Fatalf("len %d maxID %d", s.Len(), s.MaxID())
	}
}

// TestStepLearningIgnoresBatchEchoAndPrefillSteps drives an endpoint like a
// busy server: eight sequences report every step at the same instant, and
// every fourth step also computes a prompt chunk and takes five times longer.
// The decode step must be the typical step (not the last one), the mean
// inter-token time must include the long steps, and a prefill rate learned
// from a first token that arrives right after a long step must stay true.
func TestStepLearningIgnoresBatchEchoAndPrefillSteps(t *testing.T) {
	const step, rate = 0.010, 20000.0
	st := newState()
	var seqs []*Request
	for range 8 {
		r := &Request{UncachedTokens: 10, ChunkTokens: 8192}
		st.Picked(r, at(0))
		st.ObserveFirstToken(r, at(0.001))
		seqs = append(seqs, r)
	}
	now := 0.001
	for k := 1; k <= 400; k++ {
		gap := step
		if k%4 == 0 {
			gap = 5 * step
		}
		now += gap
		for _, r := range seqs {
			st.ObserveTokens(r, 1, at(now))
		}
	}
	sp := st.Speed()
	if math.Abs(sp.DecodeStepSeconds-step)/step > 0.1 {
		t.Errorf("decode step %.4f, want the typical step %.4f", sp.DecodeStepSeconds, step)
	}
	if mean := 2 * step; math.Abs(sp.InterTokenSeconds-mean)/mean > 0.25 {
		t.Errorf("mean inter-token time %.4f, want about %.4f", sp.InterTokenSeconds, mean)
	}
	// Requests whose prefill shares the long step: TTFT = wait + step + prefill.
	for i := range 20 {
		r := &Request{UncachedTokens: 2000, ChunkTokens: 8192}
		st.Picked(r, at(now))
		now += step + 2000/rate
		st.ObserveFirstToken(r, at(now))
		for _, s := range seqs {
			st.ObserveTokens(s, 1, at(now))
		}
		now += float64(i%3) * step
	}
	if got := st.Speed().PrefillTokensPerSecond; math.Abs(got-rate)/rate > 0.15 {
		t.Errorf("prefill rate %.0f, true %.0f", got, rate)
	}
}

// TestLearnsAdapterLoadAndRequestDuration: a request whose adapter was not
// running there teaches the load time (its delay beyond the predicted
// prefill), not the prefill rate; completions teach the request duration.
func TestLearnsAdapterLoadAndRequestDuration(t *testing.T) {
	const rate, step, load = 20000.0, 0.010, 0.2
	st := newState()
	st.UpdateMetrics(Metrics{RunningAdapters: []string{"sql"}, MaxAdapters: 4}, at(0))
	now := 0.0
	for i := range 10 {
		resident := &Request{UncachedTokens: 1000, ChunkTokens: 8192, Adapter: "sql"}
		st.Picked(resident, at(now))
		st.ObserveFirstToken(resident, at(now+1000/rate+step))
		st.ObserveCompletion(resident, 100, at(now+2))
		now += 3
		// A new adapter for each request: none is running, each loads.
		fresh := &Request{UncachedTokens: 1000, ChunkTokens: 8192, Adapter: "a" + strconv.Itoa(i)}
		st.Picked(fresh, at(now))
		st.ObserveFirstToken(fresh, at(now+1000/rate+step+load))
		st.ObserveCompletion(fresh, 100, at(now+2))
		now += 3
		st.UpdateMetrics(Metrics{RunningAdapters: []string{"sql"}, MaxAdapters: 4}, at(now))
	}
	sp := st.Speed()
	if sp.AdapterLoadSamples != 10 || math.Abs(sp.AdapterLoadSeconds-load)/load > 0.2 {
		t.Errorf("adapter load %.3f s over %d samples, want %.3f over 10", sp.AdapterLoadSeconds, sp.AdapterLoadSamples, load)
	}
	if math.Abs(sp.PrefillTokensPerSecond-rate)/rate > 0.25 {
		t.Errorf("prefill rate %.0f polluted by adapter loads, true %.0f", sp.PrefillTokensPerSecond, rate)
	}
	if sp.RequestSamples != 20 || math.Abs(sp.RequestSeconds-2) > 0.01 {
		t.Errorf("request duration %.3f s over %d samples, want 2 over 20", sp.RequestSeconds, sp.RequestSamples)
	}
}

// TestServedModelsKnownAfterReadKeptUntilReplaced: what an endpoint serves is
// unknown until its list is read; the list survives metric samples and
// endpoint-set updates that keep the endpoint, a view keeps the list it was
// taken with, and an endpoint that leaves and comes back starts unknown.
func TestServedModelsKnownAfterReadKeptUntilReplaced(t *testing.T) {
	s := NewStore(DefaultPriors)
	ep := Endpoint{Address: "10.0.0.1", Port: 8000}
	s.SetEndpoints([]Endpoint{ep})
	st := s.Get(ep.Key())
	var v View
	st.View(at(0), 0, &v)
	if v.Models != nil || st.ServedModels() != nil {
		t.Fatalf("models known before any read: %+v", v.Models)
	}

	if !s.SetServedModels(ep.Key(), NewServedModels([]string{"sql", "base", "sql"}, at(1))) {
		t.Fatal("endpoint not found")
	}
	if s.SetServedModels("10.9.9.9:8000", NewServedModels([]string{"base"}, at(1))) {
		t.Fatal("stored the models of an unknown endpoint")
	}
	st.UpdateMetrics(Metrics{Waiting: 1}, at(2))
	s.SetEndpoints([]Endpoint{ep, {Address: "10.0.0.2", Port: 8000}})
	st.View(at(2), 0, &v)
	if v.Models == nil || !slices.Equal(v.Models.Names, []string{"base", "sql"}) || !v.Models.ReadAt.Equal(at(1)) {
		t.Fatalf("models after a sample and an endpoint update: %+v", v.Models)
	}
	if !v.Models.Serves("sql") || !v.Models.Serves("base") || v.Models.Serves("chat") || v.Models.Serves("") {
		t.Fatalf("Serves disagrees with the list %v", v.Models.Names)
	}

	st.SetServedModels(NewServedModels([]string{"base"}, at(3)))
	if !v.Models.Serves("sql") {
		t.Fatal("a new list changed a view taken before it")
	}
	if m := st.ServedModels(); m.Serves("sql") || !m.ReadAt.Equal(at(3)) {
		t.Fatalf("the new list was not stored: %+v", m)
	}

	s.SetEndpoints(nil)
	s.SetEndpoints([]Endpoint{ep})
	if m := s.Get(ep.Key()).ServedModels(); m != nil {
		t.Fatalf("an endpoint that came back kept its old list: %+v", m)
	}
}

// TestPrefillRateFromBusyIntervals: requests that arrive together finish their
// prefill in the same engine step, so the first one's time to first token
// holds the second one's prompt too. Learning from busy intervals between
// first tokens gets the server's rate; learning from each time to first token
// (with the work estimated ahead at the pick) got it some 25% slow here.
func TestPrefillRateFromBusyIntervals(t *testing.T) {
	const rate, step = 10000.0, 0.02
	st := newState()
	now := 0.0
	for i := 0; i < 40; i++ {
		a := &Request{UncachedTokens: 3000, ChunkTokens: 8192}
		b := &Request{UncachedTokens: 3000, ChunkTokens: 8192}
		st.Picked(a, at(now))
		st.Picked(b, at(now+0.001)) // joins a's step
		done := now + step/2 + 6000/rate + step
		st.ObserveFirstToken(a, at(done))
		st.ObserveFirstToken(b, at(done))
		st.ObserveCompletion(a, 10, at(done+9*step))
		st.ObserveCompletion(b, 10, at(done+9*step))
		now = done + 1
	}
	if got := st.Speed().PrefillTokensPerSecond; math.Abs(got-rate)/rate > 0.05 {
		t.Fatalf("prefill rate learned %.0f tokens/s, true %.0f", got, rate)
	}
}

// TestStallDoesNotCollapseRate: a request that waits seconds for memory (or
// anything but prefill) before its first token moves the rate by a bounded
// amount instead of dividing it by the stall, and the rate comes back.
func TestStallDoesNotCollapseRate(t *testing.T) {
	const rate, step = 10000.0, 0.02
	st := newState()
	now := 0.0
	serve := func(wait float64) {
		r := &Request{UncachedTokens: 1000, ChunkTokens: 8192}
		st.Picked(r, at(now))
		ft := now + wait + step + 1000/rate
		st.ObserveFirstToken(r, at(ft))
		st.ObserveCompletion(r, 10, at(ft+9*step))
		now = ft + 1
	}
	for range 40 {
		serve(0)
	}
	serve(20) // a 20 s stall: 200 times the request's prefill
	if got := st.Speed().PrefillTokensPerSecond; got < 0.4*rate {
		t.Fatalf("one stalled request dropped the rate to %.0f tokens/s (true %.0f)", got, rate)
	}
	for range 60 {
		serve(0)
	}
	if got := st.Speed().PrefillTokensPerSecond; math.Abs(got-rate)/rate > 0.05 {
		t.Fatalf("rate %.0f tokens/s after the stall passed, true %.0f", got, rate)
	}
}

// TestPassedOverRequestsStayInBacklog: a request whose first token comes
// after that of one picked later was passed over by the server (an adapter
// waiting for a slot): its prompt is not being prefilled, so the backlog
// keeps it instead of draining it away, and its late first token teaches no
// slow rate.
func TestPassedOverRequestsStayInBacklog(t *testing.T) {
	st := newState()
	var v View
	for range 5 { // learn the prior's rate back
		r := &Request{UncachedTokens: 2000, ChunkTokens: 8192}
		st.Picked(r, at(0))
		st.ObserveFirstToken(r, at(0.1))
		st.ObserveCompletion(r, 1, at(0.2))
	}
	rate := st.Speed().PrefillTokensPerSecond
	blocked := &Request{UncachedTokens: 1000, ChunkTokens: 8192, Adapter: "x"}
	next := &Request{UncachedTokens: 500, ChunkTokens: 8192}
	st.Picked(blocked, at(1))
	st.Picked(next, at(1.01))
	st.ObserveFirstToken(next, at(1.05))
	st.View(at(11), 0, &v)
	if v.BacklogTokens != 1000 {
		t.Fatalf("10 s after it was passed over, backlog %.0f tokens, want the waiting prompt's 1000", v.BacklogTokens)
	}
	st.Picked(&Request{UncachedTokens: 300}, at(11))
	st.View(at(11), 0, &v)
	if v.BacklogTokens != 1300 {
		t.Fatalf("new pick on top: backlog %.0f, want 1300", v.BacklogTokens)
	}
	st.ObserveFirstToken(blocked, at(12))
	st.View(at(12), 0, &v)
	if v.BacklogTokens > 300 {
		t.Fatalf("after its first token, backlog %.0f, want at most the later pick's 300", v.BacklogTokens)
	}
	if got := st.Speed().PrefillTokensPerSecond; got < 0.5*rate {
		t.Fatalf("the passed-over request's 11 s wait dropped the rate from %.0f to %.0f", rate, got)
	}
}
