package predictedlatency

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

func view(id int32, prefillRate, decodeStep float64, waiting int) *datastore.View {
	return &datastore.View{
		ID: id, Key: string(rune('a' + id)), HasMetrics: true,
		Metrics:          datastore.Metrics{Waiting: waiting, SampledAt: plugintest.T0},
		MeanPromptTokens: 1000,
		Speed:            latency.Speed{PrefillTokensPerSecond: prefillRate, DecodeStepSeconds: decodeStep, PrefillSamples: 10, DecodeSamples: 10},
	}
}

func score(t *testing.T, req *scheduling.Request, cands ...*datastore.View) []float64 {
	t.Helper()
	return plugintest.Score(t, New, "", req, cands)
}

// The faster of two equally queued endpoints, and the less loaded of two
// equally fast ones, scores 1 and the other less.
func TestPrefersFasterOrLessLoaded(t *testing.T) {
	for _, tc := range []struct {
		name         string
		promptTokens int
		best, other  *datastore.View
	}{
		{"equal queues: H100-like beats A10G-like", 2000, view(0, 27700, 0.008, 3), view(1, 1500, 0.037, 3)},
		{"equal speeds: idle beats busy", 500, view(0, 10000, 0.01, 1), view(1, 10000, 0.01, 8)},
	} {
		s := score(t, &scheduling.Request{Model: "m", PromptTokens: tc.promptTokens}, tc.best, tc.other)
		if s[0] != 1 || !(s[1] < 1) {
			t.Errorf("%s: scores %v, want 1 and less", tc.name, s)
		}
	}
}

func TestBusyFastBeatsIdleSlowOnlyWhileItsQueueIsShort(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 1000}
	slowIdle := view(1, 1500, 0.037, 0) // ~0.7 s to first token
	if s := score(t, req, view(0, 27700, 0.008, 2), slowIdle); !(s[0] > s[1]) {
		t.Fatalf("fast endpoint with 2 queued should still win: %v", s)
	}
	if s := score(t, req, view(0, 27700, 0.008, 40), slowIdle); !(s[1] > s[0]) {
		t.Fatalf("fast endpoint with 40 queued should lose to the idle slow one: %v", s)
	}
}

func TestStaleScoresZeroAndParametersValidated(t *testing.T) {
	stale := view(0, 10000, 0.01, 0)
	stale.Stale = true
	if s := score(t, &scheduling.Request{PromptTokens: 10}, stale, view(1, 10000, 0.01, 50)); s[0] != 0 || s[1] != 1 {
		t.Fatalf("stale endpoint scored %v", s)
	}
	if _, err := New(Type, scheduling.Parameters(`{"adapterLoadSeconds": -1}`)); err == nil {
		t.Fatal("negative adapterLoadSeconds accepted")
	}
	if _, err := New(Type, scheduling.Parameters(`{"chunkTokenz": 1}`)); err == nil {
		t.Fatal("unknown parameter accepted")
	}
}

func TestAdapterLoadCosts(t *testing.T) {
	req := &scheduling.Request{Model: "m", Adapter: "sql", PromptTokens: 100}
	resident := view(0, 10000, 0.01, 0)
	resident.Metrics.RunningAdapters = []string{"sql"}
	resident.Metrics.MaxAdapters = 1
	full := view(1, 10000, 0.01, 0)
	full.Metrics.RunningAdapters = []string{"chat"}
	full.Metrics.MaxAdapters = 1
	if s := score(t, req, resident, full); !(s[0] > s[1]) {
		t.Fatalf("resident adapter should win: %v", s)
	}
}

func TestUnmeasuredEndpointAssumedAsFastAsTheFastest(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 1000}
	measured := view(0, 27700, 0.008, 0)
	fresh := view(1, latency.DefaultPriors.PrefillTokensPerSecond, latency.DefaultPriors.DecodeStepSeconds, 0)
	fresh.Speed.PrefillSamples, fresh.Speed.DecodeSamples = 0, 0
	if s := score(t, req, measured, fresh); s[0] != s[1] {
		t.Fatalf("a new endpoint (prior %v tok/s) should tie with the fastest measured one: %v", fresh.Speed.PrefillTokensPerSecond, s)
	}
	// Counter-case: a measured slow endpoint keeps its measurement.
	slow := view(1, 5000, 0.02, 0)
	if s := score(t, req, measured, slow); !(s[0] > s[1]) {
		t.Fatalf("measured slow endpoint scored like the fast one: %v", s)
	}
}

