// Package cli is igw-bench's command line (cmd/igw-bench is a thin main):
//
//	igw-bench run  --scenario FILE [--policies a,b,...] [--seeds N] [--first-seed S] [--mode des|live]
//	               [--format json|table] [--out DIR] [--duration D] [--parallel N] [--speedup K]
//	               [--igw-config FILE]
//	igw-bench grid [--scenarios DIR] [--seeds N] [--first-seed S] [--out DIR] [--policies a,b,...] [--capacity]
//	               [--mode des|live] [--duration D] [--parallel N] [--speedup K] [--igw-config FILE]
//	igw-bench capacity --scenario FILE [--policies a,b,...] [--seeds N] [--first-seed S] [--format json|table]
//	               [--out DIR] [--mode des|live] [--duration D] [--parallel N] [--speedup K] [--igw-config FILE]
//	igw-bench demo [--out DIR] [--duration D] [--speedup K] [--scenario FILE]
//	igw-bench fidelity [--scenario FILE] [--policies a,b,...] [--duration D] [--speedup K]
//	               [--parallel N] [--tolerance F]
//
// run prints one scenario's results (the benchmark contract's JSON object with
// --format json); grid runs every scenario of a directory and writes the
// benchmark page with tables and plots; capacity finds each policy's
// largest rate multiplier under the scenario's SLO; demo runs a small heterogeneous fleet
// live through round-robin and then igw and shows them side by side; fidelity
// runs a scenario in both modes and compares P50 TTFT and throughput.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/command"
	"github.com/igw-dev/igw/internal/version"
	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/des"
	"github.com/igw-dev/igw/pkg/bench/grid"
	"github.com/igw-dev/igw/pkg/bench/live"
	"github.com/igw-dev/igw/pkg/bench/plots"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
)

// backendOptions are the flags that configure a backend.
type backendOptions struct {
	// speedup is the live simulators' speed relative to real GPUs (0: automatic).
	speedup float64
	log     io.Writer
	// igwConfig is the igw policy's EPP configuration (YAML; "" for the built-in).
	igwConfig string
}

// backends maps each --mode to its backend's constructor.
var backends = map[string]func(backendOptions) bench.Backend{
	"des": func(o backendOptions) bench.Backend { return des.Backend{IGWConfig: o.igwConfig} },
	"live": func(o backendOptions) bench.Backend {
		return &live.Backend{Speedup: o.speedup, Log: o.log, IGWConfig: o.igwConfig}
	},
}

// validator is implemented by backends whose options can be wrong (the live
// backend's speedup).
type validator interface {
	Validate() error
}

// policyChecker is implemented by backends that cannot run every policy (the
// live backend has no oracle).
type policyChecker interface {
	SupportsPolicy(policy string) error
}

const usage = `igw-bench: benchmark routing policies on simulated LLM fleets.

  igw-bench run  --scenario FILE [--policies a,b,...] [--seeds N] [--first-seed S] [--mode des|live]
                 [--format json|table] [--out DIR] [--duration D] [--parallel N] [--speedup K]
                 [--igw-config FILE]
  igw-bench grid [--scenarios DIR] [--seeds N] [--first-seed S] [--out DIR] [--policies a,b,...] [--capacity]
                 [--mode des|live] [--duration D] [--parallel N] [--speedup K] [--igw-config FILE]
  igw-bench capacity --scenario FILE [--policies a,b,...] [--seeds N] [--first-seed S] [--format json|table]
                 [--out DIR] [--mode des|live] [--duration D] [--parallel N] [--speedup K] [--igw-config FILE]
  igw-bench demo [--out DIR] [--duration D] [--speedup K] [--scenario FILE]
  igw-bench fidelity [--scenario FILE] [--policies a,b,...] [--duration D] [--speedup K]
                 [--parallel N] [--tolerance F]

Policies: ` + "round-robin, random, least-request, legacy-blend, sglang-cache-aware, dynamo-cost, llm-d-precise, dynamo-precise, igw, igw-precise, oracle" + `
(--mode live runs all but oracle, which needs the simulators' exact state.)
--igw-config FILE runs igw with that EPP configuration instead of the built-in one.
igw-bench COMMAND --help lists a command's flags; igw-bench --version prints the version.
`

