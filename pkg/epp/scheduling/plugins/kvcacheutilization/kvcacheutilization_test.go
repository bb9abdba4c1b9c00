package kvcacheutilization

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// Free space scores; unknown utilisation is neutral (0.5) and a stale
// endpoint scores 0 whatever its last sample said.
func TestScoresFreeSpace(t *testing.T) {
	vs := plugintest.Views(plugintest.KVSample(0.2), plugintest.KVSample(0.3), datastore.Metrics{}, plugintest.KVSample(0))
	vs[3].Stale = true
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); s[0] != 0.8 || s[1] != 0.7 || s[2] != 0.5 || s[3] != 0 {
		t.Fatalf("scores %v, want 0.8, 0.7, 0.5, 0", s)
	}
	// Prompts sent since the sample fill the cache: 2 × 400 of 1600 tokens.
	vs[0].PicksSinceSample, vs[0].MeanPromptTokens = 2, 400
	if s := plugintest.Score(t, New, "", &scheduling.Request{}, vs); !(s[0] < s[1]) {
		t.Fatalf("picks since the sample ignored: %v", s)
	}
}

func TestRejectsParameters(t *testing.T) {
	if _, err := New(Type, scheduling.Parameters(`{"threshold": 0.5}`)); err == nil {
		t.Fatal("a parameter accepted by a scorer that takes none")
	}
}
