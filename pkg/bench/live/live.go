// Package live is the benchmark's live backend: every pod of the scenario is
// a simulator process (cmd/modelsim) on loopback, the policy runs in the
// standalone gateway (cmd/igw-bench-gateway: pkg/gateway with the EPP in
// process for igw, the benchmark's baseline routers registered for the
// others, see pkg/bench/livegateway), and the workload generator's
// requests go through real HTTP with streamed SSE responses.
//
// Time: the simulators run Speedup times faster than the GPUs they model and
// the gateway's clock is scaled alike, so staleness and learned speeds stay
// in GPU time; the client's wall-clock measurements are multiplied by Speedup
// back into GPU time, so the results compare with the des backend's. What the
// machine adds outside the simulated GPU (HTTP, the gateway, waiting for a
// core) is multiplied too: at Speedup K, a few milliseconds of transport per
// request read as K times that. The default (AutoSpeedup) is therefore at most
// real time; a Speedup below 1 (slow motion) shrinks the transport's share for
// fidelity measurements, one above 1 makes quick looks.
//
// Pods bind 127.0.1.100, 127.0.1.101, ... on Linux, so that the gateway's
// endpoints (sorted by address) are in fleet order: baselines number the pods
// and break ties as the des backend does, and the same seed routes alike.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/workload"
)

// Backend runs jobs live. Every run starts its own simulators and gateway, so
// runs may overlap (bench.RunOptions.Parallel); fleets side by side add to
// each other's transport time, which matters only at speedups near 1 and above.
type Backend struct {
	// Speedup is the simulators' --speedup and the gateway's --time-scale;
	// 0 picks one per scenario (AutoSpeedup).
	Speedup float64
	// BinDir is the directory holding modelsim and igw-bench-gateway; "" finds or
	// builds them (Binary).
	BinDir string
	// Log receives the processes' stderr when a run fails (nil: discarded).
	Log io.Writer
	// IGWConfig is the igw policy's EPP configuration (YAML), given to the
	// gateway's pool as its eppConfig; "" for the built-in one.
	IGWConfig string
}

// Mode implements bench.Backend.
func (*Backend) Mode() string { return "live" }

// ErrOracleNotLive is why the oracle policy does not run live.
var ErrOracleNotLive = errors.New("the oracle routes on the simulators' exact state and cost model, " +
	"which only --mode des has; live runs every other policy")

// SupportsPolicy returns why the backend cannot run policy (nil: it can).
func (*Backend) SupportsPolicy(policy string) error {
	if policy == policies.Oracle {
		return ErrOracleNotLive
	}
	if policies.IsGlobal(policy) {
		return fmt.Errorf("policy %s picks among member clusters, which live mode does not start; --mode des runs it", policy)
	}
	if !policies.Known(policy) {
		return fmt.Errorf("unknown policy %q", policy)
	}
	return nil
}

// Budgets the automatic speedup keeps within, in wall-clock events per
// second: streamed tokens (each one an SSE event through three processes)
// and telemetry scrapes. Above them two shared cores fall behind.
const (
	tokenBudget  = 1500.0
	scrapeBudget = 250.0
	// slowest is the least automatic speedup: slower runs take too long to
	// be worth it, and a scenario that needs it is too large to run live.
	slowest = 0.05
)

// AutoSpeedup is real time (1) unless the scenario's mean token stream or the
// gateway's scrapes would exceed what two shared cores serve; then the largest
// speedup within those budgets, rounded down to a multiple of 0.05 (at least 0.05).
func AutoSpeedup(sc *scenario.Scenario) float64 {
	w := sc.Workload
	rate := w.Arrival.Rate
	for _, st := range w.Stages {
		rate = max(rate, st.Rate)
	}
	turns := 1.0
	if w.MultiTurn != nil {
		turns = float64(w.MultiTurn.Turns)
	}
	k := 1.0
	if tokens := rate * turns * meanCount(w.Output); tokens > 0 {
		k = min(k, tokenBudget/tokens)
	}
	pods := float64(len(sc.PodConfigs(0)))
	k = min(k, scrapeBudget*sc.ScrapeInterval.Seconds()/pods)
	return max(slowest, math.Floor(k*20)/20)
}

// meanCount approximates a token-count distribution's mean (clamps ignored).
func meanCount(d scenario.Dist) float64 {
	switch d.Dist {
	case scenario.DistLognormal:
		return d.Median.V * math.Exp(d.Sigma*d.Sigma/2)
	case scenario.DistFixed:
		return d.Value.V
	case scenario.DistUniform:
		return (d.Min.V + d.Max.V) / 2
	case scenario.DistNormal:
		return d.Mean.V
	}
	return 100
}

// Prepare finds or builds the simulator and gateway binaries now, so that a
// first build (a minute or more on a fresh machine) happens before any run.
func (b *Backend) Prepare() error {
	_, err := findBinaries(b.BinDir)
	return err
}

// Validate rejects a backend that cannot run.
func (b *Backend) Validate() error {
	if b.Speedup < 0 || math.IsNaN(b.Speedup) || math.IsInf(b.Speedup, 0) {
		return fmt.Errorf("the speedup must be positive, or 0 for automatic; got %g", b.Speedup)
	}
	return nil
}

// Run implements bench.Backend.
func (b *Backend) Run(ctx context.Context, job bench.Job, gen *workload.Generator, rec *bench.Recorder, progress func(float64)) error {
	if err := b.SupportsPolicy(job.Policy); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	k := b.Speedup
	if k == 0 {
		k = AutoSpeedup(job.Scenario)
	}
	bins, err := findBinaries(b.BinDir)
	if err != nil {
		return err
	}
	f, err := startFleet(ctx, job, k, bins, b.IGWConfig)
	if f != nil {
		defer f.stop()
	}
	if err == nil {
		err = f.drive(ctx, gen, rec, progress)
	}
	if err != nil && b.Log != nil && f != nil && ctx.Err() == nil {
		f.logStderr(b.Log)
	}
	return err
}
