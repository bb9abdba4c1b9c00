package prefixcache

import (
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

func score(t *testing.T, params string, req *scheduling.Request, ix *prefixindex.Index, endpoints int) []float64 {
	t.Helper()
	scorer := plugintest.New[*Scorer](t, New, params)
	return plugintest.Scores(scorer, plugintest.Cycle(req, ix), plugintest.Views(make([]datastore.Metrics, endpoints)...))
}

// Endpoint 0 holds the whole prompt, endpoint 1 only its first block (which
// every request shares), endpoint 2 nothing: only a match of at least
// minMatchTokens counts, as the matched share of the prompt's blocks.
func TestScoresMatchedShareAboveMinimum(t *testing.T) {
	ix := prefixindex.New(1000)
	shared := strings.Repeat("s", 4*plugintest.BlockTokens)
	req := &scheduling.Request{Model: "m", Prompt: shared + strings.Repeat("system prompt ", 100) + "q"}
	hashes := plugintest.Cycle(req, ix).PromptHashes()
	ix.Add(0, hashes, nil)
	ix.Add(1, hashes[:1], nil)
	ix.Add(2, hashes[:len(hashes)/2], nil)
	if s := score(t, "", req, ix, 4); s[0] != 1 || s[1] != 0 || s[2] != 0.5 || s[3] != 0 {
		t.Fatalf("scores %v, want 1, 0 (one 16-token block is below the 128-token minimum), 0.5, 0", s)
	}
	if s := score(t, `{"minMatchTokens": 1}`, req, ix, 4); s[1] != 1/float64(len(hashes)) {
		t.Fatalf("minMatchTokens 1: the one-block match scored %v", s[1])
	}
	// A prompt shorter than a block has nothing to match.
	if s := score(t, `{"minMatchTokens": 1}`, &scheduling.Request{Model: "m", Prompt: "hi"}, ix, 2); s[0] != 0 || s[1] != 0 {
		t.Fatalf("a prompt below one block scored %v", s)
	}
}

func TestRejectsBadParameters(t *testing.T) {
	for _, params := range []string{`{"minMatchTokens": 0}`, `{"minMatch": 64}`} {
		if _, err := New(Type, scheduling.Parameters(params)); err == nil {
			t.Errorf("%s accepted", params)
		}
	}
}
