package bench

import (
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

func s(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }

// A hand-made trace whose every figure can be worked out on paper.
func TestComputeOnHandMadeTrace(t *testing.T) {
	sc := &scenario.Scenario{Warmup: s(10), SLO: scenario.SLO{TTFT: s(1), TPOT: s(0.05)}}
	tr := &Trace{
		Records: []Record{
			// Warmup: ignored whatever it did.
			{ID: 1, Arrival: s(5), FirstToken: s(50), Finish: s(60), OutputTokens: 1000, Done: true},
			// TTFT 0.5 s, TPOT (12.5-10.5)/(101-1) = 0.02 s: inside both SLOs.
			{ID: 2, Arrival: s(10), FirstToken: s(10.5), Finish: s(12.5), OutputTokens: 101, Counted: true, Done: true},
			// TTFT 2 s: misses the TTFT SLO.
			{ID: 3, Arrival: s(11), FirstToken: s(13), Finish: s(14), OutputTokens: 11, Counted: true, Done: true},
			// One token: no TPOT; TTFT 0.25 s: good.
			{ID: 4, Arrival: s(12), FirstToken: s(12.25), Finish: s(12.25), OutputTokens: 1, Counted: true, Done: true},
			// TTFT 1 s (at the SLO: good), TPOT (30-13)/(101-1)=0.17 s: misses TPOT; last finish at 30 s.
			{ID: 5, Arrival: s(12), FirstToken: s(13), Finish: s(30), OutputTokens: 101, Counted: true, Done: true},
			{ID: 6, Arrival: s(15), Finish: s(15), Counted: true, Failed: true, Done: true},
			{ID: 7, Arrival: s(16), Counted: true}, // never ended: failed
		},
		Fleet: FleetCounters{PrefixQueries: 1000, PrefixHits: 250, LoRALoads: 3},
	}
	m, ttfts := Compute(tr, sc)
	if m.Completed != 4 || m.Failed != 2 {
		t.Fatalf("completed %v failed %v", m.Completed, m.Failed)
	}
	if !slices.Equal(ttfts, []float64{0.25, 0.5, 1, 2}) {
		t.Fatalf("ttfts %v", ttfts)
	}
	// Nearest rank over 4 values: p50 is the 2nd, p95 and p99 the 4th.
	if m.TTFTP50 != 0.5 || m.TTFTP95 != 2 || m.TTFTP99 != 2 {
		t.Fatalf("ttft percentiles %v %v %v", m.TTFTP50, m.TTFTP95, m.TTFTP99)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// TPOTs: 0.02, 0.1 (request 3: (14-13)/10), 0.17.
	if !near(m.TPOTP50, 0.1) || !near(m.TPOTP99, 0.17) {
		t.Fatalf("tpot %v %v", m.TPOTP50, m.TPOTP99)
	}
	if !near(m.E2EP99, 18) {
		t.Fatalf("e2e p99 %v", m.E2EP99)
	}
	// Output: warmup end (10 s) to the last counted finish (30 s); goodput:
	// warmup end to the last counted arrival (16 s).
	if !near(m.OutputTokPerS, (101+11+1+101)/20.0) || !near(m.Goodput, 2/6.0) {
		t.Fatalf("throughput %v goodput %v", m.OutputTokPerS, m.Goodput)
	}
	if m.PrefixHitRate != 0.25 || m.LoRALoads != 3 {
		t.Fatalf("fleet %v %v", m.PrefixHitRate, m.LoRALoads)
	}
	// Missed: the counted requests goodput leaves out (3 and 5 past an
	// SLO, 6 failed, 7 never ended), not the warmup's.
	if n := Missed(tr, sc); n != 4 {
		t.Fatalf("missed %d, want 4", n)
	}
}

// The min pod share is in units of an equal share of the fleet, leaves out
// warmup requests and pods with a scheduled fault (but for lost KV events,
// which leave a pod serving as before), and is 0 for a pod that served
// nothing.
func TestMinPodShare(t *testing.T) {
	sc := &scenario.Scenario{Fleet: []scenario.Group{{Name: "fast", Replicas: 2}, {Name: "slow", Replicas: 2}},
		Faults: []scenario.Fault{{Group: "fast", Replica: 1, Kind: "fail-fast"}, {Group: "slow", Replica: 1, Kind: "events-lost"}}}
	tr := &Trace{}
	route := func(pod, n int, counted bool) {
		for range n {
			tr.Records = append(tr.Records, Record{ID: uint64(len(tr.Records)), Pod: pod, Counted: counted})
		}
	}
	// 40 counted requests over 4 pods: an equal share is 10.
	route(0, 24, true)
	route(1, 1, true) // faulted: left out, though it holds the least
	route(2, 12, true)
	route(3, 3, true)
	route(3, 50, false) // warmup
	if m, _ := Compute(tr, sc); math.Abs(m.MinPodShare-0.3) > 1e-9 {
		t.Fatalf("min pod share %v, want 3/10", m.MinPodShare)
	}
	tr.Records = tr.Records[:len(tr.Records)-50-3] // pod 3 served nothing
	if m, _ := Compute(tr, sc); m.MinPodShare != 0 {
		t.Fatalf("min pod share %v for an idle pod, want 0", m.MinPodShare)
	}
}

func TestPercentileAndMedian(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Percentile(xs, 50) != 5 || Percentile(xs, 95) != 10 || Percentile(xs, 10) != 1 || Percentile(nil, 50) != 0 {
		t.Fatal("nearest-rank percentiles")
	}
	if Median([]float64{3, 1, 2}) != 2 || Median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Fatal("median")
	}
	got := MedianMetrics([]Metrics{{TTFTP99: 3, Completed: 10}, {TTFTP99: 1, Completed: 30}, {TTFTP99: 2, Completed: 20}})
	if got.TTFTP99 != 2 || got.Completed != 20 {
		t.Fatalf("median metrics %+v", got)
	}
}

// Every metric is a column, once: tables show it and MedianMetrics takes its
// median.
func TestColumnsCoverEveryMetric(t *testing.T) {
	var m Metrics
	seen := map[*float64]bool{}
	for _, c := range Columns {
		if p := c.Field(&m); seen[p] {
			t.Errorf("column %q shows a metric another column shows", c.Header)
		} else {
			seen[p] = true
		}
	}
	// FailedByCode is a map beside the columns: it splits the failed column.
	if n := reflect.TypeFor[Metrics]().NumField() - 1; len(seen) != n {
		t.Fatalf("%d columns for %d numeric metrics", len(seen), n)
	}
	runs := make([]Metrics, 3)
	for k := range runs {
		for j, c := range Columns {
			*c.Field(&runs[k]) = float64((2-k)*100 + j) // run 1 holds every median
		}
	}
	got := MedianMetrics(runs)
	for _, c := range Columns {
		if c.Value(&got) != c.Value(&runs[1]) {
			t.Errorf("median of %q = %v, want %v", c.Header, c.Value(&got), c.Value(&runs[1]))
		}
	}
}

// The report's JSON carries exactly the benchmark contract's keys.
func TestReportJSONShape(t *testing.T) {
	rep := NewReport("x", "des", []Outcome{{Job: Job{Policy: "igw", Seed: 1}}, {Job: Job{Policy: "igw", Seed: 2}}})
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(obj); !slices.Equal(got, []string{"mode", "results", "scenario", "summary"}) {
		t.Fatalf("top-level keys %v", got)
	}
	var results []map[string]any
	var summary map[string]map[string]any
	_ = json.Unmarshal(obj["results"], &results)
	_ = json.Unmarshal(obj["summary"], &summary)
	metricKeys := []string{"completed", "e2e_p99_s", "failed", "failed_by_code", "goodput", "lora_loads", "min_pod_share", "output_tok_per_s",
		"prefix_hit_rate", "tpot_p50_s", "tpot_p99_s", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s"}
	if len(results) != 2 || !slices.Equal(sortedKeys(results[0]), sortedKeys(withKeys(metricKeys, "policy", "seed"))) {
		t.Fatalf("result keys %v", sortedKeys(results[0]))
	}
	if !slices.Equal(sortedKeys(summary["igw"]), metricKeys) {
		t.Fatalf("summary keys %v", sortedKeys(summary["igw"]))
	}
}

// failed_by_code counts each failure under its code, a request still waiting
// at the end as a client timeout, and takes medians per code over seeds.
func TestFailedByCode(t *testing.T) {
	sc := &scenario.Scenario{Warmup: 0}
	tr := &Trace{Records: []Record{
		{Counted: true, Done: true, Failed: true, Code: 500},
		{Counted: true, Done: true, Failed: true, Code: 500},
		{Counted: true, Done: true, Failed: true, Code: 429},
		{Counted: true}, // never answered
		{Counted: false, Done: true, Failed: true, Code: 503},
	}}
	m, _ := Compute(tr, sc)
	want := FailedByCode{"500": 2, "429": 1, "599": 1}
	if m.Failed != 4 || !maps.Equal(m.FailedByCode, want) {
		t.Fatalf("failed %v by code %v, want 4 %v", m.Failed, m.FailedByCode, want)
	}
	med := MedianMetrics([]Metrics{m, {FailedByCode: FailedByCode{"500": 10}}, {FailedByCode: FailedByCode{"500": 1, "429": 3}}})
	if want := (FailedByCode{"500": 2, "429": 1, "599": 0}); !maps.Equal(med.FailedByCode, want) {
		t.Errorf("medians %v, want %v", med.FailedByCode, want)
	}
}

func withKeys(keys []string, more ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range append(slices.Clone(keys), more...) {
		m[k] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestTableListsPoliciesInOrder(t *testing.T) {
	var sb strings.Builder
	summary := map[string]Metrics{"igw": {TTFTP99: 0.5}, "round-robin": {TTFTP99: 120}}
	if err := WriteTable(&sb, "title", summary, []string{"round-robin", "igw", "missing"}); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	if !strings.Contains(out, "TTFT p99 (s)") || strings.Index(out, "round-robin") > strings.Index(out, "igw") || strings.Contains(out, "missing") {
		t.Fatalf("table:\n%s", out)
	}
}
