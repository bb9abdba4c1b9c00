package capacity

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// windowReport is a window's report with the given capacities by policy.
func windowReport(start float64, scales map[string]float64) WindowReport {
	r := WindowReport{Start: start, Report: Report{Summary: map[string]Summary{}}}
	for p, s := range scales {
		r.Summary[p] = Summary{Scale: s}
	}
	return r
}

// Each policy is summarised against the reference: the geometric mean of its
// ratios (a capacity of 0 counted as the search's lower bound), and the
// windows it holds more or less than the reference, ties in neither.
func TestWindowsSummary(t *testing.T) {
	w := NewWindows("s", 150*time.Second, "igw", []WindowReport{
		windowReport(0, map[string]float64{"igw": 1, "peer": 2, "oracle": 1}),
		windowReport(150, map[string]float64{"igw": 2, "peer": 1, "oracle": 2}),
		windowReport(300, map[string]float64{"igw": 1, "peer": 1, "oracle": 0}),
	})
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if s := w.Summary["igw"]; !near(s.GeoMeanRatio, 1) || s.Above != 0 || s.Below != 0 {
		t.Errorf("reference: %+v", s)
	}
	if s := w.Summary["peer"]; !near(s.GeoMeanRatio, 1) || s.Above != 1 || s.Below != 1 {
		t.Errorf("peer: %+v, want ratio 1 (2 × 0.5 × 1), 1 above and 1 below", s)
	}
	if s := w.Summary["oracle"]; !near(s.GeoMeanRatio, math.Cbrt(MinScale)) || s.Above != 0 || s.Below != 1 {
		t.Errorf("oracle: %+v, want ratio ∛(1/64), 1 below", s)
	}
	var b strings.Builder
	if err := w.WriteTable(&b, "", []string{"igw", "peer", "oracle", "absent"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"window from     igw    peer  oracle", "150s       2       1       2", "vs igw (geometric mean)  1.000×  1.000×  0.250×",
		"windows above / below igw   0 / 0   1 / 1   0 / 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if reference([]string{"least-request", "oracle"}) != "least-request" || reference([]string{"oracle", "igw"}) != "igw" {
		t.Error("the reference is igw when it runs, else the first policy")
	}
}

// Misses below capacity add up over every window's loads, each policy's
// against the same counted requests, into a row of the table; without
// loads there is no such row.
func TestWindowsMissesBelowCapacity(t *testing.T) {
	a := windowReport(0, map[string]float64{"igw": 1, "oracle": 1})
	a.Loads = []WindowLoad{{Load: 0.9, Scale: 0.9, Counted: 100, Missed: map[string]int{"igw": 3, "oracle": 1}}}
	b := windowReport(150, map[string]float64{"igw": 2, "oracle": 2})
	b.Loads = []WindowLoad{{Load: 0.9, Scale: 1.8, Counted: 300, Missed: map[string]int{"igw": 5, "oracle": 0}}}
	w := NewWindows("s", 150*time.Second, "igw", []WindowReport{a, b})
	if !slices.Equal(w.Loads, []float64{0.9}) {
		t.Errorf("loads %v, want the windows' [0.9]", w.Loads)
	}
	if s := w.Summary["igw"]; s.Missed != 8 || s.Counted != 400 {
		t.Errorf("igw: %+v, want 8 missed of 400", s)
	}
	if s := w.Summary["oracle"]; s.Missed != 1 || s.Counted != 400 {
		t.Errorf("oracle: %+v, want 1 missed of 400", s)
	}
	var out strings.Builder
	if err := w.WriteTable(&out, "", []string{"igw", "oracle"}); err != nil {
		t.Fatal(err)
	}
	if want := "missed at 0.9× the oracle's capacity  8 (2.0%)  1 (0.2%)"; !strings.Contains(out.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	a.Loads, b.Loads = nil, nil
	w = NewWindows("s", 150*time.Second, "igw", []WindowReport{a, b})
	if err := w.WriteTable(&out, "", []string{"igw", "oracle"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "missed at") {
		t.Errorf("a row of misses without loads:\n%s", out.String())
	}
}