// A prefix-cache miss costs the endpoint the whole prompt's prefill. With
// prefillWorkWeight 1 the endpoint holding the shared prefix wins although
// its queue makes its own first token slightly later than an idle endpoint's.
func TestPrefillWorkWeightKeepsPrefixAffinity(t *testing.T) {
	system := strings.Repeat("system prompt text. ", 1200) // 24000 chars: 6000 tokens
	prompt := system + strings.Repeat("user question ", 343)
	ix := prefixindex.New(10000)
	cached, idle := view(0, 13600, 0.02, 0), view(1, 13600, 0.02, 0)
	cached.BacklogTokens = 6000 // another request's prefill still ahead of this one
	cycleWith := func(text string) *scheduling.Cycle {
		c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 2)))
		c.Reset(&scheduling.Request{Model: "m", Prompt: text}, plugintest.T0, scheduling.PrefixSettings{Index: ix, BlockTokens: 128, MaxBlocks: 256})
		c.Latency = latency.DefaultModel
		return c
	}
	ix.Add(0, cycleWith(system).PromptHashes(), nil) // endpoint 0 served the group before
	run := func(params string) []float64 {
		return plugintest.Scores(plugintest.New[*Scorer](t, New, params), cycleWith(prompt), []*datastore.View{cached, idle})
	}
	if s := run(""); !(s[1] > s[0]) {
		t.Fatalf("pure time to first token should prefer the idle endpoint here: %v", s)
	}
	if s := run(`{"prefillWorkWeight": 1}`); !(s[0] > s[1]) {
		t.Fatalf("with the prefill the miss costs, the cached endpoint should win: %v", s)
	}
}

// Where every endpoint would spend the same on the request's own prompt (no
// cached prefix anywhere, equal speeds), that work sets no endpoint apart, so
// it must not dilute the ratio of first-token times: a long prompt with 2 s of
// prefill ahead of it on one endpoint and none on the other scores as it
// does without the work weight. Diluted, the busy endpoint scored close
// enough to the idle one that a small tie-breaker sent long prompts there.
func TestPrefillWorkEqualEverywhereDoesNotDiluteTheRatio(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 40000}
	idle, busy := view(0, 20000, 0.01, 0), view(1, 20000, 0.01, 0)
	busy.BacklogTokens = 40000
	plain := plugintest.Score(t, New, "", req, []*datastore.View{idle, busy})
	weighted := plugintest.Score(t, New, `{"prefillWorkWeight": 1}`, req, []*datastore.View{idle, busy})
	if !(plain[1] < 0.6) || math.Abs(weighted[1]-plain[1]) > 1e-9 || weighted[0] != 1 {
		t.Fatalf("scores with the work weight %v, without %v: want equal, the busy one about half", weighted, plain)
	}
}

// With urgentShare, a prediction near the route's first-token budget spreads
// the scores (2.0 against 2.4 s of a 3 s budget: 0.83 becomes about 0.7, past
// a 0.2 tie-breaker's reach), while predictions far under it score as
// without it.
func TestUrgentShareSharpensNearTheFirstTokenBudget(t *testing.T) {
	scores := func(params string, promptTokens int, backlog float64) []float64 {
		p := plugintest.New[*Scorer](t, New, params)
		p.UseRouteSLO(admission.SLO{TTFTSeconds: 3, TPOTSeconds: 0.1})
		idle, busy := view(0, 20000, 0.01, 0), view(1, 20000, 0.01, 0)
		busy.BacklogTokens = backlog
		c := plugintest.Cycle(&scheduling.Request{Model: "m", PromptTokens: promptTokens}, nil)
		return plugintest.Scores(p, c, []*datastore.View{idle, busy})
	}
	plain, urgent := scores("", 40000, 8000), scores(`{"urgentShare": 0.3333}`, 40000, 8000)
	if !(plain[1] > 0.8) || !(urgent[1] < plain[1]-0.1) || urgent[0] != 1 {
		t.Errorf("near the budget: scores %v with urgentShare, %v without; want the slower one 0.1 lower", urgent, plain)
	}
	plain, urgent = scores("", 1000, 2000), scores(`{"urgentShare": 0.3333}`, 1000, 2000)
	if math.Abs(urgent[1]-plain[1]) > 1e-12 {
		t.Errorf("far under the budget: scores %v with urgentShare, %v without; want them equal", urgent, plain)
	}
}