// Main runs the command line args (without the program name) and returns the
// exit code: 0 after --help or --version, 2 for a bad command line (with a
// usage line), 1 when a run fails. Flags are GNU style (--name value or
// --name=value), as every igw binary's.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, version.String("igw-bench"))
		return 0
	case "run":
		err = run(ctx, args[1:], stdout, stderr)
	case "grid":
		err = runGrid(ctx, args[1:], stdout, stderr)
	case "demo":
		err = runDemo(ctx, args[1:], stdout, stderr)
	case "fidelity":
		err = runFidelity(ctx, args[1:], stdout, stderr)
	case "capacity":
		err = runCapacity(ctx, args[1:], stdout, stderr)
	default:
		err = usageErrorf("unknown command %q\n\n%s", args[0], usage)
	}
	var bad usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &bad):
		if !bad.said {
			fmt.Fprintln(stderr, "igw-bench:", err)
			fmt.Fprintln(stderr, "usage: igw-bench COMMAND [flags] ('igw-bench --help' lists them)")
		}
		return 2
	default:
		fmt.Fprintln(stderr, "igw-bench:", err)
		return 1
	}
}

// usageError is a bad command line: exit 2. said is set when the flag
// parser has already printed the error with the usage.
type usageError struct {
	err  error
	said bool
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{err: fmt.Errorf(format, args...)}
}

// parse parses a subcommand's flags; an error is a usageError already
// printed with a usage line, or pflag.ErrHelp. Positional arguments are
// refused.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := command.Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err: err, said: true}
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

// common are the flags of run and grid.
type common struct {
	policies string
	seeds    int
	// firstSeed is --first-seed: the seeds run are firstSeed..firstSeed+seeds-1.
	firstSeed int
	mode      string
	duration  time.Duration
	parallel  int
	speedup   float64
	out       string
	// igwConfig is the --igw-config file ("": the built-in configuration).
	igwConfig string
}

