// Package bench is igw's benchmark harness: it serves a scenario's workload
// (pkg/bench/workload) through a routing policy on a backend, records every
// request (Recorder) and turns the records into the benchmark contract's
// metrics (Compute). Backends differ only in how requests reach pods: the
// discrete-event backend (pkg/bench/des) runs the real scheduler code against
// simulator engines in virtual time; a live backend sends real HTTP requests
// through the gateway to simulator servers. Both implement Backend and share
// the workload generator and the result collection.
package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/workload"
)

// Job is one run: a scenario served with one policy and one seed.
type Job struct {
	Scenario *scenario.Scenario
	Policy   string
	Seed     uint64
	// Guard, when set, lets a backend end the run once it surely misses the
	// SLO (capacity probes); the outcome is then Broken.
	Guard *Guard
}

// Jobs are sc served with each of policies on each of seeds, in that order
// (a policy's seeds together).
func Jobs(sc *scenario.Scenario, policies []string, seeds Seeds) []Job {
	jobs := make([]Job, 0, len(policies)*max(seeds.Count, 0))
	for _, p := range policies {
		for _, seed := range seeds.List() {
			jobs = append(jobs, Job{Scenario: sc, Policy: p, Seed: seed})
		}
	}
	return jobs
}

// Backend serves workloads.
type Backend interface {
	// Mode is the backend's --mode name.
	Mode() string
	// Run serves every request gen releases with job's policy and reports each
	// one's life to rec, and the fleet's counters at the end. Requests still in
	// flight when arrivals stop are drained. progress receives the fraction done.
	Run(ctx context.Context, job Job, gen *workload.Generator, rec *Recorder, progress func(fraction float64)) error
}

// Outcome is a finished job.
type Outcome struct {
	Job
	Metrics Metrics
	// TTFTs are the counted requests' times to first token (seconds, sorted).
	TTFTs []float64
	// Wall is the job's wall-clock time.
	Wall time.Duration
	// Trace is every request's record, kept when the runner was asked to.
	Trace *Trace
	// Broken is set when the job's Guard ended the run early: it missed the
	// SLO, and its metrics cover only what ran.
	Broken bool
}

// RunJob runs one job on b.
func RunJob(ctx context.Context, b Backend, job Job, progress func(float64)) (Outcome, error) {
	return runJob(ctx, b, job, progress, false)
}

func runJob(ctx context.Context, b Backend, job Job, progress func(float64), keepTrace bool) (Outcome, error) {
	start := time.Now()
	gen, err := workload.New(job.Scenario, job.Seed, job.Scenario.MaxContext())
	if err != nil {
		return Outcome{}, err
	}
	rec := NewRecorder()
	if progress == nil {
		progress = func(float64) {}
	}
	err = b.Run(ctx, job, gen, rec, progress)
	broken := errors.Is(err, ErrSLOBroken)
	if err != nil && !broken {
		return Outcome{}, fmt.Errorf("%s / %s / seed %d: %w", job.Scenario.Name, job.Policy, job.Seed, err)
	}
	m, ttfts := Compute(rec.Trace(), job.Scenario)
	o := Outcome{Job: job, Metrics: m, TTFTs: ttfts, Wall: time.Since(start), Broken: broken}
	if keepTrace {
		o.Trace = rec.Trace()
	}
	return o, nil
}

// RunOptions tune RunJobs.
type RunOptions struct {
	// Parallel is the number of runs at a time (0: one per CPU).
	Parallel int
	// Progress draws a bar (nil: none).
	Progress *Progress
	// KeepTraces keeps every request's record in the outcomes; KeepTrace,
	// when set, keeps those of the jobs it names.
	KeepTraces bool
	KeepTrace  func(Job) bool
}

// RunJobs runs jobs on b, the most expensive first so that the slowest run
// does not start last, and returns the outcomes in job order. It stops at the
// first error.
func RunJobs(ctx context.Context, b Backend, jobs []Job, opts RunOptions) ([]Outcome, error) {
	parallel, bar := opts.Parallel, opts.Progress
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return EstimatedCost(jobs[order[a]]) > EstimatedCost(jobs[order[b]]) })

	out := make([]Outcome, len(jobs))
	err := Parallel(ctx, order, parallel, func(ctx context.Context, i int) error {
		keep := opts.KeepTraces || (opts.KeepTrace != nil && opts.KeepTrace(jobs[i]))
		o, err := runJob(ctx, b, jobs[i], bar.Job(i), keep)
		out[i] = o
		bar.Done(i)
		return err
	})
	bar.Finish()
	return out, err
}

// Parallel calls do for each of items, in that order, on parallel
// goroutines, and returns the first error, after which it starts no more and
// cancels the context of those running.
func Parallel(ctx context.Context, items []int, parallel int, do func(ctx context.Context, item int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(parallel, len(items)) {
		wg.Go(func() {
			for i := range work {
				if err := do(ctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, i := range items {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return firstErr
}

// EstimatedCost is a job's relative cost: the requests it serves, weighted by
// the fleet for the oracle, which predicts every pod for every request.
func EstimatedCost(j Job) float64 {
	sc := j.Scenario
	rate := sc.Workload.Arrival.Rate
	for _, st := range sc.Workload.Stages {
		rate = max(rate, st.Rate)
	}
	if tr := sc.Workload.Trace; tr != nil {
		rate = float64(len(tr.Records)) / sc.Duration.Seconds()
	}
	turns := 1.0
	if mt := sc.Workload.MultiTurn; mt != nil {
		turns = float64(mt.Turns)
	}
	cost := rate * turns * sc.Duration.Seconds()
	if j.Policy == "oracle" || j.Policy == "global-oracle" {
		cost *= 1 + float64(len(sc.PodConfigs(0)))/4
	}
	return cost
}

// Summarize returns the median metrics of each policy over its seeds.
func Summarize(outcomes []Outcome) map[string]Metrics {
	by := map[string][]Metrics{}
	for _, o := range outcomes {
		by[o.Policy] = append(by[o.Policy], o.Metrics)
	}
	out := make(map[string]Metrics, len(by))
	for p, ms := range by {
		out[p] = MedianMetrics(ms)
	}
	return out
}
