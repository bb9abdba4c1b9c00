package cli

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/live"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// demoScenario is the demo's fleet and workload.
//
//go:embed demo.yaml
var demoScenario []byte

// demoSpeedup runs the demo's simulated GPUs twice as fast as real ones: the
// whole demo takes about a minute, and what the machine adds per request
// (a few milliseconds, doubled) stays small beside the gap it shows.
const demoSpeedup = 2

// demoPolicies are compared in this order: the baseline, then igw.
var demoPolicies = []string{policies.RoundRobin, policies.IGW}

// runDemo serves one workload live through round-robin and then igw, prints
// them side by side and writes the results and a TTFT plot.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := subcommand("demo", stderr)
	out := fs.String("out", filepath.Join(os.TempDir(), "igw-demo"), "directory for the results (JSON) and the TTFT plot (PNG)")
	duration := fs.Duration("duration", 0, "shorten the workload to this much arrival time (warmup scaled alike)")
	speedup := fs.Float64("speedup", demoSpeedup, "run the simulated GPUs this many times faster than real ones (0: as fast as the machine keeps up with, at most real time)")
	file := fs.String("scenario", "", "scenario file to demo instead of the built-in fleet")
	if err := parse(fs, args); err != nil {
		return err
	}
	b := &live.Backend{Speedup: *speedup, Log: stderr}
	if err := b.Validate(); err != nil {
		return usageErrorf("--speedup: %w", err)
	}
	sc, err := demoScenarioFrom(*file, *duration)
	if err != nil {
		return err
	}
	speed := fmt.Sprintf("GPUs at %g× speed", *speedup)
	if *speedup == 0 {
		speed = "GPU speed chosen for the machine"
	}
	fmt.Fprintf(stderr, "igw demo: %s\nserving it live (simulators and the standalone gateway on loopback, %s) through %s\n",
		describeWorkload(sc), speed, strings.Join(demoPolicies, ", then "))
	start := time.Now()
	fmt.Fprintln(stderr, "building modelsim and igw-bench-gateway (cached after the first time) ...")
	if err := b.Prepare(); err != nil {
		return err
	}
	jobs := bench.Jobs(sc, demoPolicies, bench.FirstN(1))
	outcomes, err := bench.RunJobs(ctx, b, jobs, bench.RunOptions{Parallel: 1,
		Progress: bench.NewProgress(stderr, "demo", len(jobs))})
	if err != nil {
		return err
	}
	rep := bench.NewReport(sc.Name, b.Mode(), outcomes)
	if err := writeRun(*out, rep, outcomes, demoPolicies); err != nil {
		return err
	}
	if err := writeSideBySide(stdout, rep.Summary, demoPolicies[0], demoPolicies[1]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nTTFT plot: %s\nresults:   %s\n(%v; latencies in GPU time, the requests of %s)\n",
		filepath.Join(*out, "ttft-cdf-"+rep.Scenario+".png"), filepath.Join(*out, rep.Scenario+".json"),
		time.Since(start).Round(time.Second), scenarioName(sc))
	return nil
}

// demoScenarioFrom is the built-in demo, or file's scenario, cut to d of arrivals.
func demoScenarioFrom(file string, d time.Duration) (*scenario.Scenario, error) {
	if file != "" {
		return loadShortened(file, d)
	}
	sc, err := scenario.Parse(demoScenario, "demo.yaml (built in)")
	if err != nil {
		return nil, err
	}
	if err := Shorten(sc, d); err != nil {
		return nil, err
	}
	return sc, nil
}

func scenarioName(sc *scenario.Scenario) string {
	if sc.File != "" {
		return sc.File
	}
	return sc.Name
}

// describeWorkload says in one line what the scenario serves.
func describeWorkload(sc *scenario.Scenario) string {
	var fleet []string
	for _, g := range sc.Fleet {
		fleet = append(fleet, fmt.Sprintf("%d× %s", g.Replicas, g.GPU))
	}
	w := sc.Workload
	var extras []string
	if sp := w.SharedPrefix; sp != nil {
		extras = append(extras, fmt.Sprintf("%d shared system prompts", sp.Groups))
	}
	if l := w.LoRA; l != nil && l.Fraction > 0 {
		extras = append(extras, fmt.Sprintf("%d LoRA adapters", l.Adapters))
	}
	line := fmt.Sprintf("%s serving %s, %g requests/s for %v", strings.Join(fleet, " + "), sc.Model(), w.Arrival.Rate, sc.Duration)
	if len(extras) > 0 {
		line += " with " + strings.Join(extras, " and ")
	}
	return line
}

// writeSideBySide prints every metric of base and other in two columns with
// other's change against base.
func writeSideBySide(w io.Writer, summary map[string]bench.Metrics, base, other string) error {
	b, o := summary[base], summary[other]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\t%s vs %s\t\n", base, other, other, base)
	for _, c := range bench.Columns {
		bv, ov := c.Value(&b), c.Value(&o)
		change := ""
		if bv != 0 {
			change = percentChange(ov/bv - 1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", c.Header, c.Format(bv), c.Format(ov), change)
	}
	return tw.Flush()
}

// percentChange shows a relative change in whole percents, with a decimal
// where rounding would say -100% (TTFTs that shrink by 99.6% still exist).
func percentChange(r float64) string {
	if math.Abs(r) >= 0.995 && math.Abs(r) < 1 {
		return fmt.Sprintf("%+.1f%%", 100*r)
	}
	return fmt.Sprintf("%+.0f%%", 100*r)
}
