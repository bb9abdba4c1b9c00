package des_test

import (
	"reflect"
	"testing"

	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
)

// smallCaches is the small scenario on KV caches too small for its prompts,
// so that the servers evict what a router's own record says they hold.
func smallCaches(t *testing.T) *scenario.Scenario {
	sc := scenariotest.Small(t)
	for i := range sc.Fleet {
		sc.Fleet[i].KVCacheTokens = 6000
	}
	return sc
}

// dynamo-precise reads the engines' KV events: where the servers evicted
// blocks, it routes otherwise than dynamo-cost, whose overlaps are its own
// guesses. With every pod's events lost from the start, each pod falls back
// to those guesses, and it routes exactly as dynamo-cost does.
func TestPreciseRoutersReadEventsAndFallBackWhenLost(t *testing.T) {
	sc := smallCaches(t)
	approx := run(t, sc, policies.DynamoCost, 1).Metrics
	precise := run(t, sc, policies.DynamoPrecise, 1).Metrics
	if reflect.DeepEqual(approx, precise) {
		t.Fatal("dynamo-precise routed exactly as dynamo-cost: no KV events reached it")
	}
	lost := smallCaches(t)
	for _, g := range lost.Fleet {
		for r := range g.Replicas {
			lost.Faults = append(lost.Faults, scenario.Fault{Group: g.Name, Replica: r, Kind: "events-lost"})
		}
	}
	if err := lost.Validate(); err != nil {
		t.Fatal(err)
	}
	if fallback := run(t, lost, policies.DynamoPrecise, 1).Metrics; !reflect.DeepEqual(approx, fallback) {
		t.Fatalf("events lost: dynamo-precise\n%+v\nwant dynamo-cost's\n%+v", fallback, approx)
	}
}
