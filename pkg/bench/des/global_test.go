package des_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/des"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// twoRegions: two small member clusters 40 ms apart, clients mostly in the
// first region, conversations whose turns share their context; the first
// cluster is unreachable from 20 s to 30 s.
const twoRegions = `
name: two-regions
duration: 40s
warmup: 5s
clusters:
  - {name: use1, region: us-east-1, fleet: [{name: h100, replicas: 2, gpu: H100, model: llama-3.1-8b}]}
  - {name: euw1, region: eu-west-1, fleet: [{name: h100, replicas: 2, gpu: H100, model: llama-3.1-8b}]}
network: [{from: us-east-1, to: eu-west-1, delay: 40ms}]
outages: [{cluster: use1, at: 20s, for: 10s}]
workload:
  origins: [{region: us-east-1, share: 0.7}, {region: eu-west-1, share: 0.3}]
  arrival: {type: poisson, rate: 2}
  multiTurn: {turns: 3, thinkTime: {dist: fixed, value: 1s}}
  input: {dist: fixed, value: 500}
  output: {dist: fixed, value: 40}
slo: {ttft: 1s}
`

func globalScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(twoRegions), "two-regions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func runTraced(t *testing.T, sc *scenario.Scenario, policy string, seed uint64) bench.Outcome {
	t.Helper()
	out, err := bench.RunJobs(context.Background(), des.Backend{}, []bench.Job{{Scenario: sc, Policy: policy, Seed: seed}},
		bench.RunOptions{Parallel: 1, KeepTraces: true})
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	return out[0]
}

// Every global policy serves the conversations through the outage: the only
// failures are responses cut after their first byte when the member went
// down; requests that had none were retried elsewhere. Nothing is sent to
// the dead member two seconds after it died, and it takes traffic again
// after it comes back.
func TestGlobalPoliciesThroughAnOutage(t *testing.T) {
	sc := globalScenario(t)
	for _, p := range policies.GlobalNames {
		o := runTraced(t, sc, p, 1)
		m := o.Metrics
		if m.Completed == 0 || m.Failed != m.CutByOutage {
			t.Errorf("%s: completed %v, failed %v of which cut by the outage %v", p, m.Completed, m.Failed, m.CutByOutage)
		}
		rep := bench.Outages(o, sc)[0]
		if rep.ErrorsWithoutFirstByte != 0 || rep.OffAfter > 2*time.Second || rep.BackAfter < 0 || rep.BackAfter > 30*time.Second {
			t.Errorf("%s: %d errors without a first byte, off after %v, back after %v", p, rep.ErrorsWithoutFirstByte, rep.OffAfter, rep.BackAfter)
		}
		retried := 0
		for _, r := range o.Trace.Records {
			for _, s := range r.Sends {
				if s.Cluster == 0 && s.At >= 20*time.Second+2*time.Second && s.At < 30*time.Second {
					t.Errorf("%s: request %d sent to the dead member at %v", p, r.ID, s.At)
				}
			}
			if len(r.Sends) > 1 {
				retried++
			}
		}
		if p == policies.IGWGlobal && retried == 0 {
			t.Errorf("%s: no request was retried on the other member", p)
		}
	}
}

// The network delay is in every TTFT: a client in eu-west-1 served by
// use1 waits at least the 80 ms round trip; one served at home at least 2 ms.
func TestNetworkDelayInTTFT(t *testing.T) {
	sc := globalScenario(t)
	sc.Outages = nil
	o := runTraced(t, sc, policies.GlobalRoundRobin, 2)
	far := 0
	for _, r := range o.Trace.Records {
		if r.FirstToken == 0 || len(r.Sends) == 0 {
			continue
		}
		ttft := r.FirstToken - r.Arrival
		home := (r.Sends[0].Cluster == 0) == (r.Origin == "us-east-1")
		if !home {
			far++
		}
		if want := map[bool]time.Duration{true: 2 * time.Millisecond, false: 80 * time.Millisecond}[home]; ttft < want {
			t.Fatalf("request %d (home %v) TTFT %v < %v", r.ID, home, ttft, want)
		}
	}
	if far == 0 {
		t.Fatal("round-robin sent nothing across regions")
	}
}

func TestGlobalDeterministicPerSeed(t *testing.T) {
	sc := globalScenario(t)
	a, b, c := run(t, sc, policies.IGWGlobal, 3), run(t, sc, policies.IGWGlobal, 3), run(t, sc, policies.IGWGlobal, 4)
	if !reflect.DeepEqual(a.Metrics, b.Metrics) || reflect.DeepEqual(a.Metrics, c.Metrics) {
		t.Fatalf("seed 3 twice:\n%+v\n%+v\nseed 4:\n%+v", a.Metrics, b.Metrics, c.Metrics)
	}
}

func TestGlobalPolicyNeedsClusters(t *testing.T) {
	sc := globalScenario(t)
	one := *sc
	one.Fleet, one.Clusters = sc.Groups(), nil
	if _, err := bench.RunJob(context.Background(), des.Backend{}, bench.Job{Scenario: &one, Policy: policies.IGWGlobal, Seed: 1}, nil); err == nil {
		t.Fatal("a global policy ran a single-cluster scenario")
	}
	// A single-cluster policy runs the members' pods as one cluster.
	if m := run(t, sc, policies.IGW, 1).Metrics; m.Completed == 0 || m.Failed != 0 {
		t.Fatalf("igw on the merged fleet: %+v", m)
	}
}
