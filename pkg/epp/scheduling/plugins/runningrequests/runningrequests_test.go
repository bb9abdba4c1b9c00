package runningrequests

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// The load is running plus waiting requests, corrected by picks and
// completions since the sample.
func TestScoresTheLoadEstimate(t *testing.T) {
	vs := plugintest.Views(datastore.Metrics{Running: 4, Waiting: 1}, datastore.Metrics{Running: 1})
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); s[0] != 0 || s[1] != 1 {
		t.Fatalf("scores %v, want 0 for 5 requests and 1 for 1", s)
	}
	vs[1].PicksSinceSample = 6 // six requests sent since: now the busier
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); s[0] != 1 || s[1] != 0 {
		t.Fatalf("picks since the sample ignored: %v", s)
	}
	vs[1].FinishedSinceSample = 6 // ... and finished again
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); s[0] != 0 || s[1] != 1 {
		t.Fatalf("completions since the sample ignored: %v", s)
	}
}

func TestRejectsParameters(t *testing.T) {
	if _, err := New(Type, scheduling.Parameters(`{"weight": 2}`)); err == nil {
		t.Fatal("a parameter accepted by a scorer that takes none")
	}
}
