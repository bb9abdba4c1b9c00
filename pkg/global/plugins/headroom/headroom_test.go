package headroom

import (
	"math"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

func withKV(free float64, capacity int64) *globalsummary.Model {
	m := membertest.Model("m")
	m.KVHeadroom, m.KVCapacityTokens = &free, capacity
	return m
}

func scores(t *testing.T, states ...member.State) []float64 {
	t.Helper()
	s, err := New(Type, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, views := membertest.Decide(&scheduling.Request{Model: "m"}, states...)
	return plugintest.Scores(s.(scheduling.Scorer), c, views)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestRoomInTokens: a large member at 40% free beats a small one at 60%; an
// unknown one scores 0.5; with a capacity unknown, shares are compared.
func TestRoomInTokens(t *testing.T) {
	big := membertest.Ready("big", "r", withKV(0.4, 1_000_000))
	small := membertest.Ready("small", "r", withKV(0.6, 100_000))
	unknown := membertest.Ready("unknown", "r", membertest.Model("m"))
	unknown.Summary.KVHeadroom = nil
	got := scores(t, big, small, unknown)
	if !near(got[0], 1) || !near(got[1], 0.15) || got[2] != 0.5 {
		t.Fatalf("scores %v, want [1 0.15 0.5]", got)
	}
	noCap := membertest.Ready("nocap", "r", withKV(0.8, 0))
	got = scores(t, big, small, noCap)
	if !near(got[0], 0.5) || !near(got[1], 0.75) || !near(got[2], 1) {
		t.Fatalf("by share: %v, want [0.5 0.75 1]", got)
	}
}

// TestPicksSinceTheSummaryUseRoom: prompts sent after the summary lower the
// member's room before the next summary says so.
func TestPicksSinceTheSummaryUseRoom(t *testing.T) {
	s, _ := New(Type, nil)
	a := membertest.Ready("a", "r", withKV(0.5, 100_000))
	b := membertest.Ready("b", "r", withKV(0.5, 100_000))
	c, views := membertest.Decide(&scheduling.Request{Model: "m"}, a, b)
	views[0].PicksSinceSample, views[0].MeanPromptTokens = 10, 2500 // 25k tokens sent
	got := plugintest.Scores(s.(scheduling.Scorer), c, views)
	if !near(got[0], 0.5) || got[1] != 1 {
		t.Fatalf("scores %v, want [0.5 1]", got)
	}
}
