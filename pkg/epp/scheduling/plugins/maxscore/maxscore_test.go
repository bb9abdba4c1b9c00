package maxscore

import (
	"slices"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// The best totals come first; equal totals (to within 1e-9) share the first
// place at random.
func TestRanksByTotalBreakingTiesAtRandom(t *testing.T) {
	p := plugintest.New[scheduling.Picker](t, New, "")
	c := plugintest.Cycle(&scheduling.Request{}, nil)
	vs := plugintest.Views(make([]datastore.Metrics, 4)...)
	totals := []float64{0.2, 0.9, 0.9 + 1e-12, 0.1}
	first := map[int]int{}
	for range 200 {
		got := p.Pick(c, vs, totals, 3, nil)
		if len(got) != 3 || got[2] != 0 || !slices.Contains([]int{1, 2}, got[0]) || got[0] == got[1] {
			t.Fatalf("pick %v, want 1 and 2 in either order, then 0", got)
		}
		first[got[0]]++
	}
	if first[1] < 60 || first[2] < 60 {
		t.Fatalf("ties not broken at random: first places %v", first)
	}
	// Counter-case: a clear winner always wins.
	for range 50 {
		if got := p.Pick(c, vs, []float64{0.2, 0.9, 0.8, 0.1}, 1, nil); !slices.Equal(got, []int{1}) {
			t.Fatalf("pick %v, want [1]", got)
		}
	}
}

// At most len(cands) are returned, appended after what dst holds.
func TestAppendsAtMostEveryCandidate(t *testing.T) {
	vs := plugintest.Views(make([]datastore.Metrics, 2)...)
	got := plugintest.New[scheduling.Picker](t, New, "").Pick(plugintest.Cycle(&scheduling.Request{}, nil), vs, []float64{0.1, 0.7}, 5, []int{9})
	if !slices.Equal(got, []int{9, 1, 0}) {
		t.Fatalf("pick %v, want [9 1 0]", got)
	}
	if _, err := New(Type, scheduling.Parameters(`{"tie": 0.1}`)); err == nil {
		t.Fatal("a parameter accepted by a picker that takes none")
	}
}
