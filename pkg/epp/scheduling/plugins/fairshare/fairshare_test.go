package fairshare

import (
	"github.com/igw-dev/igw/pkg/epp/admission"
	"slices"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// A mixed fleet as the picker sees it after a while: three H100-like
// endpoints taking about 3 picks/s each and one idle A10G-like endpoint
// taking 0.1 (a thirtieth of an equal share).
func fleet() []*datastore.View {
	vs := plugintest.Views(datastore.Metrics{Running: 20}, datastore.Metrics{Running: 20}, datastore.Metrics{Running: 20}, datastore.Metrics{})
	for _, v := range vs[:3] {
		setSpeed(v, 27000, 0.012, 0.014)
		v.PickRate, v.MeanPromptTokens = 3, 1000
	}
	setSpeed(vs[3], 1500, 0.037, 0.04)
	vs[3].PickRate, vs[3].MeanPromptTokens = 0.1, 1000
	return vs
}

// setSpeed gives v a measured speed.
func setSpeed(v *datastore.View, prefillRate, decodeStep, interToken float64) {
	sp := &v.Speed
	sp.PrefillTokensPerSecond, sp.DecodeStepSeconds, sp.InterTokenSeconds = prefillRate, decodeStep, interToken
	sp.PrefillSamples, sp.DecodeSamples = 20, 200
}

func owed(t *testing.T, params string, req *scheduling.Request, cands []*datastore.View) []float64 {
	t.Helper()
	return plugintest.Score(t, New, params, req, cands)
}

// The starved endpoint takes a short request it serves well within the SLO
// (200 tokens: about 0.17 s there); the others score 0, so the rest of the
// profile has no say.
func TestStarvedEndpointTakesACheapRequest(t *testing.T) {
	got := owed(t, "", &scheduling.Request{Model: "m", PromptTokens: 200}, fleet())
	if !slices.Equal(got, []float64{0, 0, 0, 1}) {
		t.Fatalf("scores %v, want the starved endpoint alone at 1", got)
	}
}

// Requests that are not cheap for it stay with the others: a prompt longer
// than the fleet's mean, one whose first token would come later than the
// budget (600 tokens: about 0.44 s against 0.15 × 2 s), and one whose
// adapter it does not hold.
func TestStarvedEndpointLeavesExpensiveRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  scheduling.Request
	}{
		{"longer than the mean prompt", scheduling.Request{Model: "m", PromptTokens: 1200}},
		{"over the first-token budget", scheduling.Request{Model: "m", PromptTokens: 600}},
		{"adapter not resident", scheduling.Request{Model: "m", Adapter: "sql", PromptTokens: 100}},
	} {
		if got := owed(t, "", &tc.req, fleet()); slices.Contains(got, 1) {
			t.Errorf("%s: scores %v, want all 0", tc.name, got)
		}
	}
	// With a budget of half the SLO, the 600-token prompt fits.
	if got := owed(t, `{"ttftBudget": 0.5}`, &scheduling.Request{Model: "m", PromptTokens: 600}, fleet()); got[3] != 1 {
		t.Fatalf("scores %v with a 1 s budget, want the starved endpoint at 1", got)
	}
}

// A prompt whose prefix another endpoint holds is cheaper there: the floor
// does not take it from that endpoint.
func TestPrefixHeldElsewhereStays(t *testing.T) {
	ix := prefixindex.New(64)
	var prompt string
	for range 40 {
		prompt += "shared system prompt " // 840 characters in all: about 210 tokens
	}
	req := &scheduling.Request{Model: "m", Prompt: prompt}
	c := plugintest.Cycle(req, ix)
	c.RecordPick(0)
	cands := fleet()
	if got := plugintest.Scores(scorer(t), c, cands); slices.Contains(got, 1) {
		t.Fatalf("scores %v, want all 0: endpoint a holds the prompt", got)
	}
	fresh := plugintest.Cycle(&scheduling.Request{Model: "m", Prompt: prompt}, prefixindex.New(64))
	if got := plugintest.Scores(scorer(t), fresh, fleet()); got[3] != 1 {
		t.Fatalf("scores %v, want the starved endpoint at 1 when no one holds the prompt", got)
	}
}

