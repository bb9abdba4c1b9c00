package des_test

import (
	"context"
	"testing"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/des"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

func load(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load("../../../bench/testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestEveryPolicyRuns(t *testing.T) {
	sc := load(t)
	for _, p := range policies.Names {
		o, err := bench.RunJob(context.Background(), des.Backend{}, bench.Job{Scenario: sc, Policy: p, Seed: 1}, nil)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		t.Logf("%-20s %+v", p, o.Metrics)
	}
}
