package capacity

import (
	"context"
	"testing"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/des"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
	"github.com/igw-dev/igw/pkg/bench/workload"
)

// run serves sc at rate multiplier m, with or without the early stop.
func run(t *testing.T, sc *scenario.Scenario, policy string, m float64, guarded bool) bench.Outcome {
	t.Helper()
	scaled := sc.ScaleRate(m)
	job := bench.Job{Scenario: scaled, Policy: policy, Seed: 1}
	if guarded {
		job.Guard = bench.NewGuard(sc.SLO, workload.MaxCounted(scaled, 1))
	}
	o, err := bench.RunJob(context.Background(), des.Backend{}, job, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The capacity found meets the SLO, and a load at most 2% higher does not.
// (Not every higher load misses: near capacity the verdict is noisy.)
func TestSearchFindsTheEdge(t *testing.T) {
	sc := scenariotest.Small(t)
	res, err := Search(context.Background(), des.Backend{}, sc, "igw", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scale <= MinScale || res.Scale >= MaxScale || res.ReqPerS <= 0 || res.Probes > 12 {
		t.Fatalf("result %+v", res)
	}
	if o := run(t, sc, "igw", res.Scale, false); !bench.MeetsSLO(o.Metrics, sc.SLO) {
		t.Errorf("at the capacity %v the SLO is missed: %+v", res.Scale, o.Metrics)
	}
	if res.Missed <= res.Scale || res.Missed > res.Scale*(1+DefaultTolerance) {
		t.Errorf("the bracket [%v, %v] is wider than 2%%", res.Scale, res.Missed)
	}
	if o := run(t, sc, "igw", res.Missed, false); bench.MeetsSLO(o.Metrics, sc.SLO) {
		t.Errorf("at %v, the bracket's upper end, the SLO is met", res.Missed)
	}
}

// The early stop ends overloaded runs and never one that meets the SLO.
func TestGuardStopsOnlyRunsThatMiss(t *testing.T) {
	sc := scenariotest.Small(t)
	stopped := 0
	for _, m := range []float64{1, 2, 2.7, 2.9, 3.2, 4, 8} {
		whole, guarded := run(t, sc, "igw", m, false), run(t, sc, "igw", m, true)
		meets := bench.MeetsSLO(whole.Metrics, sc.SLO)
		if guarded.Broken && meets {
			t.Errorf("×%v: stopped, but the whole run meets the SLO", m)
		}
		if !guarded.Broken && bench.MeetsSLO(guarded.Metrics, sc.SLO) != meets {
			t.Errorf("×%v: the guarded run's verdict differs", m)
		}
		if guarded.Broken {
			stopped++
		}
	}
	if stopped == 0 {
		t.Error("no overloaded run was stopped early")
	}
}

// Scaling the rate keeps the requests and divides their arrival times.
func TestScaleRateKeepsTheRequests(t *testing.T) {
	sc := scenariotest.Small(t)
	base, fast := requests(t, sc), requests(t, sc.ScaleRate(4))
	if len(base) != len(fast) {
		t.Fatalf("%d requests at ×1, %d at ×4", len(base), len(fast))
	}
	for i := range base {
		d := base[i].Arrival/4 - fast[i].Arrival
		if base[i].Prompt != fast[i].Prompt || base[i].OutputTokens != fast[i].OutputTokens || d > 1000 || d < -1000 {
			t.Fatalf("request %d differs: at %v and %v", i, base[i].Arrival, fast[i].Arrival)
		}
	}
}

func requests(t *testing.T, sc *scenario.Scenario) []*workload.Request {
	t.Helper()
	g, err := workload.New(sc, 1, sc.MaxContext())
	if err != nil {
		t.Fatal(err)
	}
	var out []*workload.Request
	for {
		if _, ok := g.Next(); !ok {
			return out
		}
		r := g.Pop()
		out = append(out, r)
		g.Finished(r, r.Arrival, true)
	}
}

func TestReportRatios(t *testing.T) {
	sc := scenariotest.Small(t)
	rep := NewReport(sc, []Result{
		{Policy: "round-robin", Seed: 1, Scale: 1}, {Policy: "least-request", Seed: 1, Scale: 2},
		{Policy: "igw", Seed: 1, Scale: 3}, {Policy: "igw", Seed: 2, Scale: 5}, {Policy: "oracle", Seed: 1, Scale: 8},
	})
	if BestPeer(rep.Summary) != "least-request" || rep.Summary["igw"].Scale != 4 {
		t.Fatalf("summary %+v", rep.Summary)
	}
	rows := rep.Rows([]string{"round-robin", "least-request", "igw", "oracle"})
	if got := rows[3]; got[0] != "igw" || got[3] != "0.50×" || got[4] != "2.00×" {
		t.Errorf("igw row %q", got)
	}
}

// The best peer is the best policy that is not igw's, in any configuration,
// nor the oracle; the precise peers count.
func TestBestPeerLeavesOutIGWConfigurations(t *testing.T) {
	summary := map[string]Summary{"oracle": {Scale: 9}, "igw": {Scale: 8}, "igw-precise": {Scale: 7},
		"dynamo-cost": {Scale: 2}, "llm-d-precise": {Scale: 3}}
	if got := BestPeer(summary); got != "llm-d-precise" {
		t.Fatalf("best peer %q, want llm-d-precise", got)
	}
}
