package loraaffinity

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

func score(t *testing.T, params, adapter string, vs []*datastore.View) []float64 {
	t.Helper()
	return plugintest.Score(t, New, params, &scheduling.Request{Adapter: adapter}, vs)
}

// fleet holds one endpoint in each adapter state for "sql": resident, a free
// slot, every slot taken but sql queued, every slot taken.
func fleet() []*datastore.View {
	return plugintest.Views(
		datastore.Metrics{RunningAdapters: []string{"sql"}, MaxAdapters: 2},
		datastore.Metrics{RunningAdapters: []string{"chat"}, MaxAdapters: 2},
		datastore.Metrics{RunningAdapters: []string{"chat"}, WaitingAdapters: []string{"sql"}, MaxAdapters: 1},
		datastore.Metrics{RunningAdapters: []string{"a", "b"}, MaxAdapters: 2},
	)
}

func TestScoresEachState(t *testing.T) {
	if s := score(t, "", "sql", fleet()); s[0] != 1 || s[1] != 0.8 || s[2] != 0.6 || s[3] != 0 {
		t.Fatalf("default scores %v, want 1, 0.8, 0.6, 0", s)
	}
	custom := `{"resident": 0.9, "freeSlot": 0.5, "queued": 0.2, "full": 0.1}`
	if s := score(t, custom, "sql", fleet()); s[0] != 0.9 || s[1] != 0.5 || s[2] != 0.2 || s[3] != 0.1 {
		t.Fatalf("configured scores %v, want 0.9, 0.5, 0.2, 0.1", s)
	}
	// Counter-case: base-model requests are indifferent.
	if s := score(t, "", "", fleet()); s[0] != 1 || s[3] != 1 {
		t.Fatalf("base-model scores %v, want 1 everywhere", s)
	}
	if _, err := New(Type, scheduling.Parameters(`{"loaded": 1}`)); err == nil {
		t.Fatal("unknown parameter accepted")
	}
}
