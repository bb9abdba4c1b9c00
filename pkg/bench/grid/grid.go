// Package grid runs the public scenario grid (every scenario × policy × seed
// in one pool of workers) and writes the benchmark page: docs/benchmarks/
// README.md with one table per scenario, ratios against round-robin and
// least-request, igw's distance to the oracle, the published claims checked,
// and the PNG plots beside it.
package grid

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/plots"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// Options say what to run and where to write.
type Options struct {
	Scenarios []*scenario.Scenario
	// Dir is the directory the scenario files are from, for the page.
	Dir      string
	Policies []string
	Seeds    bench.Seeds
	Parallel int
	Out      string
	// Command is the command line to print on the page.
	Command string
	// Progress is where the progress bar goes (nil: none).
	Progress io.Writer
	// Capacity adds, first on the page, each trace scenario's capacity under
	// SLO and a load sweep around it.
	Capacity bool
}

// Result is a finished grid.
type Result struct {
	Options  Options
	Mode     string
	Reports  []bench.Report // in scenario order
	TTFTs    map[string]map[string][]float64
	Wall     time.Duration
	Parallel int
	// Capacity holds the trace scenarios' searches and sweeps (Options.Capacity).
	Capacity     []capacityRun
	CapacityWall time.Duration
	// Runs counts the grid's runs; Outages are the multi-cluster scenarios'
	// outage reports (every global policy and seed).
	Runs    int
	Outages map[string][]bench.OutageReport
}

// PoliciesFor are the policies a scenario runs of all: the global ones for a
// multi-cluster scenario (all of them when all names none), the others for
// a single fleet.
func PoliciesFor(sc *scenario.Scenario, all []string) []string {
	var global, single []string
	for _, p := range all {
		if policies.IsGlobal(p) {
			global = append(global, p)
		} else {
			single = append(single, p)
		}
	}
	if !sc.MultiCluster() {
		return single
	}
	if len(global) == 0 {
		return policies.GlobalNames
	}
	return global
}

// Run runs the grid on b and writes its page into opts.Out.
func Run(ctx context.Context, b bench.Backend, opts Options) (*Result, error) {
	var jobs []bench.Job
	for _, sc := range opts.Scenarios {
		jobs = append(jobs, bench.Jobs(sc, PoliciesFor(sc, opts.Policies), opts.Seeds)...)
	}
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	var bar *bench.Progress
	if opts.Progress != nil {
		bar = bench.NewProgress(opts.Progress, "grid", len(jobs))
	}
	start := time.Now()
	outageTraces := func(j bench.Job) bool { return len(j.Scenario.Outages) > 0 && policies.IsGlobal(j.Policy) }
	outcomes, err := bench.RunJobs(ctx, b, jobs, bench.RunOptions{Parallel: parallel, Progress: bar, KeepTrace: outageTraces})
	if err != nil {
		return nil, err
	}
	res := &Result{Options: opts, Mode: b.Mode(), Wall: time.Since(start), Parallel: parallel,
		TTFTs: map[string]map[string][]float64{}, Runs: len(jobs), Outages: map[string][]bench.OutageReport{}}
	for i := range outcomes {
		if o := &outcomes[i]; o.Trace != nil {
			res.Outages[o.Scenario.Name] = append(res.Outages[o.Scenario.Name], bench.Outages(*o, o.Scenario)...)
			o.Trace = nil // the grid keeps the reports, not every request
		}
	}
	for _, sc := range opts.Scenarios {
		var mine []bench.Outcome
		ttfts := map[string][]float64{}
		for _, o := range outcomes {
			if o.Scenario == sc {
				mine = append(mine, o)
				ttfts[o.Policy] = append(ttfts[o.Policy], o.TTFTs...)
			}
		}
		for p := range ttfts {
			slices.Sort(ttfts[p])
		}
		res.Reports = append(res.Reports, bench.NewReport(sc.Name, b.Mode(), mine))
		res.TTFTs[sc.Name] = ttfts
	}
	if opts.Capacity {
		if err := res.runCapacity(ctx, b); err != nil {
			return nil, err
		}
	}
	return res, res.write()
}