// subcommand is the flag set of one subcommand, writing its messages and
// --help to stderr.
func subcommand(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("igw-bench "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	return fs
}

// commonFlags is the flag set of a subcommand that runs scenarios, with the
// common flags registered (results in defaultOut unless --out says).
func commonFlags(name string, stderr io.Writer, defaultOut string) (*pflag.FlagSet, *common) {
	fs := subcommand(name, stderr)
	c := &common{}
	c.register(fs, defaultOut)
	return fs, c
}

func (c *common) register(fs *pflag.FlagSet, defaultOut string) {
	fs.StringVar(&c.policies, "policies", strings.Join(policies.Names, ","), "comma-separated policies to run")
	fs.IntVar(&c.seeds, "seeds", 1, "number of seeds (1..N) per policy")
	fs.IntVar(&c.firstSeed, "first-seed", 1, "first seed: runs seeds S..S+N-1 (a held-out set besides the grid's 1..N)")
	fs.StringVar(&c.mode, "mode", "des", "des (virtual time) or live (real HTTP on loopback)")
	fs.DurationVar(&c.duration, "duration", 0, "shorten each scenario to this much arrival time (warmup scaled alike)")
	fs.IntVar(&c.parallel, "parallel", 0, "runs at a time (0: one per CPU for des, 1 for live)")
	fs.Float64Var(&c.speedup, "speedup", 0, "live: run the simulated GPUs this many times faster than real ones "+
		"(0: real time, slower when the machine could not keep up; below 1 for fidelity, above 1 for quick looks)")
	fs.StringVar(&c.out, "out", defaultOut, "directory for results and plots")
	fs.StringVar(&c.igwConfig, "igw-config", "", "EPP configuration file (YAML) the igw policy runs instead of the built-in one, for experiments")
}

// defaultPolicies makes the global policies the default of a multi-cluster
// scenario, whose requests pick a member cluster first.
func (c *common) defaultPolicies(fs *pflag.FlagSet, sc *scenario.Scenario) {
	if sc.MultiCluster() && !fs.Changed("policies") {
		c.policies = strings.Join(policies.GlobalNames, ",")
	}
}

// loadScenario reads the scenario file, cut to --duration, and resolves the
// backend and the policies to run it with (the global ones by default for a
// multi-cluster scenario).
func (c *common) loadScenario(fs *pflag.FlagSet, file string, stderr io.Writer) (*scenario.Scenario, bench.Backend, []string, error) {
	sc, err := loadShortened(file, c.duration)
	if err != nil {
		return nil, nil, nil, err
	}
	c.defaultPolicies(fs, sc)
	b, names, err := c.resolve(stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	return sc, b, names, nil
}

// seedRange is the seeds --first-seed and --seeds name.
func (c *common) seedRange() bench.Seeds { return bench.Seeds{First: c.firstSeed, Count: c.seeds} }

// resolve validates the flags (a usageError when one is wrong) and returns
// the backend and the policies to run on it. Policies the backend cannot run are left out with a note on
// stderr (the oracle in live mode); none left is an error.
func (c *common) resolve(stderr io.Writer) (bench.Backend, []string, error) {
	if c.seeds < 1 {
		return nil, nil, usageErrorf("--seeds must be at least 1")
	}
	if c.firstSeed < 1 {
		return nil, nil, usageErrorf("--first-seed must be at least 1")
	}
	newBackend, ok := backends[c.mode]
	if !ok {
		return nil, nil, usageErrorf("unknown --mode %q (des or live)", c.mode)
	}
	switch {
	case c.speedup != 0 && c.mode != "live":
		return nil, nil, usageErrorf("--speedup applies to --mode live only")
	case c.parallel < 0:
		return nil, nil, usageErrorf("--parallel must not be negative")
	}
	if c.parallel == 0 && c.mode == "live" {
		// Fleets side by side add to each other's transport time, which the
		// speedup multiplies: one run at a time unless asked.
		c.parallel = 1
	}
	bo := backendOptions{speedup: c.speedup, log: stderr}
	if c.igwConfig != "" {
		data, err := os.ReadFile(c.igwConfig)
		if err != nil {
			return nil, nil, usageErrorf("--igw-config: %w", err)
		}
		if _, err := config.Load(data, plugins.NewRegistry()); err != nil {
			return nil, nil, usageErrorf("--igw-config %s: %w", c.igwConfig, err)
		}
		bo.igwConfig = string(data)
	}
	b := newBackend(bo)
	if v, ok := b.(validator); ok {
		if err := v.Validate(); err != nil {
			return nil, nil, usageErrorf("--mode %s: %w", c.mode, err)
		}
	}
	var names []string
	skipped := false
	for _, p := range strings.Split(c.policies, ",") {
		p = strings.TrimSpace(p)
		if p == "" || slices.Contains(names, p) {
			continue
		}
		if !policies.Known(p) {
			return nil, nil, usageErrorf("unknown policy %q (known: %s; among member clusters: %s)", p,
				strings.Join(policies.Names, ", "), strings.Join(policies.GlobalNames, ", "))
		}
		if pc, ok := b.(policyChecker); ok {
			if err := pc.SupportsPolicy(p); err != nil {
				fmt.Fprintf(stderr, "igw-bench: --mode %s leaves out %s: %v\n", c.mode, p, err)
				skipped = true
				continue
			}
		}
		names = append(names, p)
	}
	if len(names) == 0 {
		if skipped {
			return nil, nil, usageErrorf("--policies names no policy --mode %s can run", c.mode)
		}
		return nil, nil, usageErrorf("--policies names no policy")
	}
	return b, names, nil
}

// Shorten cuts sc to d of arrivals, scaling the warmup and the outages'
// starts in proportion (an outage keeps its length).
func Shorten(sc *scenario.Scenario, d time.Duration) error {
	if d <= 0 || d >= sc.Duration {
		return nil
	}
	scale := func(t time.Duration) time.Duration {
		return time.Duration(float64(t) * float64(d) / float64(sc.Duration))
	}
	for i := range sc.Outages {
		sc.Outages[i].At = scale(sc.Outages[i].At)
	}
	sc.Warmup = scale(sc.Warmup)
	sc.Duration = d
	return sc.Validate()
}

// loadShortened reads a scenario file and cuts it to d of arrivals (0: whole).
func loadShortened(file string, d time.Duration) (*scenario.Scenario, error) {
	sc, err := scenario.Load(file)
	if err != nil {
		return nil, err
	}
	if err := Shorten(sc, d); err != nil {
		return nil, err
	}
	return sc, nil
}

// scenarioFlags are --scenario and --format, of the subcommands that run one
// scenario and print its results.
type scenarioFlags struct {
	file, format *string
}

func registerScenarioFlags(fs *pflag.FlagSet) scenarioFlags {
	return scenarioFlags{file: fs.String("scenario", "", "scenario file (required)"), format: fs.String("format", "table", "json or table")}
}

// check validates the flags of subcommand cmd, whose --format may also be
// one of formats.
func (f scenarioFlags) check(cmd string, formats ...string) error {
	if *f.file == "" {
		return usageErrorf("%s: --scenario FILE is required", cmd)
	}
	if *f.format != "json" && *f.format != "table" && !slices.Contains(formats, *f.format) {
		return usageErrorf("--format must be json or table, got %q", *f.format)
	}
	return nil
}

// printJSON writes v as the one indented JSON value on w.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := commonFlags("run", stderr, "")
	sf := registerScenarioFlags(fs)
	file, format := sf.file, sf.format
	traces := fs.String("trace", "", "directory to write every request's record into, one CSV per policy and seed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := sf.check("run"); err != nil {
		return err
	}
	sc, b, names, err := c.loadScenario(fs, *file, stderr)
	if err != nil {
		return err
	}
	jobs := bench.Jobs(sc, names, c.seedRange())
	outages := len(sc.Outages) > 0 && slices.ContainsFunc(names, policies.IsGlobal)
	outcomes, err := bench.RunJobs(ctx, b, jobs, bench.RunOptions{Parallel: c.parallel,
		Progress: bench.NewProgress(stderr, sc.Name, len(jobs)), KeepTraces: *traces != "" || outages})
	if err != nil {
		return err
	}
	if outages {
		tableOut := stdout
		if *format == "json" {
			tableOut = stderr // stdout holds the one JSON object
		}
		if err := reportOutages(tableOut, c.out, sc, outcomes); err != nil {
			return err
		}
	}
	if *traces != "" {
		if err := writeTraces(*traces, sc.Name, outcomes); err != nil {
			return err
		}
	}
	rep := bench.NewReport(sc.Name, b.Mode(), outcomes)
	if c.out != "" {
		if err := writeRun(c.out, rep, outcomes, names); err != nil {
			return err
		}
	}
	if *format == "json" {
		return printJSON(stdout, rep)
	}
	return bench.WriteTable(stdout, fmt.Sprintf("%s (%s, median of seeds %v)", sc.Name, b.Mode(), c.seedRange()), rep.Summary, names)
}

// writeRun saves a run's JSON and TTFT CDF plot into dir.
func writeRun(dir string, rep bench.Report, outcomes []bench.Outcome, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := bench.WriteJSON(filepath.Join(dir, rep.Scenario+".json"), rep); err != nil {
		return err
	}
	var series []plots.Series
	for _, p := range names {
		var ttfts []float64
		for _, o := range outcomes {
			if o.Policy == p {
				ttfts = append(ttfts, o.TTFTs...)
			}
		}
		sort.Float64s(ttfts)
		series = append(series, plots.Series{Policy: p, Values: ttfts})
	}
	return plots.TTFTCDF(filepath.Join(dir, "ttft-cdf-"+rep.Scenario+".png"), rep.Scenario+": TTFT distribution ("+rep.Mode+")", series)
}

// reportOutages prints the outage table of every global run and, with an
// out directory, writes it and the first seed's timeline plot there.
func reportOutages(w io.Writer, dir string, sc *scenario.Scenario, outcomes []bench.Outcome) error {
	var reps []bench.OutageReport
	var series []plots.TimelineSeries
	first := map[string]bool{}
	for _, o := range outcomes {
		if !policies.IsGlobal(o.Policy) {
			continue
		}
		rs := bench.Outages(o, sc)
		reps = append(reps, rs...)
		if first[o.Policy] || len(rs) == 0 {
			continue
		}
		first[o.Policy] = true
		ts := plots.TimelineSeries{Policy: o.Policy}
		for _, p := range rs[0].Points {
			ts.At, ts.Share, ts.P99s = append(ts.At, p.At), append(ts.Share, p.Share), append(ts.P99s, p.P99)
		}
		series = append(series, ts)
	}
	title := fmt.Sprintf("%s: member outages (off after: last send to the member after it went down; back after: first second at half its steady share; recovery P99 over %v after)", sc.Name, bench.RecoveryWindow)
	if err := bench.WriteOutageTable(w, title, reps); err != nil {
		return err
	}
	if dir == "" || len(series) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf strings.Builder
	if err := bench.WriteOutageTable(&buf, title, reps); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "outage-"+sc.Name+".txt"), []byte(buf.String()), 0o644); err != nil {
		return err
	}
	og := sc.Outages[0]
	return plots.OutageTimeline(filepath.Join(dir, "outage-"+sc.Name+".png"),
		fmt.Sprintf("%s: cluster %s unreachable %v–%v (seed %d)", sc.Name, og.Cluster, og.At, og.At+og.For, outcomes[0].Seed),
		og.At.Seconds(), (og.At + og.For).Seconds(), series)
}

