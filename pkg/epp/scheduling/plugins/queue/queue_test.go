package queue

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// The shortest queue scores 1, the longest 0; requests sent since the sample
// count as queued, and the running batch does not count at all.
func TestScoresTheWaitingEstimate(t *testing.T) {
	vs := plugintest.Views(datastore.Metrics{Waiting: 0}, datastore.Metrics{Waiting: 5}, datastore.Metrics{Waiting: 10})
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); s[0] != 1 || s[1] != 0.5 || s[2] != 0 {
		t.Fatalf("scores %v, want 1, 0.5, 0", s)
	}
	vs[0].PicksSinceSample = 20 // sent since the sample: now the longest queue
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); s[0] != 0 || s[1] != 1 {
		t.Fatalf("picks since the sample ignored: %v", s)
	}
	busy := plugintest.Views(datastore.Metrics{Waiting: 1, Running: 100}, datastore.Metrics{Waiting: 2})
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, busy); s[0] != 1 || s[1] != 0 {
		t.Fatalf("running requests counted as queued: %v", s)
	}
}

func TestRejectsParameters(t *testing.T) {
	if _, err := New(Type, scheduling.Parameters(`{"weight": 2}`)); err == nil {
		t.Fatal("a parameter accepted by a scorer that takes none")
	}
}