func (r *Result) write() error {
	out := r.Options.Out
	if err := os.MkdirAll(filepath.Join(out, "results"), 0o755); err != nil {
		return err
	}
	var names []string
	p99 := make([]plots.Series, len(r.Options.Policies))
	for i, p := range r.Options.Policies {
		p99[i].Policy = p
	}
	for _, rep := range r.Reports {
		if err := bench.WriteJSON(filepath.Join(out, "results", rep.Scenario+".json"), rep); err != nil {
			return err
		}
		sc := r.scenario(rep.Scenario)
		var series []plots.Series
		for _, p := range PoliciesFor(sc, r.Options.Policies) {
			series = append(series, plots.Series{Policy: p, Values: r.TTFTs[rep.Scenario][p]})
		}
		if reps := r.Outages[rep.Scenario]; len(reps) > 0 {
			if err := writeOutage(out, sc, reps); err != nil {
				return err
			}
		}
		if !sc.MultiCluster() { // the P99 plot compares the single-cluster policies
			names = append(names, rep.Scenario)
			for i, p := range r.Options.Policies {
				p99[i].Values = append(p99[i].Values, rep.Summary[p].TTFTP99)
			}
		}
		title := fmt.Sprintf("%s: TTFT distribution, seeds %v pooled (%s)", rep.Scenario, r.Options.Seeds, r.Mode)
		if err := plots.TTFTCDF(filepath.Join(out, cdfFile(rep.Scenario)), title, series); err != nil {
			return err
		}
	}
	if err := plots.P99ByScenario(filepath.Join(out, "p99-by-scenario.png"),
		fmt.Sprintf("P99 TTFT by scenario (median of seeds %v, %s)", r.Options.Seeds, r.Mode), names, p99); err != nil {
		return err
	}
	if err := r.writeCapacity(); err != nil {
		return err
	}
	var sb strings.Builder
	r.page(&sb)
	return os.WriteFile(filepath.Join(out, "README.md"), []byte(sb.String()), 0o644)
}

func cdfFile(scenario string) string { return "ttft-cdf-" + scenario + ".png" }

// Claim is a published result igw must beat on a scenario shape.
type Claim struct {
	Scenario string
	What     string
	// Metric is the column compared; Target the relative change vs the baseline
	// to reach (−0.98: 98% lower; +0.5: 50% higher).
	Metric   func(*bench.Metrics) float64
	Target   float64
	Baseline string
	// HigherIsBetter is true for throughput.
	HigherIsBetter bool
}

func ttftP95(m *bench.Metrics) float64    { return m.TTFTP95 }
func ttftP99(m *bench.Metrics) float64    { return m.TTFTP99 }
func ttftP50(m *bench.Metrics) float64    { return m.TTFTP50 }
func throughput(m *bench.Metrics) float64 { return m.OutputTokPerS }

// Claims are the project's published claims, each against round-robin, and the
// uniform control against least-request (no worse: change ≤ 0).
var Claims = []Claim{
	{"mixed-gpu", "P95 TTFT −98% vs round-robin", ttftP95, -0.98, policies.RoundRobin, false},
	{"mixed-gpu", "P99 TTFT −97% vs round-robin", ttftP99, -0.97, policies.RoundRobin, false},
	{"mixed-gpu", "output throughput +50% vs round-robin", throughput, 0.5, policies.RoundRobin, true},
	{"bursty", "P99 TTFT −98% vs round-robin", ttftP99, -0.98, policies.RoundRobin, false},
	{"shared-prefix", "P95 TTFT −26% vs round-robin", ttftP95, -0.26, policies.RoundRobin, false},
	{"shared-prefix", "P99 TTFT −43% vs round-robin", ttftP99, -0.43, policies.RoundRobin, false},
	{"uniform-steady", "P50 TTFT no worse than least-request", ttftP50, 0, policies.LeastRequest, false},
	{"uniform-steady", "P95 TTFT no worse than least-request", ttftP95, 0, policies.LeastRequest, false},
	{"uniform-steady", "P99 TTFT no worse than least-request", ttftP99, 0, policies.LeastRequest, false},
	{"uniform-steady", "output throughput no worse than least-request", throughput, 0, policies.LeastRequest, true},
}

