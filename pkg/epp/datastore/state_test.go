package datastore

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/latency"
)

var t0 = time.Unix(1000, 0)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func newState() *EndpointState {
	s := NewStore(latency.DefaultPriors)
	s.SetEndpoints([]Endpoint{{Address: "10.0.0.1", Port: 8000}})
	return s.Get("10.0.0.1:8000")
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
	s := NewStore(latency.DefaultPriors)
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

// TestStoreGivesIDsInAStableOrder: new endpoints get IDs in the order they
// are set, and freed IDs go back in the order of their keys, so that two runs
// that set the same endpoints break ties between them alike (the benchmark's
// global round-robin baseline gave other figures on every run when IDs
// followed a map's order).
func TestStoreGivesIDsInAStableOrder(t *testing.T) {
	ep := func(i int) Endpoint { return Endpoint{Address: fmt.Sprintf("10.0.0.%d", i), Port: 8000} }
	for range 20 {
		s := NewStore(latency.DefaultPriors)
		s.SetEndpoints([]Endpoint{ep(3), ep(1), ep(2), ep(1)})
		for i, want := range map[int]int32{3: 0, 1: 1, 2: 2} {
			if got := s.Get(ep(i).Key()).ID(); got != want {
				t.Fatalf("endpoint %d: id %d, want %d (the order set, a duplicate at its first place)", i, got, want)
			}
		}
		// 1 and 3 leave (ids 1 and 0, freed in key order, for later calls); 5 and 4 come.
		s.SetEndpoints([]Endpoint{ep(2), ep(5), ep(4)})
		if a, b := s.Get(ep(5).Key()).ID(), s.Get(ep(4).Key()).ID(); a != 3 || b != 4 {
			t.Fatalf("ids %d and %d for the endpoints added, want 3 and 4", a, b)
		}
		s.SetEndpoints([]Endpoint{ep(2), ep(5), ep(4), ep(7), ep(6)})
		if a, b := s.Get(ep(7).Key()).ID(), s.Get(ep(6).Key()).ID(); a != 0 || b != 1 {
			t.Fatalf("ids %d and %d for the endpoints added after two left, want their freed 0 and 1", a, b)
		}
	}
}

// TestServedModelsKnownAfterReadKeptUntilReplaced: what an endpoint serves is
// unknown until its list is read; the list survives metric samples and
// endpoint-set updates that keep the endpoint, a view keeps the list it was
// taken with, and an endpoint that leaves and comes back starts unknown.
func TestServedModelsKnownAfterReadKeptUntilReplaced(t *testing.T) {
	s := NewStore(latency.DefaultPriors)
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

// Overdue is how far the requests awaiting a first token are past the one
// predicted at their pick: nothing while a long prompt's prefill runs to
// schedule, however old it is, and the most any request is late once due.
func TestOverdueCountsOnlyLateness(t *testing.T) {
	st := newState()
	long := &Request{UncachedTokens: 100_000, ChunkTokens: 2048}
	st.Picked(long, at(0))
	predicted := long.predictedTTFT
	if predicted < 2*time.Second {
		t.Fatalf("predicted first token of a 100k-token prompt %v, want seconds", predicted)
	}
	var v View
	st.View(at(0).Add(predicted-100*time.Millisecond), 0, &v)
	if v.Overdue != 0 || v.OldestWait != predicted-100*time.Millisecond {
		t.Fatalf("before the predicted first token: overdue %v (want 0), oldest wait %v", v.Overdue, v.OldestWait)
	}
	short := &Request{UncachedTokens: 10, ChunkTokens: 2048}
	st.Picked(short, at(1))
	st.View(at(0).Add(predicted+time.Second), 0, &v)
	longLate, shortLate := time.Second, predicted-short.predictedTTFT
	if want := max(longLate, shortLate); v.Overdue != want {
		t.Fatalf("overdue %v, want the most of the long prompt's %v and the short one's %v", v.Overdue, longLate, shortLate)
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
	if late := 10*time.Second - blocked.predictedTTFT; v.OldestWait != 10*time.Second || v.Overdue != late || v.OverdueInLine != 0 {
		t.Fatalf("oldest wait %v, overdue %v, in line %v; want 10s, %v and none (the one waiting was passed over)",
			v.OldestWait, v.Overdue, v.OverdueInLine, late)
	}
	inLine := &Request{UncachedTokens: 300}
	st.Picked(inLine, at(11))
	st.View(at(11), 0, &v)
	if v.BacklogTokens != 1300 {
		t.Fatalf("new pick on top: backlog %.0f, want 1300", v.BacklogTokens)
	}
	st.View(at(11).Add(inLine.predictedTTFT+500*time.Millisecond), 0, &v)
	if v.OverdueInLine != 500*time.Millisecond {
		t.Fatalf("in line: overdue %v; want the new pick's 0.5 s past its predicted first token", v.OverdueInLine)
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

// View writes every field of the view it fills: the director reuses one
// slot per endpoint from pick to pick, so a field View left alone would
// carry the previous decision's value (an adapter's slot wait, an overdue
// request long since served) into the next.
func TestViewOverwritesEveryFieldOfAReusedSlot(t *testing.T) {
	s := newState()
	s.UpdateMetrics(Metrics{Waiting: 2, SampledAt: at(0)}, at(0))
	var fresh, reused View
	s.View(at(0.1), time.Second, &fresh)
	spoil(t, reflect.ValueOf(&reused).Elem(), reflect.ValueOf(fresh), "View")
	s.View(at(0.1), time.Second, &reused)
	if !reflect.DeepEqual(fresh, reused) {
		t.Fatalf("a reused view keeps stale fields:\nfresh  %+v\nreused %+v", fresh, reused)
	}
}

// spoil sets every field below v to a value View would not produce here:
// unlike the one in fresh, View's own result.
func spoil(t *testing.T, v, fresh reflect.Value, path string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Unix(1, 0)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				spoil(t, v.Field(i), fresh.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.Bool:
		v.SetBool(!fresh.Bool())
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(-12345)
	case reflect.Float64:
		v.SetFloat(-1.5)
	case reflect.String:
		v.SetString("stale")
	case reflect.Map:
		v.Set(reflect.MakeMapWithSize(v.Type(), 1))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	default:
		t.Fatalf("%s: kind %s has no stale value here; add one", path, v.Kind())
	}
}

// KVOverflow is the share of the cache that would have to be freed for a
// request to fit: the sampled use, the prompts sent since the sample and
// the request's own tokens, beyond the cache's size; nothing where they fit
// or where the cache's use or size is unknown.
func TestKVOverflowIsWhatMustBeFreedFirst(t *testing.T) {
	v := View{HasMetrics: true, PicksSinceSample: 2, MeanPromptTokens: 1000,
		Metrics: Metrics{KVCacheKnown: true, KVCacheUsage: 0.9, NumGPUBlocks: 6250, BlockSizeTokens: 16}} // 100,000 tokens
	for _, c := range []struct {
		tokens, want float64
	}{{0, 0}, {8000, 0}, {20000, 0.12}, {200000, 1.92}} {
		if got := v.KVOverflow(c.tokens); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("KVOverflow(%v) with the cache 0.92 used = %v, want %v", c.tokens, got, c.want)
		}
	}
	unsized := v
	unsized.Metrics.NumGPUBlocks = 0
	if got := unsized.KVOverflow(200000); got != 0 {
		t.Errorf("cache size unknown: KVOverflow = %v, want 0", got)
	}
	unknown := v
	unknown.Metrics.KVCacheKnown = false
	if got := unknown.KVOverflow(200000); got != 0 {
		t.Errorf("cache use unknown: KVOverflow = %v, want 0", got)
	}
}

// PlacedSeconds is the prompt work sent to the endpoint of late, at its
// prefill rate: each pick adds its uncached tokens, and the sum decays over
// PlacedWindow.
func TestPlacedSecondsIsRecentPromptWorkAtTheEndpointsRate(t *testing.T) {
	st := newEndpointState(0, Endpoint{Address: "10.0.0.1", Port: 8000}, latency.Priors{PrefillTokensPerSecond: 10000, DecodeStepSeconds: 0.01})
	var v View
	st.Picked(&Request{UncachedTokens: 20000}, at(0))
	st.Picked(&Request{UncachedTokens: 10000}, at(0))
	if st.View(at(0), 0, &v); v.PlacedTokens != 30000 || math.Abs(v.PlacedSeconds(at(0))-3) > 1e-9 {
		t.Fatalf("30,000 tokens at 10,000 a second: PlacedTokens %v, PlacedSeconds %v; want 30000 and 3", v.PlacedTokens, v.PlacedSeconds(at(0)))
	}
	window := PlacedWindow.Seconds()
	if st.View(at(window), 0, &v); math.Abs(v.PlacedSeconds(at(window))-3/math.E) > 1e-9 {
		t.Errorf("one window later: PlacedSeconds %v, want %v", v.PlacedSeconds(at(window)), 3/math.E)
	}
	st.Picked(&Request{UncachedTokens: 10000}, at(window))
	if st.View(at(window), 0, &v); math.Abs(v.PlacedSeconds(at(window))-(3/math.E+1)) > 1e-9 {
		t.Errorf("a pick later: PlacedSeconds %v, want %v", v.PlacedSeconds(at(window)), 3/math.E+1)
	}
}
