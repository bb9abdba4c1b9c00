package live

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/workload"
)

// runClock converts between wall-clock instants and the run's GPU time.
type runClock struct {
	start   time.Time
	speedup float64
}

// gpu is the GPU time of wall-clock instant t.
func (c runClock) gpu(t time.Time) time.Duration {
	return time.Duration(float64(t.Sub(c.start)) * c.speedup)
}

// wall is the wall-clock instant of GPU time d.
func (c runClock) wall(d time.Duration) time.Time {
	return c.start.Add(time.Duration(float64(d) / c.speedup))
}

// drive releases the workload at its arrival times (scaled to the wall
// clock), one goroutine per request, and records what the client sees. A
// request's latencies count from its scheduled arrival, so a late release
// (the machine busy) is charged to the request as a real client would see it.
// The recorder and the generator are used from this goroutine only.
func (f *fleet) drive(ctx context.Context, gen *workload.Generator, rec *bench.Recorder, progress func(float64)) error {
	sc := f.job.Scenario
	clk := runClock{start: time.Now(), speedup: f.speedup}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan outcome, 256)
	var wg sync.WaitGroup
	defer func() { // on an early return: end the requests in flight, then their goroutines
		cancel()
		go func() { wg.Wait(); close(done) }()
		for range done {
		}
	}()
	r := &results{rec: rec, gen: gen, clk: clk, podOf: f.podOf, flying: map[uint64]*workload.Request{}}
	warmupAt := clk.wall(sc.Warmup)
	var baseline bench.FleetCounters
	warmupTaken := false
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		next, more := gen.Next()
		if !more && len(r.flying) == 0 && warmupTaken {
			break
		}
		due := clk.start.Add(24 * time.Hour) // nothing to release: only a completion can follow
		if more {
			due = clk.wall(next)
		}
		if !warmupTaken && warmupAt.Before(due) {
			due = warmupAt
		}
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case o := <-done:
				r.finish(o)
			case <-tick.C:
				if err := f.exited(); err != nil {
					return err
				}
				progress(0.99 * min(1, clk.gpu(time.Now()).Seconds()/sc.Duration.Seconds()))
			case <-timer.C:
			}
			continue
		}
		if !warmupTaken {
			var err error
			if baseline, err = f.counters(ctx); err != nil {
				return err
			}
			warmupTaken = true
			continue
		}
		req := gen.Pop()
		rec.Arrived(req)
		r.flying[req.ID] = req
		model := req.Model
		if req.Adapter != "" {
			model = req.Adapter
		}
		prompt, out, id := req.Prompt, req.OutputTokens, req.ID
		req.Tokens = nil // the server tokenizes the text; the text stays for the next turn
		wg.Go(func() { done <- send(ctx, f.client, f.gateway.URL, model, prompt, out, id) })
	}
	if err := f.exited(); err != nil {
		return err
	}
	final, err := f.counters(ctx)
	if err != nil {
		return err
	}
	rec.SetFleet(delta(baseline, final))
	if r.completed == 0 && r.failed > 0 {
		return fmt.Errorf("all %d requests failed; the first: %s", r.failed, r.firstErr)
	}
	progress(1)
	return nil
}

// results turns the client's outcomes into records and generator feedback.
type results struct {
	rec    *bench.Recorder
	gen    *workload.Generator
	clk    runClock
	podOf  map[string]int
	flying map[uint64]*workload.Request

	completed, failed int
	firstErr          string
}

// finish records one request's outcome and tells the generator, which may
// release the conversation's next turn.
func (r *results) finish(o outcome) {
	req := r.flying[o.id]
	delete(r.flying, o.id)
	if pod, ok := r.podOf[o.endpoint]; ok {
		r.rec.Routed(o.id, pod)
	}
	at := r.clk.gpu(o.finish)
	if o.failed {
		r.failed++
		if r.firstErr == "" {
			r.firstErr = o.err
		}
		r.rec.Failed(o.id, at, o.code)
		r.gen.Finished(req, at, false)
		return
	}
	r.completed++
	r.rec.FirstToken(o.id, r.clk.gpu(o.firstToken))
	r.rec.Finished(o.id, at, o.usage.CompletionTokens, o.usage.PromptTokens, o.usage.CachedTokens)
	r.gen.Finished(req, at, true)
}
