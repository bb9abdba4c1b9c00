package latency_test

import (
	"math"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

var t0 = time.Unix(1000, 0)

// endpoint is a fresh endpoint's state, starting from the default priors.
func endpoint(t testing.TB) *datastore.EndpointState {
	t.Helper()
	s := datastore.NewStore(latency.DefaultPriors)
	s.SetEndpoints([]datastore.Endpoint{{Address: "10.0.0.1", Port: 8000}})
	return s.Get("10.0.0.1:8000")
}

// The picker's own queued requests are in its backlog with their real sizes.
// Counting them again as waiting × mean prompt made an endpoint with three
// small prompts queued behind a long one look like four long prompts ahead,
// since the long one lifts the mean.
func TestWorkAheadCountsOwnRequestsOnce(t *testing.T) {
	st := endpoint(t)
	st.UpdateMetrics(datastore.Metrics{SampledAt: t0}, t0)
	for _, n := range []int{30000, 200, 200, 200} {
		st.Picked(&datastore.Request{UncachedTokens: n}, t0)
	}
	// The server runs the long prompt and reports the three others waiting.
	st.UpdateMetrics(datastore.Metrics{Waiting: 3, Running: 1, SampledAt: t0}, t0)
	var v datastore.View
	st.View(t0, 0, &v)
	if got := latency.WorkAhead(v.Queue(), 0); got != 30600 {
		t.Fatalf("work ahead %.0f tokens, want the backlog 30600 (mean prompt %.0f, waiting %d)", got, v.MeanPromptTokens, v.WaitingEstimate())
	}
}

// Waiting requests the picker did not send (another EPP replica's) show only
// in telemetry: each counts as a mean prompt on top of the backlog.
func TestWorkAheadAddsWaitingRequestsOfOthers(t *testing.T) {
	st := endpoint(t)
	st.UpdateMetrics(datastore.Metrics{SampledAt: t0}, t0)
	st.Picked(&datastore.Request{UncachedTokens: 1000}, t0)
	st.Picked(&datastore.Request{UncachedTokens: 600}, t0)
	st.UpdateMetrics(datastore.Metrics{Waiting: 5, SampledAt: t0}, t0) // 2 of ours, 3 of others
	var v datastore.View
	st.View(t0, 0, &v)
	if v.UnaccountedWaiting() != 3 {
		t.Fatalf("unaccounted waiting %d, want 3", v.UnaccountedWaiting())
	}
	want := 1600 + 3*v.MeanPromptTokens
	if got := latency.WorkAhead(v.Queue(), 0); math.Abs(got-want) > 1e-9 {
		t.Fatalf("work ahead %.0f tokens, want backlog 1600 + 3 × mean %.0f = %.0f", got, v.MeanPromptTokens, want)
	}
	// Before any sample only the picker's own requests are known.
	var fresh datastore.View
	endpoint(t).View(t0, 0, &fresh)
	if got := latency.WorkAhead(fresh.Queue(), 500); got != 0 {
		t.Fatalf("unsampled idle endpoint: work ahead %.0f, want 0", got)
	}
}

// A request awaiting its first token means a step is in flight there that a
// new request cannot join: even once the backlog has drained, the endpoint
// is a decode step behind an idle one.
func TestPendingFirstTokenCostsTheStepInFlight(t *testing.T) {
	busy, idle := endpoint(t), endpoint(t)
	st := &datastore.Request{UncachedTokens: 500}
	busy.Picked(st, t0)
	var vb, vi datastore.View
	later := t0.Add(time.Second) // the backlog has drained at the prior rate
	busy.View(later, 0, &vb)
	idle.View(later, 0, &vi)
	if vb.BacklogTokens != 0 || vb.PendingFirstToken != 1 {
		t.Fatalf("backlog %.0f, pending %d", vb.BacklogTokens, vb.PendingFirstToken)
	}
	m := latency.DefaultModel
	if d := m.TTFT(vb.Queue(), 100, 0, 0) - m.TTFT(vi.Queue(), 100, 0, 0); math.Abs(d-vb.Speed.DecodeStepSeconds) > 1e-12 {
		t.Fatalf("pending first token adds %.4f s, want one decode step %.4f", d, vb.Speed.DecodeStepSeconds)
	}
}

// Prompts that arrive while the work ahead drains join the new request's
// step, up to the chunk budget: on an A10G-like endpoint (1,500 tokens/s)
// with 1,500 tokens ahead and 4,500 tokens/s arriving, the request's step
// also prefills the 4,500 that came in that second. A budget already filled
// by the work ahead leaves no room, and nothing arriving adds nothing.
func TestArrivalsJoinTheRequestsStep(t *testing.T) {
	m := latency.Model{ChunkTokens: 8192}
	q := latency.Queue{BacklogTokens: 1500, MeanPromptTokens: 1500,
		Speed: &latency.Speed{PrefillTokensPerSecond: 1500, DecodeStepSeconds: 0.04}}
	quiet := m.TTFT(q, 500, 0, 0)
	q.ArrivingTokensPerSecond = 4500
	if got := m.TTFT(q, 500, 0, 0) - quiet; math.Abs(got-3) > 1e-9 {
		t.Errorf("arrivals added %.3f s, want 3 s (4,500 tokens joining at 1,500 tokens/s)", got)
	}
	q.ArrivingTokensPerSecond = 45000
	// The full budget's room (6,192 tokens), and the step a full chunk counts.
	if got := m.TTFT(q, 500, 0, 0) - quiet; math.Abs(got-((8192-2000)/1500.0+0.04)) > 1e-9 {
		t.Errorf("arrivals added %.3f s, want the budget's room (6,192 tokens) at 1,500 tokens/s and a step", got)
	}
	q.BacklogTokens = 9000
	full := q
	full.ArrivingTokensPerSecond = 0
	if a, b := m.TTFT(q, 500, 0, 0), m.TTFT(full, 500, 0, 0); a != b {
		t.Errorf("work ahead over the budget: arrivals still added %.3f s", a-b)
	}
}

// A new prompt's prefill is steps every stream of the endpoint waits out:
// spread over a stream's life it adds its prefill time over the mean output
// tokens to each token, and no more than one step of a full chunk per token
// (a stream that lives within the prefill).
func TestInterTokenWithTheRequestsPrefill(t *testing.T) {
	m := latency.Model{ChunkTokens: 2048}
	sp := latency.Speed{PrefillTokensPerSecond: 20000, InterTokenSeconds: 0.03, OutputTokens: 200}
	for _, tc := range []struct {
		uncached int
		want     float64
	}{
		{0, 0.03},
		{4000, 0.03 + 0.2/200},        // 0.2 s of prefill over 200 tokens
		{1000000, 0.03 + 2048/20000.}, // 50 s of prefill: a full chunk's step on every token
	} {
		if got := m.InterTokenWith(sp, tc.uncached, 0, false); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%d uncached tokens: %v s between tokens, want %v", tc.uncached, got, tc.want)
		}
	}
	sp.OutputTokens = 0 // none completed: the default life
	if got, want := m.InterTokenWith(sp, 4000, 0, false), 0.03+0.2/latency.DefaultOutputTokens; math.Abs(got-want) > 1e-9 {
		t.Errorf("no completion yet: %v s, want %v", got, want)
	}
}