// Check evaluates a claim on a summary: the change achieved and whether it
// meets the target (ok is false when a policy is missing).
func (c Claim) Check(summary map[string]bench.Metrics) (change float64, met, ok bool) {
	igw, ok1 := summary[policies.IGW]
	base, ok2 := summary[c.Baseline]
	if !ok1 || !ok2 || c.Metric(&base) == 0 {
		return 0, false, false
	}
	change = c.Metric(&igw)/c.Metric(&base) - 1
	if c.HigherIsBetter {
		return change, change >= c.Target, true
	}
	return change, change <= c.Target, true
}

func percent(change float64) string {
	s := fmt.Sprintf("%+.1f%%", change*100)
	return strings.Replace(s, "-", "−", 1)
}

func (r *Result) page(w *strings.Builder) {
	o := r.Options
	fmt.Fprintf(w, "# igw benchmarks (%s mode)\n\n", r.Mode)
	fmt.Fprintf(w, "Generated by `%s` — do not edit by hand (except `notes.md`, included below).\n\n", o.Command)
	fmt.Fprintf(w, "- Scenarios: every file in `%s/` (schema: `bench/scenarios/README.md`).\n", o.Dir)
	fmt.Fprintf(w, "- Policies: %s.\n", strings.Join(o.Policies, ", "))
	fmt.Fprintf(w, "- Seeds: %s; every figure is the median over the seeds.\n", o.Seeds.Comma())
	fmt.Fprintf(w, "- Wall time: %v for %d runs, %d in parallel on %d CPUs (%s, %s).\n\n",
		r.Wall.Round(time.Second), r.Runs, r.Parallel, runtime.NumCPU(), runtime.Version(), runtime.GOARCH)
	r.capacityPage(w)
	r.llmdPage(w)
	w.WriteString(methodology)

	w.WriteString("\n## Published claims\n\n| scenario | claim | igw achieved | met |\n|---|---|---|---|\n")
	for _, c := range Claims {
		rep := r.report(c.Scenario)
		if rep == nil {
			continue
		}
		change, met, ok := c.Check(rep.Summary)
		if !ok {
			continue
		}
		mark := "no"
		if met {
			mark = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Scenario, c.What, percent(change), mark)
	}
	w.WriteString("\n![P99 TTFT by scenario](p99-by-scenario.png)\n")

	if notes, err := os.ReadFile(filepath.Join(o.Out, "notes.md")); err == nil {
		w.WriteString("\n")
		w.Write(notes)
	}

	for _, rep := range r.Reports {
		sc := r.scenario(rep.Scenario)
		fmt.Fprintf(w, "\n## %s\n\n", rep.Scenario)
		fmt.Fprintf(w, "`%s`: %s. Seeds %s.\n\n", r.file(sc), describe(sc), o.Seeds.Comma())
		order := PoliciesFor(sc, o.Policies)
		markdownTable(w, rep.Summary, order)
		w.WriteString("\n")
		ratioTable(w, rep.Summary, order, sc.MultiCluster())
		if reps := r.Outages[rep.Scenario]; len(reps) > 0 {
			outagePage(w, sc, reps)
		}
		if note := overloadNote(sc, rep.Summary); note != "" {
			fmt.Fprintf(w, "\n%s\n", note)
		}
		fmt.Fprintf(w, "\n![%s TTFT CDF](%s)\n", rep.Scenario, cdfFile(rep.Scenario))
	}
}

