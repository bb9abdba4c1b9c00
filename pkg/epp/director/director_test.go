package director_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/config/configtest"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/tokencount"
)

var t0 = time.Unix(1000, 0)

func newDirector(t testing.TB, cfg string, n int, opts director.Options) *director.Director {
	t.Helper()
	var eps []datastore.Endpoint
	for i := range n {
		eps = append(eps, datastore.Endpoint{Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: 8000,
			Labels: map[string]string{"idx": fmt.Sprint(i)}})
	}
	return configtest.Director(t, cfg, opts, eps...)
}

func keys(d *director.Director) []string {
	var out []string
	for _, st := range d.Store().Endpoints(nil) {
		out = append(out, st.Key())
	}
	return out
}

func schedule(t testing.TB, d *director.Director, req *scheduling.Request, now time.Time) *director.Result {
	t.Helper()
	res, err := d.Schedule(context.Background(), req, false, now)
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	return res
}

// TestNoHerdingOnStaleTelemetry: with one sample for all endpoints and many
// requests before the next, own accounting spreads them evenly.
func TestNoHerdingOnStaleTelemetry(t *testing.T) {
	for _, cfg := range []string{config.Default, "scorers: [{plugin: queue, weight: 1}]", "scorers: [{plugin: running-requests, weight: 1}]"} {
		d := newDirector(t, cfg, 4, director.Options{})
		for _, k := range keys(d) {
			d.UpdateMetrics(k, datastore.Metrics{KVCacheKnown: true, SampledAt: t0}, t0)
		}
		count := map[string]int{}
		for i := range 40 {
			res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat(fmt.Sprint(i), 400)}, t0.Add(time.Millisecond))
			count[res.Primary]++
		}
		for k, n := range count {
			if n < 8 || n > 12 {
				t.Errorf("%q: endpoint %s got %d of 40 picks: %v", cfg, k, n, count)
			}
		}
	}
}

func TestFallbacksDistinctAndOrdered(t *testing.T) {
	d := newDirector(t, "scorers: [{plugin: queue, weight: 1}]\nfallbacks: 2", 4, director.Options{})
	for i, k := range keys(d) {
		d.UpdateMetrics(k, datastore.Metrics{Waiting: i, SampledAt: t0}, t0)
	}
	res := schedule(t, d, &scheduling.Request{Model: "m"}, t0)
	ks := keys(d)
	if res.Primary != ks[0] || len(res.Fallbacks) != 2 || res.Fallbacks[0] != ks[1] || res.Fallbacks[1] != ks[2] {
		t.Fatalf("primary %s fallbacks %v, want %s then %v", res.Primary, res.Fallbacks, ks[0], ks[1:3])
	}
}

func TestSubsetRestrictsCandidates(t *testing.T) {
	d := newDirector(t, config.Default, 6, director.Options{})
	ks := keys(d)
	for range 20 {
		res := schedule(t, d, &scheduling.Request{Model: "m", Subset: []string{ks[4]}}, t0)
		if res.Primary != ks[4] || len(res.Fallbacks) != 0 {
			t.Fatalf("subset of one gave %s + %v", res.Primary, res.Fallbacks)
		}
	}
	_, err := d.Schedule(context.Background(), &scheduling.Request{Subset: []string{"192.0.2.1:1"}}, false, t0)
	if err == nil || err.Status != 503 {
		t.Fatalf("unknown subset: %v", err)
	}
}

func TestUnavailableReasons(t *testing.T) {
	d := newDirector(t, config.Default, 0, director.Options{})
	res, err := d.Schedule(context.Background(), &scheduling.Request{}, false, t0)
	if err == nil || err.Status != 503 || res.Reason != director.ReasonNoEndpoints {
		t.Fatalf("no endpoints: %v %v", res.Reason, err)
	}
	d = newDirector(t, config.Default, 2, director.Options{Staleness: 200 * time.Millisecond, StalePolicy: director.StaleFilter})
	res, err = d.Schedule(context.Background(), &scheduling.Request{}, false, t0)
	if err == nil || err.Status != 503 || res.Reason != director.ReasonAllStale {
		t.Fatalf("all stale with filter policy: %v %v", res.Reason, err)
	}
	k := keys(d)[1]
	d.UpdateMetrics(k, datastore.Metrics{SampledAt: t0}, t0)
	if res := schedule(t, d, &scheduling.Request{}, t0.Add(100*time.Millisecond)); res.Primary != k {
		t.Fatalf("filter policy picked stale %s", res.Primary)
	}
}

