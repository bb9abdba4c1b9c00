package capacity

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/plots"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/workload"
)

// SweepFractions are the loads of a sweep, as fractions of the reference
// capacity (ReferenceScale).
var SweepFractions = []float64{0.5, 0.8, 1, 1.2, 1.5}

// Sweep is every policy's figures at a few loads around capacity.
type Sweep struct {
	Scenario string
	// Scales are the rate multipliers served; Offered the counted requests
	// per second each offers over the measured window (seed 1).
	Scales  []float64
	Offered []float64
	// Metrics[policy][i] are the median metrics over seeds at Scales[i].
	Metrics map[string][]bench.Metrics
}

// ReferenceScale is the load a sweep centres on: the oracle's capacity, or
// the largest when the oracle was not searched.
func ReferenceScale(summary map[string]Summary) float64 {
	for _, name := range []string{policies.Oracle, policies.GlobalOracle} {
		if o, ok := summary[name]; ok && o.Scale > 0 {
			return o.Scale
		}
	}
	ref := 0.0
	for _, s := range summary {
		ref = max(ref, s.Scale)
	}
	return ref
}

// RunSweep serves sc with every policy and seed of seeds at each multiplier
// of scales, whole runs (no early stop: the figures are the point).
func RunSweep(ctx context.Context, b bench.Backend, sc *scenario.Scenario, names []string, seeds bench.Seeds, scales []float64, opts bench.RunOptions) (Sweep, error) {
	sw := Sweep{Scenario: sc.Name, Scales: scales, Metrics: map[string][]bench.Metrics{}}
	var jobs []bench.Job
	for _, m := range scales {
		scaled := sc.ScaleRate(m)
		if window := (scaled.Duration - scaled.Warmup).Seconds(); window > 0 {
			sw.Offered = append(sw.Offered, float64(workload.MaxCounted(scaled, 1))/window)
		} else {
			sw.Offered = append(sw.Offered, 0)
		}
		jobs = append(jobs, bench.Jobs(scaled, names, seeds)...)
	}
	outcomes, err := bench.RunJobs(ctx, b, jobs, opts)
	if err != nil {
		return sw, err
	}
	for i := range scales {
		summary := bench.Summarize(outcomes[i*len(names)*seeds.Count : (i+1)*len(names)*seeds.Count])
		for _, p := range names {
			sw.Metrics[p] = append(sw.Metrics[p], summary[p])
		}
	}
	return sw, nil
}

// Rows are the sweep's table: per load, each policy's P50 and P99 TTFT (s)
// and goodput (req/s).
func (s Sweep) Rows(order []string) [][]string {
	head := []string{"load (× rate)", "offered req/s"}
	for _, p := range order {
		if _, ok := s.Metrics[p]; ok {
			head = append(head, p+" TTFT p50 / p99 (s), goodput")
		}
	}
	rows := [][]string{head}
	for i, m := range s.Scales {
		row := []string{fmt.Sprintf("%.3g", m), fmt.Sprintf("%.2f", s.Offered[i])}
		for _, p := range order {
			if ms, ok := s.Metrics[p]; ok {
				row = append(row, fmt.Sprintf("%s / %s, %.2f", short(ms[i].TTFTP50), short(ms[i].TTFTP99), ms[i].Goodput))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func short(seconds float64) string {
	if seconds >= 10 {
		return fmt.Sprintf("%.0f", seconds)
	}
	return fmt.Sprintf("%.2f", seconds)
}

// Markdown writes the sweep's table as Markdown.
func (s Sweep) Markdown(w io.Writer, order []string) {
	for i, row := range s.Rows(order) {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|---:|%s\n", strings.Repeat("---:|", len(row)-1))
		}
	}
}

// Plot draws the sweep into path: TTFT P50 and P99 and goodput against the
// offered load, one line per policy.
func (s Sweep) Plot(path string, order []string) error {
	var lines []plots.LoadSeries
	for _, p := range order {
		ms, ok := s.Metrics[p]
		if !ok {
			continue
		}
		l := plots.LoadSeries{Policy: p, Load: s.Offered}
		for _, m := range ms {
			l.P50 = append(l.P50, m.TTFTP50)
			l.P99 = append(l.P99, m.TTFTP99)
			l.Goodput = append(l.Goodput, m.Goodput)
		}
		lines = append(lines, l)
	}
	return plots.LoadSweep(path, s.Scenario+": TTFT and goodput against offered load", lines)
}