const methodology = `## How to read this

Each run serves the scenario's workload (same requests for every policy of a
seed) on a simulated fleet in virtual time. igw and legacy-blend are the real
endpoint-picker code (director, pipeline, datastore, prefix index, online speed
learning), seeing pod telemetry only at each scrape (scrapeInterval, 50 ms by
default) while their own accounting and the response path (first token, tokens,
completion) flow as they happen. Requests that arrive during the warmup are not
counted; arrivals stop at the duration and requests in flight drain.

- TTFT: arrival to first token. TPOT: (finish − first token) / (output − 1).
- output tok/s and goodput: output tokens, and requests that met both SLOs,
  per second over the window from the end of the warmup to the last counted
  finish (a backlog that drains late lowers both).
- prefix hit: the servers' prefix-cache hit rate (tokens) over that window;
  LoRA loads: adapters loaded into GPU slots over it.
- Peers: sglang-cache-aware, dynamo-cost and dynamo-precise are implemented in
  ` + "`pkg/bench/policies`" + ` from their published behaviour (dynamo-cost in
  Dynamo's approximate mode, dynamo-precise on the index the simulator's KV
  events build); legacy-blend (queue 2, kv-cache 2, prefix 3, 64-character
  prefix blocks) and llm-d-precise (precise prefix 3 from KV events, kv-cache
  2, queue 2) are EPP configurations. Events reach the precise routers after
  the scenario's kvEventDelay (default 5 ms); igw-precise is igw's default
  plus the precise prefix-cache scorer at weight 1.
- oracle: the simulator's exact cost model (PredictTTFT) over the exact,
  zero-staleness pod state; it minimises each request's own TTFT greedily, so
  it is the limit for TTFT, not necessarily for throughput.
`

func (r *Result) report(name string) *bench.Report {
	for i := range r.Reports {
		if r.Reports[i].Scenario == name {
			return &r.Reports[i]
		}
	}
	return nil
}

// file is sc's file as the page names it, in the grid's directory.
func (r *Result) file(sc *scenario.Scenario) string {
	return path.Join(r.Options.Dir, filepath.Base(sc.File))
}

func (r *Result) scenario(name string) *scenario.Scenario {
	for _, sc := range r.Options.Scenarios {
		if sc.Name == name {
			return sc
		}
	}
	return nil
}

// describe summarises a scenario's fleet and load in one line.
func describe(sc *scenario.Scenario) string {
	var fleet []string
	for _, g := range sc.Fleet {
		fleet = append(fleet, fmt.Sprintf("%d× %s", g.Replicas, g.GPU))
	}
	for _, c := range sc.Clusters {
		var groups []string
		for _, g := range c.Fleet {
			groups = append(groups, fmt.Sprintf("%d× %s", g.Replicas, g.GPU))
		}
		fleet = append(fleet, fmt.Sprintf("%s in %s (%s)", c.Name, c.Region, strings.Join(groups, " + ")))
	}
	w := sc.Workload
	load := fmt.Sprintf("%s arrivals at %g/s", w.Arrival.Type, w.Arrival.Rate)
	if len(w.Stages) > 0 {
		load = fmt.Sprintf("%s arrivals in %d stages from %g/s, then %g/s", w.Arrival.Type, len(w.Stages), w.Stages[0].Rate, w.Arrival.Rate)
	}
	if tr := w.Trace; tr != nil {
		load = fmt.Sprintf("the %s trace `%s` (%d requests, time ×1/%g)", tr.Format, filepath.Base(tr.File), len(tr.Records), tr.RateScale)
	}
	if w.MultiTurn != nil {
		load += fmt.Sprintf(" (conversations of %d turns)", w.MultiTurn.Turns)
	}
	return fmt.Sprintf("%s serving %s, %s for %v (warmup %v), SLO TTFT %v / TPOT %v",
		strings.Join(fleet, " + "), sc.Model(), load, sc.Duration, sc.Warmup, sc.SLO.TTFT, sc.SLO.TPOT)
}