func TestShedsLowPriorityWhenAllSaturated(t *testing.T) {
	d := newDirector(t, config.Default, 3, director.Options{})
	for _, k := range keys(d) {
		d.UpdateMetrics(k, datastore.Metrics{Waiting: 10, SampledAt: t0}, t0)
	}
	res, err := d.Schedule(context.Background(), &scheduling.Request{Priority: -1, PromptTokens: 1000}, false, t0)
	if err == nil || err.Status != 429 || res.Reason != director.ReasonShed || err.RetryAfterSeconds < 1 {
		t.Fatalf("saturated, priority -1: %v %+v", res.Reason, err)
	}
	// Retry-After follows the predicted drain: 10 waiting × 1000 tokens at the prior rate.
	if err.RetryAfterSeconds > 2 {
		t.Fatalf("retry-after %d s for ~0.5 s of work", err.RetryAfterSeconds)
	}
	if res := schedule(t, d, &scheduling.Request{Priority: 0}, t0); res.Primary == "" {
		t.Fatal("priority 0 not scheduled")
	}
	// One unsaturated endpoint: nobody is shed.
	d.UpdateMetrics(keys(d)[0], datastore.Metrics{Waiting: 0, SampledAt: t0}, t0)
	if res := schedule(t, d, &scheduling.Request{Priority: -5}, t0); res.Primary != keys(d)[0] {
		t.Fatalf("priority -5 with a free endpoint went to %s", res.Primary)
	}
}

func TestPrefixAffinityFollowsPicks(t *testing.T) {
	d := newDirector(t, "scorers: [{plugin: prefix-cache, weight: 1}, {plugin: queue, weight: 0.1}]", 8, director.Options{})
	system := strings.Repeat("You are a helpful assistant. ", 100) // ~2900 chars: 45 blocks
	first := schedule(t, d, &scheduling.Request{Model: "m", Prompt: system + "question one"}, t0)
	d.ObserveFirstToken(first, t0.Add(10*time.Millisecond))
	for i := range 5 {
		res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: system + fmt.Sprint("question ", i)}, t0)
		if res.Primary != first.Primary {
			t.Fatalf("shared prefix went to %s, cached on %s", res.Primary, first.Primary)
		}
	}
	// Another model's identical prompt has no affinity (hash seeded with the model).
	res, err := d.Schedule(context.Background(), &scheduling.Request{Model: "other", Prompt: system}, true, t0)
	if err != nil {
		t.Fatal(err)
	}
	if raw := res.Breakdown.Terms[0].Raw; raw != 0 {
		t.Fatalf("another model's identical prompt scored prefix %v", raw)
	}
}

func TestBreakdownExplainsDecision(t *testing.T) {
	d := newDirector(t, "scorers: [{plugin: queue, weight: 2}, {plugin: kv-cache-utilization, weight: 1}]", 2, director.Options{})
	ks := keys(d)
	d.UpdateMetrics(ks[0], datastore.Metrics{Waiting: 0, KVCacheKnown: true, KVCacheUsage: 0.25, SampledAt: t0}, t0)
	d.UpdateMetrics(ks[1], datastore.Metrics{Waiting: 4, KVCacheKnown: true, KVCacheUsage: 0.5, SampledAt: t0}, t0)
	res, err := d.Schedule(context.Background(), &scheduling.Request{}, true, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := "endpoint=" + ks[0] + ";reason=scored;total=2.7500;candidates=2;queue=1.0000*2;kv-cache-utilization=0.7500*1"
	if got := res.Breakdown.String(); got != want {
		t.Fatalf("breakdown\n got %s\nwant %s", got, want)
	}
}

func TestResolveModel(t *testing.T) {
	d := newDirector(t, config.Default+"baseModels: [llama]", 1, director.Options{})
	for _, c := range []struct{ model, header, base, adapter string }{
		{"llama", "", "llama", ""},
		{"sql-lora", "", "", "sql-lora"},
		{"sql-lora", "llama", "llama", "sql-lora"},
		{"llama", "llama", "llama", ""},
	} {
		if b, a := d.ResolveModel(c.model, c.header); b != c.base || a != c.adapter {
			t.Errorf("ResolveModel(%q, %q) = %q, %q", c.model, c.header, b, a)
		}
	}
}

// TestRepliesAgeThePrefixIndex: the server caches a reply's tokens too, which
// pushes old prompts out of its cache; the index forgets them alike.
func TestRepliesAgeThePrefixIndex(t *testing.T) {
	d := newDirector(t, config.Default, 1, director.Options{PrefixCapacity: 40}) // 40 index blocks of 128 tokens
	prompt := strings.Repeat("a shared system prompt ", 1000)                    // ~45 blocks, 40 kept
	res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: prompt}, t0)
	d.ObserveFirstToken(res, t0.Add(time.Second))
	if d.Index().Blocks() == 0 {
		t.Fatal("prompt not recorded")
	}
	d.ObserveCompletion(res, 128*10, t0.Add(2*time.Second)) // a 10-block reply
	if got := d.Index().Blocks(); got != 30 {
		t.Fatalf("index holds %d blocks after a 10-block reply, want 30", got)
	}
}

