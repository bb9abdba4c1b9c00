package grid

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/capacity"
)

// capacityRun is one trace scenario's capacity search and load sweep.
type capacityRun struct {
	Report capacity.Report
	Sweep  capacity.Sweep
}

// runCapacity searches every policy's capacity under SLO on the grid's trace
// scenarios and sweeps the load around the oracle's capacity.
func (r *Result) runCapacity(ctx context.Context, b bench.Backend) error {
	o := r.Options
	start := time.Now()
	for _, sc := range o.Scenarios {
		if sc.Workload.Trace == nil {
			continue
		}
		var bar *bench.Progress
		if o.Progress != nil {
			bar = bench.NewProgress(o.Progress, sc.Name+" capacity", len(o.Policies)*o.Seeds.Count)
		}
		rep, err := capacity.Run(ctx, b, sc, capacity.Options{Policies: o.Policies, Seeds: o.Seeds, Parallel: r.Parallel, Progress: bar})
		if err != nil {
			return err
		}
		scales := make([]float64, len(capacity.SweepFractions))
		for i, f := range capacity.SweepFractions {
			scales[i] = f * capacity.ReferenceScale(rep.Summary)
		}
		if o.Progress != nil {
			bar = bench.NewProgress(o.Progress, sc.Name+" sweep", len(scales)*len(o.Policies)*o.Seeds.Count)
		}
		sw, err := capacity.RunSweep(ctx, b, sc, o.Policies, o.Seeds, scales, bench.RunOptions{Parallel: r.Parallel, Progress: bar})
		if err != nil {
			return err
		}
		r.Capacity = append(r.Capacity, capacityRun{Report: rep, Sweep: sw})
	}
	r.CapacityWall = time.Since(start)
	return nil
}

func sweepFile(scenario string) string { return "sweep-" + scenario + ".png" }

// writeCapacity saves each capacity report's JSON and sweep plot.
func (r *Result) writeCapacity() error {
	for _, c := range r.Capacity {
		if err := bench.WriteJSON(filepath.Join(r.Options.Out, "results", "capacity-"+c.Report.Scenario+".json"), c.Report); err != nil {
			return err
		}
		if err := c.Sweep.Plot(filepath.Join(r.Options.Out, sweepFile(c.Report.Scenario)), r.Options.Policies); err != nil {
			return err
		}
	}
	return nil
}

// capacityPage writes the headline section: capacity under SLO per trace
// scenario, then the load sweeps.
func (r *Result) capacityPage(w *strings.Builder) {
	if len(r.Capacity) == 0 {
		return
	}
	o := r.Options
	fmt.Fprintf(w, "## Capacity under SLO\n\n")
	fmt.Fprintf(w, "The largest multiplier of each trace scenario's arrival rate (same requests, arrival times divided by it) "+
		"at which P99 TTFT and P99 TPOT over the measured window meet the scenario's SLO with no failed request, "+
		"by bisection to 2%% (`igw-bench capacity`); median of seeds %v. req/s: counted requests per second offered "+
		"at that load. Peers: every policy but igw's (igw, igw-precise) and the oracle. Searches and sweeps took %v.\n\n",
		o.Seeds, r.CapacityWall.Round(time.Second))
	for _, c := range r.Capacity {
		sc := r.scenario(c.Report.Scenario)
		fmt.Fprintf(w, "### %s\n\n`%s`: %s.\n\n", c.Report.Scenario, r.file(sc), describe(sc))
		c.Report.Markdown(w, o.Policies)
		w.WriteString("\n")
	}
	w.WriteString("## Load sweeps\n\nEach policy at fractions of the oracle's capacity (" +
		strings.Trim(fmt.Sprint(capacity.SweepFractions), "[]") + "), whole runs, median over the seeds: " +
		"TTFT P50 / P99 in seconds, goodput in requests per second meeting the SLO.\n")
	for _, c := range r.Capacity {
		fmt.Fprintf(w, "\n### %s\n\n", c.Report.Scenario)
		c.Sweep.Markdown(w, o.Policies)
		fmt.Fprintf(w, "\n![%s load sweep](%s)\n", c.Report.Scenario, sweepFile(c.Report.Scenario))
	}
	w.WriteString("\n")
}
