package predictedlatency

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// placementFleet is three alike idle endpoints, the first given a third of
// the content the others were of late.
func placementFleet() []*datastore.View {
	vs := []*datastore.View{view(0, 10000, 0.01, 0), view(1, 10000, 0.01, 0), view(2, 10000, 0.01, 0)}
	for i, tokens := range []float64{10000, 30000, 30000} { // 1, 3 and 3 s of prefill at 10,000 a second
		vs[i].PlacedTokens, vs[i].LastPickAt = tokens, plugintest.T0
	}
	return vs
}

// scoreCached scores a 1,000-token prompt of which endpoint holder holds
// cached tokens (holder < 0: none holds any).
func scoreCached(p *Scorer, vs []*datastore.View, holder, cached int) []float64 {
	c := plugintest.Cycle(&scheduling.Request{Model: "m", PromptTokens: 1000}, nil)
	for _, v := range vs {
		c.SetCachedTokens(v, 0)
	}
	if holder >= 0 {
		c.SetCachedTokens(vs[holder], cached)
	}
	return plugintest.Scores(p, c, vs)
}

// Where requests find most of their prompts cached, a prompt no endpoint
// holds goes to the endpoint given the least content of late; a prompt one
// endpoint holds is scored as without steering.
func TestNewContentGoesWhereTheLeastWasPlacedWherePromptsAreReused(t *testing.T) {
	p, fresh := plugintest.New[*Scorer](t, New, ""), plugintest.New[*Scorer](t, New, "")
	vs := placementFleet()
	if s := scoreCached(p, vs, -1, 0); s[0] != s[1] || s[1] != s[2] {
		t.Fatalf("before any prompt was reused, new content scored %v; want the alike endpoints alike", s)
	}
	for range 60 {
		scoreCached(p, vs, 1, 900)
	}
	s := scoreCached(p, vs, -1, 0)
	if !(s[0] > 0.9) || !(s[1] < 0.4) || s[1] != s[2] {
		t.Errorf("with prompts 90%% reused, new content scored %v; want the least placed endpoint near 1, the others (given three times as much) under 0.4", s)
	}
	if got, want := scoreCached(p, vs, 2, 500), scoreCached(fresh, vs, 2, 500); got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("a prompt endpoint 2 holds scored %v; want %v, as without steering", got, want)
	}
}

// Where prompts are seldom reused (a fifth or less of their tokens cached),
// new content is not steered: it goes where it is served first.
func TestNewContentIsNotSteeredWherePromptsAreSeldomReused(t *testing.T) {
	p := plugintest.New[*Scorer](t, New, "")
	vs := placementFleet()
	for range 100 {
		scoreCached(p, vs, 1, 200)
	}
	if s := scoreCached(p, vs, -1, 0); s[0] != s[1] || s[1] != s[2] {
		t.Errorf("with prompts 20%% reused, new content scored %v; want the alike endpoints alike", s)
	}
}