// fifoServer plays a model server for the picker's accounting: it prefills
// prompts one after another at rate tokens/s and streams outTokens tokens a
// step apart; pausedUntil holds all work (a stopped container).
type fifoServer struct {
	rate, step  float64
	outTokens   int
	busyUntil   float64
	pausedUntil float64
	events      []serverEvent
}

type serverEvent struct {
	at    float64
	first bool
	req   *datastore.Request
	st    *datastore.EndpointState
}

func (s *fifoServer) accept(st *datastore.EndpointState, r *datastore.Request, now float64) {
	start := max(now, s.busyUntil, s.pausedUntil)
	s.busyUntil = start + float64(r.UncachedTokens)/s.rate + s.step
	s.events = append(s.events, serverEvent{at: s.busyUntil, first: true, req: r, st: st},
		serverEvent{at: s.busyUntil + float64(s.outTokens-1)*s.step, req: r, st: st})
}

// deliver reports to the accounting what the server did up to now.
func (s *fifoServer) deliver(now float64) {
	kept := s.events[:0]
	for _, e := range s.events {
		switch {
		case e.at > now:
			kept = append(kept, e)
		case e.first:
			e.st.ObserveFirstToken(e.req, at(e.at))
		default:
			e.st.ObserveCompletion(e.req, s.outTokens, at(e.at))
		}
	}
	s.events = kept
}

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// TestStoppedPodIsNotLostForGood reproduces a healthy GPU lost for good: one
// of two equal pods stops for 28 s with requests waiting for their first
// token, which collapses its learned prefill rate; the other pod can carry
// the load alone, so a picker that learns only from traffic never sends the
// first pod anything again. After it resumes it must be measured again and
// get at least a fifth of its fair share (half) of the picks within a minute.
func TestStoppedPodIsNotLostForGood(t *testing.T) {
	d := newDirector(t, config.Default, 2, director.Options{})
	states := d.Store().Endpoints(nil)
	servers := map[string]*fifoServer{}
	for _, st := range states {
		servers[st.Key()] = &fifoServer{rate: 4000, step: 0.02, outTokens: 20}
	}
	stopped := servers[states[0].Key()]
	picks := map[string]int{}
	const interval, prompt = 0.2, 500 // 2,500 tokens/s: within one pod's capacity
	for i := 0; float64(i)*interval < 160; i++ {
		now := float64(i) * interval
		if i == int(30/interval) {
			stopped.pausedUntil = now + 28
		}
		for _, s := range servers {
			s.deliver(now)
		}
		for _, st := range states {
			d.UpdateMetrics(st.Key(), datastore.Metrics{KVCacheKnown: true, SampledAt: at(now)}, at(now))
		}
		res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat(fmt.Sprintf("%d ", i), prompt/2)}, at(now))
		servers[res.Primary].accept(res.Endpoint, res.Request, now)
		if now >= 100 {
			picks[res.Primary]++
		}
	}
	got, total := picks[states[0].Key()], picks[states[0].Key()]+picks[states[1].Key()]
	if share := float64(got) / float64(total); share < 0.2*0.5 {
		t.Fatalf("the pod stopped for 28 s got %d of %d picks from 100 s to 160 s (%.0f%% of its fair share); its learned speed %+v",
			got, total, 100*share/0.5, states[0].Speed())
	}
}

