package scenario

import (
	"strings"
	"testing"
	"time"
)

// A window replays the same length of the trace from later on, named after
// its start; the scenario it came from keeps its own requests.
func TestTraceWindow(t *testing.T) {
	s, err := traceScenario(t, "  trace: {file: mini.jsonl, format: mooncake, rateScale: 2, start: 500ms, duration: 2s}\n")
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.TraceWindow(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr := w.Workload.Trace
	// [1.5 s, 3.5 s) holds the arrival at 1.5 s only, at 0 in the run.
	if w.Name != "s-from-1.5s" || tr.Start != 1500*time.Millisecond || len(tr.Records) != 1 || tr.Arrival(&tr.Records[0]) != 0 ||
		w.Duration != time.Second || w.Warmup != s.Warmup || w.SLO != s.SLO {
		t.Errorf("window: %s from %v, %d records, duration %v, warmup %v", w.Name, tr.Start, len(tr.Records), w.Duration, w.Warmup)
	}
	if len(s.Workload.Trace.Records) != 2 || s.Workload.Trace.Start != 500*time.Millisecond {
		t.Errorf("the scenario's own window changed: %d records from %v", len(s.Workload.Trace.Records), s.Workload.Trace.Start)
	}
	for _, c := range []struct {
		workload string
		offset   time.Duration
		want     string
	}{
		{"  trace: {file: mini.jsonl, format: mooncake, duration: 2s}\n", 5 * time.Second, "no request in the window start 5s"},
		{"  trace: {file: mini.jsonl, format: mooncake}\n", time.Second, "windows need workload.trace.duration"},
		{"  trace: {file: mini.jsonl, format: mooncake, duration: 2s}\n", -time.Second, "must not be negative"},
		{"  arrival: {type: poisson, rate: 1}\n  input: {dist: fixed, value: 10}\n  output: {dist: fixed, value: 10}\nduration: 1s\n", time.Second, "windows need a trace scenario"},
	} {
		s, err := traceScenario(t, c.workload)
		if err != nil {
			t.Fatalf("%q: %v", c.workload, err)
		}
		if _, err := s.TraceWindow(c.offset); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q from %v: error %v, want one containing %q", c.workload, c.offset, err, c.want)
		}
	}
}
