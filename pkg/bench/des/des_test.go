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
