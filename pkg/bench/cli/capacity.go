package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/capacity"
	"github.com/igw-dev/igw/pkg/bench/plots"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

func runCapacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := commonFlags("capacity", stderr, "")
	sf := registerScenarioFlags(fs)
	windows := fs.Int("windows", 0, "search the capacity on this many windows of the trace instead, each --window-every later than the last, "+
		"and compare every policy with igw over them")
	every := fs.Duration("window-every", 0, "how much later each window starts, in trace time (0: the scenario's trace duration, windows end to end)")
	loads := fs.Float64Slice("window-loads", nil, "with --windows: also run every policy on the first seed of each window at these fractions of its "+
		"oracle's capacity (the largest capacity without the oracle), e.g. 0.85,0.95, and count the requests each failed or served past either SLO")
	fs.Lookup("format").Usage = "json, table or (with --windows) markdown"
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *windows < 0 || *every < 0:
		return usageErrorf("--windows and --window-every must not be negative")
	case *sf.format == "markdown" && *windows == 0:
		return usageErrorf("--format markdown applies to --windows only")
	case len(*loads) > 0 && *windows == 0:
		return usageErrorf("--window-loads applies to --windows only")
	}
	for _, f := range *loads {
		if !(f > 0 && f <= capacity.MaxScale) {
			return usageErrorf("--window-loads: %v is not a fraction of a capacity (above 0, at most %v)", f, capacity.MaxScale)
		}
	}
	// Markdown is a section for a page of windows.
	if err := sf.check("capacity", "markdown"); err != nil {
		return err
	}
	sc, b, names, err := c.loadScenario(fs, *sf.file, stderr)
	if err != nil {
		return err
	}
	if *windows > 0 {
		return runWindows(ctx, c, b, names, *sf.file, *sf.format, *windows, *every, *loads, stdout, stderr)
	}
	rep, err := capacity.Run(ctx, b, sc, capacity.Options{Policies: names, Seeds: c.seedRange(), Parallel: c.parallel,
		Progress: bench.NewProgress(stderr, sc.Name+" capacity", len(names)*c.seeds)})
	if err != nil {
		return err
	}
	if c.out != "" {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return err
		}
		if err := bench.WriteJSON(filepath.Join(c.out, "capacity-"+sc.Name+".json"), rep); err != nil {
			return err
		}
	}
	if *sf.format == "json" {
		return printJSON(stdout, rep)
	}
	return rep.WriteTable(stdout, fmt.Sprintf("%s: capacity under SLO (TTFT P99 ≤ %v, TPOT P99 ≤ %v; %s, median of seeds %v)",
		sc.Name, sc.SLO.TTFT, sc.SLO.TPOT, b.Mode(), c.seedRange()), names)
}

// runWindows is capacity --windows: n windows of the trace scenario in file,
// each cut to --duration like the scenario itself, every apart (0: the
// trace's duration), and each policy's misses at loads (fractions of each
// window's oracle capacity; none: no such runs). With --out it writes the
// report's JSON and a plot of each policy's capacity by window.
func runWindows(ctx context.Context, c *common, b bench.Backend, names []string, file, format string, n int, every time.Duration,
	loads []float64, stdout, stderr io.Writer) error {
	sc, err := scenario.Load(file)
	if err != nil {
		return err
	}
	if every == 0 && sc.Workload.Trace != nil {
		every = sc.Workload.Trace.Duration
	}
	windows := make([]*scenario.Scenario, n)
	for k := range windows {
		w, err := sc.TraceWindow(time.Duration(k) * every)
		if err != nil {
			return err
		}
		if err := Shorten(w, c.duration); err != nil {
			return err
		}
		windows[k] = w
	}
	rep, err := capacity.RunWindows(ctx, b, sc.Name, every, windows, capacity.Options{Policies: names, Seeds: c.seedRange(),
		Parallel: c.parallel, Progress: bench.NewProgress(stderr, fmt.Sprintf("%s capacity on %d windows", sc.Name, n), n*len(names)*c.seeds)},
		capacity.WindowLoads{Loads: loads, Progress: stderr, Label: fmt.Sprintf("%s misses below capacity on %d windows", sc.Name, n)})
	if err != nil {
		return err
	}
	if c.out != "" {
		if err := writeWindows(c.out, rep, names); err != nil {
			return err
		}
	}
	what := windowsTitle(sc, rep, n, b.Mode(), c.seedRange())
	switch format {
	case "json":
		return printJSON(stdout, rep)
	case "markdown":
		fmt.Fprintf(stdout, "## %s\n\n`%s`: %s.\n\n", sc.Name, filepath.ToSlash(file), what)
		rep.Markdown(stdout, names)
		fmt.Fprintf(stdout, "\n![%s capacity by window](capacity-windows-%s.png)\n\n", sc.Name, sc.Name)
		return nil
	}
	return rep.WriteTable(stdout, sc.Name+": "+what, names)
}

// windowsTitle says what the windows table holds.
func windowsTitle(sc *scenario.Scenario, rep capacity.Windows, n int, mode string, seeds bench.Seeds) string {
	return fmt.Sprintf("capacity under SLO (× each window's rate; TTFT P99 ≤ %v, TPOT P99 ≤ %v) on %d windows of %v of the trace, "+
		"every %vs; %s, median of seeds %v", sc.SLO.TTFT, sc.SLO.TPOT, n, sc.Workload.Trace.Duration, rep.Every, mode, seeds)
}

// writeWindows writes capacity-windows-NAME.json and .png into dir.
func writeWindows(dir string, rep capacity.Windows, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, "capacity-windows-"+rep.Scenario)
	if err := bench.WriteJSON(base+".json", rep); err != nil {
		return err
	}
	starts := make([]float64, len(rep.Windows))
	for k, w := range rep.Windows {
		starts[k] = w.Start
	}
	var series []plots.Series
	for _, p := range names {
		s := plots.Series{Policy: p}
		for _, w := range rep.Windows {
			// A capacity of 0 is drawn at the search's lower bound: the axis is logarithmic.
			s.Values = append(s.Values, max(w.Summary[p].Scale, capacity.MinScale))
		}
		series = append(series, s)
	}
	return plots.CapacityByWindow(base+".png", rep.Scenario+": capacity under SLO by window", starts, series)
}