func TestAdapterLoadStallsTheBatchAndFullSlotsWaitARequest(t *testing.T) {
	req := &scheduling.Request{Model: "m", Adapter: "sql", PromptTokens: 100}
	p := plugintest.New[*Scorer](t, New, "")
	c := plugintest.Cycle(req, nil)
	// The load delays the first token of every request there that has none
	// yet: 60 waiting requests make it cost 61 loads (0.05 s each) more than
	// where the adapter is resident.
	waitingFree, waitingResident := view(0, 10000, 0.01, 60), view(1, 10000, 0.01, 60)
	waitingFree.Metrics.MaxAdapters, waitingResident.Metrics.MaxAdapters = 4, 4
	waitingResident.Metrics.RunningAdapters = []string{"sql"}
	if d := p.Predict(c, waitingFree) - p.Predict(c, waitingResident); math.Abs(d-61*0.05) > 1e-9 {
		t.Fatalf("load with 60 requests awaiting their first token costs %.3f s, want %.3f", d, 61*0.05)
	}
	// Decoding requests lose one inter-token gap, not time to first token: a
	// batch of 100 decoding requests does not make a load cost 5 s, so the
	// request loads its adapter there rather than queue 3 s behind the
	// endpoint where it is resident.
	decoding, queued := view(2, 10000, 0.01, 0), view(3, 10000, 0.01, 0)
	decoding.Metrics.MaxAdapters, decoding.Metrics.Running = 4, 100
	queued.Metrics.MaxAdapters, queued.Metrics.RunningAdapters = 4, []string{"sql"}
	queued.BacklogTokens = 30000 // 3 s of prefill ahead
	if got := p.Predict(c, decoding); math.Abs(got-(0.02+0.05)) > 1e-9 {
		t.Fatalf("free slot beside 100 decoding requests: predicted %.3f s, want the load once (0.070)", got)
	}
	if s := score(t, req, decoding, queued); !(s[0] > s[1]) {
		t.Fatalf("loading beside a decoding batch should beat a 3 s queue: %v", s)
	}
	full := view(4, 10000, 0.01, 0)
	full.Metrics.RunningAdapters, full.Metrics.MaxAdapters = []string{"a", "b"}, 2
	full.Speed.RequestSeconds, full.Speed.RequestSamples = 20, 10
	if got := p.Predict(c, full); got < 20 {
		t.Fatalf("every slot busy: predicted %.2f s, want at least the 20 s a request lasts there", got)
	}
	// A learned load time replaces the configured one.
	idle := view(5, 10000, 0.01, 0)
	idle.Metrics.MaxAdapters = 4
	idle.Speed.AdapterLoadSeconds, idle.Speed.AdapterLoadSamples = 0.5, 3
	if got := p.Predict(c, idle); got < 0.5 {
		t.Fatalf("learned 0.5 s load not used: predicted %.3f s", got)
	}
}

// KV pressure is judged with the request's prompt in the cache: a prompt of
// a fifth of the cache fits under the pressure threshold beside 60% use, not
// beside 85%, where it would leave the cache nearly full and the server
// queueing or preempting for memory. Without the prompt both endpoints sit
// under the threshold and look alike.
func TestKVPressureCountsTheRequestsPrompt(t *testing.T) {
	roomy, nearlyFull := view(0, 10000, 0.01, 0), view(1, 10000, 0.01, 0)
	roomy.Metrics = plugintest.KVSample(0.6)
	nearlyFull.Metrics = plugintest.KVSample(0.85)
	long := &scheduling.Request{Model: "m", PromptTokens: 320} // a fifth of 100 blocks of 16 tokens
	if s := score(t, long, roomy, nearlyFull); s[0] != 1 || !(s[1] < 0.5) {
		t.Errorf("a prompt of a fifth of the cache: scores %v, want 1 beside 60%% use and under 0.5 beside 85%%", s)
	}
	short := &scheduling.Request{Model: "m", PromptTokens: 16}
	if s := score(t, short, roomy, nearlyFull); math.Abs(s[0]-s[1]) > 1e-9 {
		t.Errorf("a one-block prompt, under the threshold on both: scores %v, want them equal", s)
	}
}