// writeTraces writes one CSV of request records per outcome into dir.
func writeTraces(dir, name string, outcomes []bench.Outcome) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, o := range outcomes {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-seed%d.csv", name, o.Policy, o.Seed)))
		if err != nil {
			return err
		}
		err = o.Trace.WriteCSV(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func runGrid(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := commonFlags("grid", stderr, "docs/benchmarks")
	dir := fs.String("scenarios", "bench/scenarios", "directory of scenario files (*.yaml)")
	withCapacity := fs.Bool("capacity", false, "also search each trace scenario's capacity under SLO and sweep the load around it (first on the page)")
	if err := parse(fs, args); err != nil {
		return err
	}
	b, names, err := c.resolve(stderr)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(*dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no scenario files (*.yaml) in %s", *dir)
	}
	sort.Strings(files)
	var scs []*scenario.Scenario
	for _, f := range files {
		sc, err := loadShortened(f, c.duration)
		if err != nil {
			return err
		}
		scs = append(scs, sc)
	}
	command := "igw-bench grid " + strings.Join(args, " ")
	res, err := grid.Run(ctx, b, grid.Options{Scenarios: scs, Dir: filepath.ToSlash(filepath.Clean(*dir)), Policies: names, Seeds: c.seedRange(), Parallel: c.parallel,
		Out: c.out, Command: strings.TrimSpace(command), Progress: stderr, Capacity: *withCapacity})
	if err != nil {
		return err
	}
	for i, rep := range res.Reports {
		if err := bench.WriteTable(stdout, rep.Scenario, rep.Summary, grid.PoliciesFor(scs[i], names)); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "grid: %d runs in %v; wrote %s\n", res.Runs, res.Wall.Round(time.Second), filepath.Join(c.out, "README.md"))
	return nil
}
