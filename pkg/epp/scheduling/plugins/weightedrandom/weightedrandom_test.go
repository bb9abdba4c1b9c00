package weightedrandom

import (
	"slices"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// firstPlaces counts, over draws of n, how often each candidate comes first.
func firstPlaces(t *testing.T, totals []float64, n, draws int) []int {
	t.Helper()
	p := plugintest.New[scheduling.Picker](t, New, "")
	c := plugintest.Cycle(&scheduling.Request{}, nil)
	vs := plugintest.Views(make([]datastore.Metrics, len(totals))...)
	counts := make([]int, len(totals))
	for range draws {
		got := p.Pick(c, vs, totals, n, nil)
		if len(got) != min(n, len(totals)) {
			t.Fatalf("pick %v, want %d", got, min(n, len(totals)))
		}
		for i, k := range got {
			if slices.Contains(got[:i], k) {
				t.Fatalf("pick %v repeats a candidate", got)
			}
		}
		counts[got[0]]++
	}
	return counts
}

func TestDrawsInProportionToTotals(t *testing.T) {
	// Expected shares 0.2/2.1, 0.9/2.1, 0.9/2.1, 0.1/2.1 of 4000: 381, 1714, 1714, 190.
	counts := firstPlaces(t, []float64{0.2, 0.9, 0.9, 0.1}, 2, 4000)
	if counts[1] < 1500 || counts[2] < 1500 || counts[0] < 250 || counts[0] > 520 || counts[3] > 300 {
		t.Fatalf("first places %v, want about 381, 1714, 1714, 190", counts)
	}
	// All totals zero: uniform.
	for i, n := range firstPlaces(t, []float64{0, 0, 0}, 1, 3000) {
		if n < 850 || n > 1150 {
			t.Fatalf("candidate %d first %d times of 3000 with all totals zero, want about 1000", i, n)
		}
	}
}

// A candidate with a zero total comes only after every positive one.
func TestZeroTotalsComeLast(t *testing.T) {
	p := plugintest.New[scheduling.Picker](t, New, "")
	c := plugintest.Cycle(&scheduling.Request{}, nil)
	vs := plugintest.Views(make([]datastore.Metrics, 3)...)
	for range 200 {
		got := p.Pick(c, vs, []float64{0, 0.5, 0.5}, 3, nil)
		if got[2] != 0 {
			t.Fatalf("pick %v, want the zero-total candidate last", got)
		}
	}
	if _, err := New(Type, scheduling.Parameters(`{"temperature": 1}`)); err == nil {
		t.Fatal("a parameter accepted by a picker that takes none")
	}
}
