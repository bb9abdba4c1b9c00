package load

import (
	"slices"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// The shortest queue scores 1, the longest 0; requests sent since the sample
// count as queued, and the running batch does not count at all.
func TestScoresTheWaitingEstimate(t *testing.T) {
	vs := plugintest.Views(datastore.Metrics{Waiting: 0}, datastore.Metrics{Waiting: 5}, datastore.Metrics{Waiting: 10})
	if s := plugintest.Score(t, NewQueue, "", &scheduling.Request{}, vs); s[0] != 1 || s[1] != 0.5 || s[2] != 0 {
		t.Fatalf("scores %v, want 1, 0.5, 0", s)
	}
	vs[0].PicksSinceSample = 20 // sent since the sample: now the longest queue
	if s := plugintest.Score(t, NewQueue, "", &scheduling.Request{}, vs); s[0] != 0 || s[1] != 1 {
		t.Fatalf("picks since the sample ignored: %v", s)
	}
	busy := plugintest.Views(datastore.Metrics{Waiting: 1, Running: 100}, datastore.Metrics{Waiting: 2})
	if s := plugintest.Score(t, NewQueue, "", &scheduling.Request{}, busy); s[0] != 1 || s[1] != 0 {
		t.Fatalf("running requests counted as queued: %v", s)
	}
}

// The load is running plus waiting requests, corrected by picks and
// completions since the sample.
func TestScoresTheLoadEstimate(t *testing.T) {
	vs := plugintest.Views(datastore.Metrics{Running: 4, Waiting: 1}, datastore.Metrics{Running: 1})
	if s := plugintest.Score(t, NewRunningRequests, "", &scheduling.Request{}, vs); s[0] != 0 || s[1] != 1 {
		t.Fatalf("scores %v, want 0 for 5 requests and 1 for 1", s)
	}
	vs[1].PicksSinceSample = 6 // six requests sent since: now the busier
	if s := plugintest.Score(t, NewRunningRequests, "", &scheduling.Request{}, vs); s[0] != 1 || s[1] != 0 {
		t.Fatalf("picks since the sample ignored: %v", s)
	}
	vs[1].FinishedSinceSample = 6 // ... and finished again
	if s := plugintest.Score(t, NewRunningRequests, "", &scheduling.Request{}, vs); s[0] != 0 || s[1] != 1 {
		t.Fatalf("completions since the sample ignored: %v", s)
	}
}

func TestRejectsParameters(t *testing.T) {
	for typ, newScorer := range map[string]scheduling.Factory{QueueType: NewQueue, RunningRequestsType: NewRunningRequests} {
		if _, err := newScorer(typ, scheduling.Parameters(`{"weight": 2}`)); err == nil {
			t.Fatalf("%s: a parameter accepted by a scorer that takes none", typ)
		}
	}
}

func TestLowerIsBetter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		stale  []int
		want   []float64
	}{
		{"linear between lowest and highest", []float64{0, 5, 10}, nil, []float64{1, 0.5, 0}},
		{"all equal score 1", []float64{3, 3}, nil, []float64{1, 1}},
		{"a stale endpoint scores 0 and does not stretch the range", []float64{0, 4, 8}, []int{0}, []float64{0, 1, 0}},
		{"only stale endpoints", []float64{1, 2}, []int{0, 1}, []float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cands := make([]*datastore.View, len(tc.values))
			for i := range cands {
				cands[i] = &datastore.View{ID: int32(i), Stale: slices.Contains(tc.stale, i)}
			}
			got := make([]float64, len(cands))
			lowerIsBetter(cands, got, func(v *datastore.View) float64 { return tc.values[v.ID] })
			if !slices.Equal(got, tc.want) {
				t.Fatalf("scores %v, want %v", got, tc.want)
			}
		})
	}
}