// TestAdapterSlotWaitCountsTowardsTheWaitBound: on an endpoint whose adapter
// slots all serve other running adapters, a request for an adapter that is
// not there would wait for a slot on top of the prefill queued ahead: with
// about 0.85 s of prefill queued, a base-model request is placed and one for
// such an adapter is shed (wait bound 1.5 s, a slot about 1 s away), while
// one for a running adapter is placed.
func TestAdapterSlotWaitCountsTowardsTheWaitBound(t *testing.T) {
	cfg := config.Default + "admission:\n  missBudget: 0\n  queue: {maxRequests: 0}\n"
	d := newDirector(t, cfg, 1, director.Options{})
	k := keys(d)[0]
	d.UpdateMetrics(k, datastore.Metrics{Waiting: 16, Running: 8, RunningAdapters: []string{"a", "b"}, MaxAdapters: 2,
		KVCacheKnown: true, SampledAt: t0}, t0)
	for _, tc := range []struct {
		adapter string
		shed    bool
	}{{"", false}, {"a", false}, {"c", true}} {
		req := &scheduling.Request{Model: "m", Adapter: tc.adapter, PromptTokens: 1000}
		res, err := d.Schedule(context.Background(), req, false, t0)
		if shed := res != nil && res.Reason == director.ReasonShed; shed != tc.shed || (err != nil) != tc.shed {
			t.Errorf("adapter %q: reason %v, error %v; want shed %v", tc.adapter, res.Reason, err, tc.shed)
		}
		if res != nil && res.Reason != director.ReasonShed {
			d.ObserveCompletion(res, 1, t0) // leave the queue as it was
		}
	}
}

// TestLongPromptsKeyedToTheLargestCache: a prompt is hashed up to a share
// of the largest KV cache a server reported, so that, where caches hold
// whole long documents, the endpoint holding more of a document wins;
// keyed to its first 32k tokens, two endpoints holding 80k and 40k of it
// look alike.
func TestLongPromptsKeyedToTheLargestCache(t *testing.T) {
	var doc strings.Builder
	for i := 0; doc.Len() < 80_000*tokencount.CharsPerToken; i++ { // 80k tokens
		fmt.Fprintf(&doc, "w%07d ", i)
	}
	long := doc.String()
	picksOfLonger := func(cacheTokens int) (int, int) {
		d := newDirector(t, "{scorers: [{plugin: prefix-cache, weight: 1}, {plugin: queue, weight: 0.1}], admission: {enabled: false}}", 2, director.Options{})
		eps := d.Store().Endpoints(nil)
		for _, st := range eps {
			d.UpdateMetrics(st.Key(), datastore.Metrics{BlockSizeTokens: 16, NumGPUBlocks: cacheTokens / 16, SampledAt: t0}, t0)
		}
		blockChars := d.BlockTokens() * tokencount.CharsPerToken
		d.Index().Add(eps[0].ID(), prefixindex.Hash(nil, "m", long, blockChars, 0), nil)
		d.Index().Add(eps[1].ID(), prefixindex.Hash(nil, "m", long[:len(long)/2], blockChars, 0), nil)
		n := 0
		for i := range 10 {
			res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: long + fmt.Sprint(" question ", i)}, t0.Add(time.Duration(i)*time.Millisecond))
			if res.Primary == eps[0].Key() {
				n++
			}
		}
		return n, d.PrefixBlocks(d.Pipeline(), d.BlockTokens())
	}
	if n, blocks := picksOfLonger(4_000_000); n != 10 || blocks != 4_000_000/14/128 {
		t.Fatalf("4M-token caches: %d of 10 requests went to the endpoint holding 80k tokens of their prompt (hashed %d blocks), want 10 (%d)", n, blocks, 4_000_000/14/128)
	}
	if n, blocks := picksOfLonger(450_912); n == 10 || blocks != config.DefaultMaxPrefixBlocks {
		t.Fatalf("451k-token caches: %d of 10 requests went to the endpoint holding 80k tokens (hashed %d blocks); keyed to %d blocks both endpoints hold all of it", n, blocks, config.DefaultMaxPrefixBlocks)
	}
}