// The floor stays out of the way: every endpoint at or above it, a fleet
// with too little traffic for shares to mean anything, a starved endpoint
// that is ejected or whose tokens come slower than the TPOT budget, and the
// floor turned off.
func TestNoFloorPick(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 100}
	for _, tc := range []struct {
		name   string
		params string
		change func(vs []*datastore.View)
	}{
		{"at the floor", "", func(vs []*datastore.View) { vs[3].PickRate = 0.8 }}, // 0.3 × 9.8/4 = 0.735
		{"too little traffic", "", func(vs []*datastore.View) {
			for _, v := range vs {
				v.PickRate /= 100
			}
		}},
		{"ejected", "", func(vs []*datastore.View) { vs[3].Avoid = true }},
		{"slow tokens", "", func(vs []*datastore.View) { vs[3].Speed.InterTokenSeconds = 0.07 }},
		{"floor off", `{"floor": 0}`, func([]*datastore.View) {}},
	} {
		vs := fleet()
		tc.change(vs)
		if got := owed(t, tc.params, req, vs); slices.Contains(got, 1) {
			t.Errorf("%s: scores %v, want all 0", tc.name, got)
		}
	}
}

// Of two starved endpoints the one further under the floor is owed first.
func TestMostStarvedFirst(t *testing.T) {
	vs := fleet()
	vs[1].Speed, vs[1].PickRate = vs[3].Speed, 0.05
	if got := owed(t, "", &scheduling.Request{Model: "m", PromptTokens: 100}, vs); !slices.Equal(got, []float64{0, 1, 0, 0}) {
		t.Fatalf("scores %v, want the endpoint at 0.05 picks/s", got)
	}
}

// An endpoint not measured yet carries the optimistic prior: it is judged as
// the slowest measured candidate, so a request too long for that speed is
// not sent there, and nothing is sent while no candidate is measured.
func TestUnmeasuredEndpointJudgedAsTheSlowest(t *testing.T) {
	vs := fleet()
	setSpeed(vs[3], 20000, 0.01, 0.01)
	vs[3].Speed.PrefillSamples, vs[3].Speed.DecodeSamples = 1, 0 // the prior
	medium := &scheduling.Request{Model: "m", PromptTokens: 500}
	if got := owed(t, "", medium, vs); got[3] != 1 {
		t.Fatalf("scores %v: judged as the H100s, 500 tokens fit the 0.3 s budget", got)
	}
	setSpeed(vs[2], 1500, 0.037, 0.04) // a measured A10G among the candidates
	if got := owed(t, "", medium, vs); slices.Contains(got, 1) {
		t.Fatalf("scores %v: judged as the A10G, 500 tokens (about 0.37 s) miss the budget", got)
	}
	if got := owed(t, "", &scheduling.Request{Model: "m", PromptTokens: 150}, vs); got[3] != 1 {
		t.Fatalf("scores %v: 150 tokens fit even at the A10G's speed", got)
	}
	for _, v := range vs {
		v.Speed.PrefillSamples = 0
	}
	if got := owed(t, "", &scheduling.Request{Model: "m", PromptTokens: 150}, vs); slices.Contains(got, 1) {
		t.Fatalf("scores %v with no candidate measured, want all 0", got)
	}
}

func TestParametersValidated(t *testing.T) {
	for _, bad := range []string{`{"floor": 1.5}`, `{"floor": -0.1}`, `{"slo": {"ttftSeconds": 0, "tpotSeconds": 0.1}}`,
		`{"ttftBudget": 0}`, `{"tpotBudget": 2}`, `{"window": 3}`} {
		if _, err := New("x", scheduling.Parameters(bad)); err == nil {
			t.Errorf("parameters %s accepted", bad)
		}
	}
}

// scorer builds the scorer with the default parameters.
func scorer(t testing.TB) scheduling.Scorer { return plugintest.New[scheduling.Scorer](t, New, "") }

// The floor keeps the route's SLO unless its parameters name one: a 4 s
// route gives a 0.6 s first-token budget, which the 600-token prompt fits.
func TestFloorKeepsTheRouteSLO(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 600}
	for _, tc := range []struct {
		name, params string
		want         float64
	}{
		{"route's SLO", "", 1},
		{"its own SLO", `{"slo": {"ttftSeconds": 2, "tpotSeconds": 0.1}}`, 0},
	} {
		s := plugintest.New[scheduling.Scorer](t, New, tc.params)
		s.(admission.RouteSLOUser).UseRouteSLO(admission.SLO{TTFTSeconds: 4, TPOTSeconds: 0.1})
		if got := plugintest.Scores(s, plugintest.Cycle(req, nil), fleet()); got[3] != tc.want {
			t.Errorf("%s: scores %v, want the starved endpoint at %v", tc.name, got, tc.want)
		}
	}
	if _, err := New("f", scheduling.Parameters(`{"slo": {"ttftSeconds": 2}}`)); err == nil {
		t.Error("an SLO without tpotSeconds was accepted")
	}
}
