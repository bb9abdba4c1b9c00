package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/des"
	"github.com/igw-dev/igw/pkg/bench/policies"
)

// fidelitySpeedup is slow motion: what the machine adds to each request
// outside the simulated GPU (a few milliseconds of HTTP and waiting for a
// core on a loaded machine) counts a tenth, so the comparison measures the
// des model rather than the machine.
const fidelitySpeedup = 0.1

// runFidelity runs one scenario in both modes, same seeds, and compares each
// policy's P50 TTFT and output throughput; it fails when a difference
// exceeds the tolerance.
func runFidelity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := subcommand("fidelity", stderr)
	file := fs.String("scenario", "bench/testdata/small.yaml", "scenario file")
	c := common{mode: "live", seeds: 1, firstSeed: 1}
	fs.StringVar(&c.policies, "policies", strings.Join(policies.Names, ","), "comma-separated policies (the oracle is left out: it does not run live)")
	fs.DurationVar(&c.duration, "duration", 0, "shorten the scenario to this much arrival time (warmup scaled alike)")
	fs.Float64Var(&c.speedup, "speedup", fidelitySpeedup, "live: simulated GPU speed relative to real ones")
	fs.IntVar(&c.parallel, "parallel", 0, "live runs at a time (0: all at once; in slow motion they barely load the machine)")
	tolerance := fs.Float64("tolerance", 0.15, "largest relative difference accepted")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !(*tolerance > 0) {
		return usageErrorf("--tolerance must be positive, got %g", *tolerance)
	}
	sc, err := loadShortened(*file, c.duration)
	if err != nil {
		return err
	}
	if c.parallel == 0 {
		c.parallel = len(policies.Names)
	}
	liveBackend, names, err := c.resolve(stderr)
	if err != nil {
		return err
	}
	jobs := bench.Jobs(sc, names, bench.FirstN(1))
	desOut, err := bench.RunJobs(ctx, des.Backend{}, jobs, bench.RunOptions{})
	if err != nil {
		return err
	}
	liveOut, err := bench.RunJobs(ctx, liveBackend, jobs, bench.RunOptions{Parallel: c.parallel,
		Progress: bench.NewProgress(stderr, sc.Name+" live", len(jobs))})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: des vs live at %g× GPU speed, seed 1 (difference: live / des − 1)\n", sc.Name, c.speedup)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tTTFT p50 des (s)\tlive (s)\tdiff\toutput tok/s des\tlive\tdiff\t")
	var beyond []string
	for i, p := range names {
		d, l := desOut[i].Metrics, liveOut[i].Metrics
		ttft, tput := relative(l.TTFTP50, d.TTFTP50), relative(l.OutputTokPerS, d.OutputTokPerS)
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%+.1f%%\t%.0f\t%.0f\t%+.1f%%\t\n", p, d.TTFTP50, l.TTFTP50, 100*ttft, d.OutputTokPerS, l.OutputTokPerS, 100*tput)
		if !(math.Abs(ttft) <= *tolerance && math.Abs(tput) <= *tolerance) {
			beyond = append(beyond, p)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(beyond) > 0 {
		return errors.New("fidelity: " + strings.Join(beyond, ", ") + fmt.Sprintf(" differ by more than %.0f%%", 100**tolerance))
	}
	fmt.Fprintf(stdout, "every policy within %.0f%%\n", 100**tolerance)
	return nil
}

// relative is got / want − 1 (NaN when want is 0, which no tolerance accepts).
func relative(got, want float64) float64 {
	if want == 0 {
		return math.NaN()
	}
	return got/want - 1
}