// A decode step reads the context of every stream in the batch, so the time
// between tokens follows the KV cache's use: the prediction moves the
// learned mean along the learned line to the use the request would leave,
// and never below a decode step for an emptier cache.
func TestInterTokenFollowsKVUse(t *testing.T) {
	m := latency.Model{ChunkTokens: 2048}
	sp := latency.Speed{InterTokenSeconds: 0.03, DecodeStepSeconds: 0.02, InterTokenKVUse: 0.5, InterTokenPerKVUse: 0.04}
	for _, tc := range []struct {
		kv    float64
		known bool
		want  float64
	}{
		{0.5, true, 0.03},
		{0.75, true, 0.04}, // a quarter of the cache more: 10 ms a token more
		{0.25, true, 0.02}, // emptier: 10 ms less
		{0, true, 0.02},    // no faster than a decode step
		{0.9, false, 0.03}, // use unknown: the mean as learned
	} {
		if got := m.InterTokenWith(sp, 0, tc.kv, tc.known); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("KV use %v (known %v): %v s between tokens, want %v", tc.kv, tc.known, got, tc.want)
		}
	}
	sp.InterTokenPerKVUse = 0 // no line learned
	if got := m.InterTokenWith(sp, 0, 0.9, true); got != 0.03 {
		t.Errorf("no line learned: %v s between tokens, want the mean 0.03", got)
	}
}
