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
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

func run(t *testing.T, sc *scenario.Scenario, policy string, seed uint64) bench.Outcome {
	t.Helper()
	o, err := bench.RunJob(context.Background(), des.Backend{}, bench.Job{Scenario: sc, Policy: policy, Seed: seed}, nil)
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	return o
}

// Every policy serves every request of the small scenario, and the oracle —
// exact state, exact cost model — has the best median and P95 TTFT.
func TestEveryPolicyServesAllAndOracleLeadsTTFT(t *testing.T) {
	sc := scenariotest.Small(t)
	oracle := run(t, sc, policies.Oracle, 1).Metrics
	for _, p := range policies.Names {
		m := run(t, sc, p, 1).Metrics
		if m.Failed != 0 || m.Completed != oracle.Completed {
			t.Errorf("%s: completed %v failed %v, the oracle completed %v", p, m.Completed, m.Failed, oracle.Completed)
		}
		if m.TTFTP50 < oracle.TTFTP50 || m.TTFTP95 < oracle.TTFTP95 {
			t.Errorf("%s beats the oracle: TTFT p50 %.4f / p95 %.4f against %.4f / %.4f", p, m.TTFTP50, m.TTFTP95, oracle.TTFTP50, oracle.TTFTP95)
		}
	}
}

func TestDeterministicPerSeed(t *testing.T) {
	sc := scenariotest.Small(t)
	for _, p := range []string{policies.IGW, policies.Random, policies.SGLangCacheAware, policies.LLMDPrecise, policies.DynamoPrecise} {
		a, b, c := run(t, sc, p, 3), run(t, sc, p, 3), run(t, sc, p, 4)
		if !reflect.DeepEqual(a.Metrics, b.Metrics) {
			t.Errorf("%s: two runs of seed 3 differ:\n%+v\n%+v", p, a.Metrics, b.Metrics)
		}
		if reflect.DeepEqual(a.Metrics, c.Metrics) {
			t.Errorf("%s: seeds 3 and 4 give identical results", p)
		}
	}
}

func TestWarmupExcludedAndArrivalsStopAtDuration(t *testing.T) {
	sc := scenariotest.Small(t)
	o, err := bench.RunJobs(context.Background(), des.Backend{}, []bench.Job{{Scenario: sc, Policy: policies.LeastRequest, Seed: 1}},
		bench.RunOptions{KeepTraces: true})
	if err != nil {
		t.Fatal(err)
	}
	var counted, late int
	for _, r := range o[0].Trace.Records {
		if r.Counted != (r.Arrival >= sc.Warmup) {
			t.Fatalf("request at %v counted=%v", r.Arrival, r.Counted)
		}
		if r.Arrival > sc.Duration {
			t.Fatalf("arrival at %v after the %v duration", r.Arrival, sc.Duration)
		}
		if !r.Done || r.Failed {
			t.Fatalf("request %d not drained: %+v", r.ID, r)
		}
		if r.Counted {
			counted++
		}
		if r.Finish > sc.Duration {
			late++
		}
	}
	if counted != int(o[0].Metrics.Completed) || late == 0 {
		t.Fatalf("counted %d, completed %v, finished after the duration %d", counted, o[0].Metrics.Completed, late)
	}
}

// The telemetry the picker gets in virtual time is what it would parse from
// the simulator's vLLM /metrics: queue, batch, KV use and geometry, adapters.
func TestMetricsFromSnapshot(t *testing.T) {
	e, err := sim.New(sim.Config{GPU: "H100", Model: "llama-3.1-8b", MaxNumSeqs: 1, MaxLoras: 2})
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokenizer.Tokenize(tokenizer.GenerateText(1, 300))
	_ = e.Submit(sim.Request{ID: 1, Adapter: "sql", Prompt: prompt, OutputTokens: 50}, 0)
	_ = e.Submit(sim.Request{ID: 2, Adapter: "chat", Prompt: prompt, OutputTokens: 50}, 0)
	e.Advance(100 * time.Millisecond)
	snap := e.Snapshot()
	var m datastore.Metrics
	at := time.Unix(100, 0)
	des.MetricsFromSnapshot(&snap, at, &m)
	if m.Running != 1 || m.Waiting != 1 || !m.KVCacheKnown || m.KVCacheUsage <= 0 || m.BlockSizeTokens != 16 ||
		m.NumGPUBlocks != snap.NumBlocks || m.MaxAdapters != 2 || m.SampledAt != at {
		t.Fatalf("metrics %+v", m)
	}
	if len(m.RunningAdapters) != 1 || m.RunningAdapters[0] != "sql" || len(m.WaitingAdapters) != 1 || m.WaitingAdapters[0] != "chat" {
		t.Fatalf("adapters running %v waiting %v", m.RunningAdapters, m.WaitingAdapters)
	}
	// The next sample reuses unchanged lists and never mutates ones handed out.
	held := m.RunningAdapters
	des.MetricsFromSnapshot(&snap, at, &m)
	if &held[0] != &m.RunningAdapters[0] {
		t.Fatal("unchanged adapter list copied again")
	}
	snap.RunningAdapters = append(snap.RunningAdapters[:0], "other")
	des.MetricsFromSnapshot(&snap, at, &m)
	if held[0] != "sql" || m.RunningAdapters[0] != "other" {
		t.Fatal("a list handed to the picker was overwritten")
	}
}

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

// Past the fleet's capacity, igw's picker holds a request in its queue
// while every pod is over its bounds, and routes it again when one frees
// up (waiting up to the whole wait bound here): the excess is shed with 429
// and nothing else, and what is served, held or not, keeps the first-token
// SLO.
func TestOverloadIsHeldThenShedWith429(t *testing.T) {
	sc := scenariotest.Parse(t, "overload", `
name: overload
duration: 20s
warmup: 2s
fleet:
  - {name: h100, replicas: 2, gpu: H100, model: llama-3.1-8b, maxNumSeqs: 256}
workload:
  arrival: {type: poisson, rate: 60}
  input:  {dist: lognormal, median: 1500, sigma: 0.8, min: 16, max: 8000}
  output: {dist: lognormal, median: 100, sigma: 0.6, min: 1, max: 400}
slo: {ttft: 2s, tpot: 100ms}
`)
	backend := des.Backend{IGWConfig: config.Default + "admission: {queue: {maxRequests: 64, maxBytes: 1048576, maxWaitSeconds: 1.5}}\n"}
	o, err := bench.RunJob(context.Background(), backend, bench.Job{Scenario: sc, Policy: policies.IGW, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := o.Metrics
	if m.FailedByCode["429"] == 0 || m.Failed != m.FailedByCode["429"] {
		t.Fatalf("failures %v by code %v: want 429s only", m.Failed, m.FailedByCode)
	}
	if m.Completed == 0 || m.TTFTP99 > 2 {
		t.Fatalf("completed %v with P99 TTFT %.2f s: want the served within the 2 s SLO", m.Completed, m.TTFTP99)
	}
}
