package saturation

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// A queue at the depth, a KV cache at the threshold or a stale sample
// saturates an endpoint; saturated endpoints are dropped while others remain.
func TestDropsSaturatedWhileOthersRemain(t *testing.T) {
	vs := plugintest.Views(datastore.Metrics{Waiting: 5}, datastore.Metrics{Waiting: 4}, plugintest.KVSample(0.9), plugintest.KVSample(0.5), datastore.Metrics{})
	vs[4].Stale = true
	c := plugintest.Cycle(&scheduling.Request{}, nil)
	if got := plugintest.Keys(plugintest.New[*Filter](t, New, "").Filter(c, append([]*datastore.View(nil), vs...))); got != "bd" {
		t.Errorf("defaults (queue 5, KV 0.8) kept %q, want \"bd\"", got)
	}
	strict := plugintest.New[*Filter](t, New, `{"queueDepth": 4, "kvCacheUtilization": 0.5}`)
	// Every endpoint is saturated by these limits: all are kept.
	if got := plugintest.Keys(strict.Filter(c, append([]*datastore.View(nil), vs...))); got != "abcde" {
		t.Errorf("stricter limits kept %q, want every endpoint (all saturated)", got)
	}
}

func TestRejectsBadLimits(t *testing.T) {
	for _, params := range []string{`{"queueDepth": 0}`, `{"kvCacheUtilization": 1.5}`, `{"depth": 3}`} {
		if _, err := New(Type, scheduling.Parameters(params)); err == nil {
			t.Errorf("%s accepted", params)
		}
	}
}