func markdownTable(w *strings.Builder, summary map[string]bench.Metrics, order []string) {
	w.WriteString("| policy |")
	for _, c := range bench.Columns {
		fmt.Fprintf(w, " %s |", c.Header)
	}
	w.WriteString("\n|---|")
	w.WriteString(strings.Repeat("---:|", len(bench.Columns)))
	w.WriteString("\n")
	for _, p := range order {
		m, ok := summary[p]
		if !ok {
			continue
		}
		name := p
		if p == policies.IGW {
			name = "**igw**"
		}
		fmt.Fprintf(w, "| %s |", name)
		for _, c := range bench.Columns {
			fmt.Fprintf(w, " %s |", c.Format(c.Value(&m)))
		}
		w.WriteString("\n")
	}
}

// ratioTable shows each policy's change against round-robin and
// least-request, and the oracle row as igw's distance to the limit.
func ratioTable(w *strings.Builder, summary map[string]bench.Metrics, order []string, global bool) {
	type col struct {
		name   string
		metric func(*bench.Metrics) float64
	}
	cols := []col{{"TTFT p50", ttftP50}, {"TTFT p95", ttftP95}, {"TTFT p99", ttftP99}, {"tok/s", throughput}}
	bases, ours, oracleName := []string{policies.RoundRobin, policies.LeastRequest}, policies.IGW, policies.Oracle
	if global {
		bases, ours, oracleName = []string{policies.GlobalRoundRobin, policies.GlobalBlend}, policies.IGWGlobal, policies.GlobalOracle
	}
	w.WriteString("| change | ")
	for _, b := range bases {
		for _, c := range cols {
			fmt.Fprintf(w, "%s vs %s | ", c.name, b)
		}
	}
	w.WriteString("\n|---|" + strings.Repeat("---:|", len(cols)*len(bases)) + "\n")
	for _, p := range order {
		pm, ok := summary[p]
		if p == bases[0] || !ok {
			continue
		}
		fmt.Fprintf(w, "| %s |", p)
		for _, b := range bases {
			bm, ok := summary[b]
			for _, c := range cols {
				if !ok || c.metric(&bm) == 0 {
					w.WriteString(" – |")
					continue
				}
				fmt.Fprintf(w, " %s |", percent(c.metric(&pm)/c.metric(&bm)-1))
			}
		}
		w.WriteString("\n")
	}
	if _, ok := summary[oracleName]; ok {
		fmt.Fprintf(w, "\n| %s vs %s | TTFT p50 | TTFT p95 | TTFT p99 | tok/s |\n|---|---:|---:|---:|---:|\n", ours, oracleName)
		igw, oracle := summary[ours], summary[oracleName]
		fmt.Fprintf(w, "| %s / %s |", ours, oracleName)
		for _, c := range cols {
			if c.metric(&oracle) == 0 {
				w.WriteString(" – |")
				continue
			}
			fmt.Fprintf(w, " %.2f× |", c.metric(&igw)/c.metric(&oracle))
		}
		w.WriteString("\n")
	}
}

// overloadNote says when even the oracle cannot meet the TTFT SLO at P99:
// then the fleet, not the routing, is the limit, and the scenario is kept as
// published rather than edited.
func overloadNote(sc *scenario.Scenario, summary map[string]bench.Metrics) string {
	o, ok := summary[policies.Oracle]
	if g, global := summary[policies.GlobalOracle]; global {
		o, ok = g, true
	}
	if !ok || sc.SLO.TTFT <= 0 || o.TTFTP99 <= sc.SLO.TTFT.Seconds() {
		return ""
	}
	return fmt.Sprintf("**Overloaded even for the oracle:** its P99 TTFT is %ss against an SLO of %v, so part of "+
		"this scenario's latency is the fleet's capacity, not routing. The scenario is kept unchanged.",
		strings.TrimSpace(bench.Columns[2].Format(o.TTFTP99)), sc.SLO.TTFT)
}
