// Package capacity finds each policy's capacity under SLO: the largest
// multiplier of a scenario's arrival rate (scenario.ScaleRate: the same
// seeded requests, arrival times divided by it) at which P99 TTFT and P99
// TPOT over the measured window meet the scenario's SLO with no request
// failed, by bisection to within a tolerance. Probes above capacity end early
// (bench.Guard), so a search costs a few runs at capacity, not many overloads.
package capacity

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/workload"
)

// Bounds of the search: a policy that misses the SLO at MinScale has capacity
// 0; one that meets it at MaxScale is reported at MaxScale.
const (
	MinScale = 1.0 / 64
	MaxScale = 64.0
)

// DefaultTolerance is the bisection's precision: the reported capacity meets
// the SLO and capacity × (1 + tolerance) does not.
const DefaultTolerance = 0.02

// Result is one policy's capacity on one seed.
type Result struct {
	Policy string `json:"policy"`
	Seed   uint64 `json:"seed"`
	// Scale is the largest rate multiplier that met the SLO; ReqPerS the
	// counted requests per second offered over the measured window at it.
	Scale   float64 `json:"capacity_rate_scale"`
	ReqPerS float64 `json:"capacity_req_per_s"`
	// Missed is the smallest multiplier probed that missed the SLO (0: none
	// did, up to MaxScale); Probes the number of runs the search took.
	Missed float64 `json:"-"`
	Probes int     `json:"-"`
}

// Summary is a policy's median capacity over seeds.
type Summary struct {
	Scale   float64 `json:"capacity_rate_scale"`
	ReqPerS float64 `json:"capacity_req_per_s"`
}

// SLO is the report's SLO in seconds.
type SLO struct {
	TTFT float64 `json:"ttft_s"`
	TPOT float64 `json:"tpot_s"`
}

// Report is the benchmark contract's capacity JSON object.
type Report struct {
	Scenario string             `json:"scenario"`
	SLO      SLO                `json:"slo"`
	Results  []Result           `json:"results"`
	Summary  map[string]Summary `json:"summary"`
}

// Options say what to search.
type Options struct {
	Policies []string
	Seeds    bench.Seeds
	// Parallel is the number of searches at a time (0: one per CPU).
	Parallel int
	// Tolerance is the bisection's precision (0: DefaultTolerance).
	Tolerance float64
	// Progress counts finished searches (nil: none), one job per policy and
	// seed in Options order.
	Progress *bench.Progress
}

// Run searches every policy's capacity on opts.Seeds of sc.
func Run(ctx context.Context, b bench.Backend, sc *scenario.Scenario, opts Options) (Report, error) {
	results, err := searchAll(ctx, b, []*scenario.Scenario{sc}, opts)
	if err != nil {
		return Report{}, err
	}
	return NewReport(sc, results[0]), nil
}

// searchAll searches every policy's capacity on opts.Seeds of each of
// scenarios, all in one pool, and returns the results by scenario.
func searchAll(ctx context.Context, b bench.Backend, scenarios []*scenario.Scenario, opts Options) ([][]Result, error) {
	type task struct {
		scenario, index int
		policy          string
		seed            uint64
	}
	var tasks []task
	for i, sc := range scenarios {
		if sc.SLO.TTFT <= 0 && sc.SLO.TPOT <= 0 {
			return nil, fmt.Errorf("%s: capacity needs an SLO (slo.ttft, slo.tpot)", sc.Name)
		}
		n := 0
		for _, p := range opts.Policies {
			for _, seed := range opts.Seeds.List() {
				tasks = append(tasks, task{i, n, p, seed})
				n++
			}
		}
	}
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	// The oracle's searches first: they cost the most.
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		return policies.IsOracle(tasks[order[i]].policy) && !policies.IsOracle(tasks[order[j]].policy)
	})
	results := make([][]Result, len(scenarios))
	for i := range results {
		results[i] = make([]Result, len(opts.Policies)*len(opts.Seeds.List()))
	}
	err := bench.Parallel(ctx, order, parallel, func(ctx context.Context, i int) error {
		t := tasks[i]
		res, err := Search(ctx, b, scenarios[t.scenario], t.policy, t.seed, opts.Tolerance)
		results[t.scenario][t.index] = res
		opts.Progress.Done(i)
		return err
	})
	opts.Progress.Finish()
	if err != nil {
		return nil, err
	}
	return results, nil
}

// NewReport gathers results into the contract's report with medians over seeds.
func NewReport(sc *scenario.Scenario, results []Result) Report {
	rep := Report{Scenario: sc.Name, SLO: SLO{TTFT: sc.SLO.TTFT.Seconds(), TPOT: sc.SLO.TPOT.Seconds()},
		Results: results, Summary: map[string]Summary{}}
	scales, rates := map[string][]float64{}, map[string][]float64{}
	for _, r := range results {
		scales[r.Policy] = append(scales[r.Policy], r.Scale)
		rates[r.Policy] = append(rates[r.Policy], r.ReqPerS)
	}
	for p := range scales {
		rep.Summary[p] = Summary{Scale: bench.Median(scales[p]), ReqPerS: bench.Median(rates[p])}
	}
	return rep
}

// Search finds policy's capacity on seed of sc by bisection on the rate
// multiplier: from 1, doubling or halving until the SLO's verdict changes,
// then halving the bracket (geometrically) until its ends are within
// tolerance of each other.
func Search(ctx context.Context, b bench.Backend, sc *scenario.Scenario, policy string, seed uint64, tolerance float64) (Result, error) {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	res := Result{Policy: policy, Seed: seed}
	probe := func(m float64) (bool, error) {
		res.Probes++
		scaled := sc.ScaleRate(m)
		job := bench.Job{Scenario: scaled, Policy: policy, Seed: seed,
			Guard: bench.NewGuard(sc.SLO, workload.MaxCounted(scaled, seed))}
		o, err := bench.RunJob(ctx, b, job, nil)
		if err != nil {
			return false, err
		}
		ok := !o.Broken && bench.MeetsSLO(o.Metrics, sc.SLO)
		if !ok && (res.Missed == 0 || m < res.Missed) {
			res.Missed = m
		}
		if ok && m >= res.Scale {
			res.Scale = m
			if window := (scaled.Duration - scaled.Warmup).Seconds(); window > 0 {
				res.ReqPerS = o.Metrics.Completed / window
			}
		}
		return ok, nil
	}
	// Bracket: from 1, doubling while the SLO is met, halving while it is not.
	lo, hi := 0.0, 0.0 // lo meets the SLO, hi does not (0: not found yet)
	for m := 1.0; lo == 0 || hi == 0; {
		ok, err := probe(m)
		if err != nil {
			return res, err
		}
		if ok {
			lo, m = m, 2*m
		} else {
			hi, m = m, m/2
		}
		if hi == 0 && lo >= MaxScale {
			return res, nil
		}
		if lo == 0 && m < MinScale {
			return res, nil // capacity 0
		}
	}
	for hi/lo > 1+tolerance {
		m := math.Sqrt(lo * hi)
		ok, err := probe(m)
		if err != nil {
			return res, err
		}
		if ok {
			lo = m
		} else {
			hi = m
		}
	}
	return res, nil
}

// BestPeer is the peer (every policy but igw's and the oracle) with the largest
// median capacity in summary; "" when there is none.
func BestPeer(summary map[string]Summary) string {
	best := ""
	for p, s := range summary {
		if policies.Ours(p) || policies.IsOracle(p) {
			continue
		}
		if best == "" || s.Scale > summary[best].Scale || (s.Scale == summary[best].Scale && p < best) {
			best = p
		}
	}
	return best
}
