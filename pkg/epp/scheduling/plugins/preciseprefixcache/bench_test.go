package preciseprefixcache_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/cputime"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/preciseprefixcache"
)

// withPrecise is igw-precise's configuration (pkg/bench/policies
// IGWPreciseConfig: igw's default with the precise scorer ahead of
// predicted-latency, which then prices the prefill an exact pod really has
// left), tokenizing as the simulator does.
var withPrecise = preciseprefixcache.DefaultConfig(`{tokenizers: {"*": test-bytes4}}`)

// fleet is a director over n endpoints; with the precise scorer, its hub is
// fed the blocks every pick puts on its endpoint, as the servers would report.
type fleet struct {
	d    *director.Director
	feed *kvevents.Feed
	hub  *kvevents.Hub
}

func newFleet(b *testing.B, yaml string, n int) *fleet {
	store := datastore.NewStore(latency.DefaultPriors)
	var eps []datastore.Endpoint
	for i := range n {
		eps = append(eps, datastore.Endpoint{Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: 8000})
	}
	store.SetEndpoints(eps)
	f := &fleet{d: director.New(store, director.Options{Staleness: time.Hour}), hub: kvevents.NewHub(nil)}
	b.Cleanup(f.hub.Close)
	p, err := config.Load([]byte(yaml), plugins.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	if preciseprefixcache.BindAll(p.Profile, f.hub) > 0 {
		f.feed = f.hub.NewFeed(0)
	}
	f.d.SetPipeline(p)
	now := time.Unix(1000, 0)
	for i, st := range store.Endpoints(nil) {
		if f.feed != nil {
			f.feed.Follow(st.Key()) // exact from the start (empty cache), as in the discrete-event benchmark
		}
		f.d.UpdateMetrics(st.Key(), datastore.Metrics{Waiting: i % 7, Running: i % 13, KVCacheKnown: true,
			KVCacheUsage: float64(i%10) / 10, BlockSizeTokens: 16, NumGPUBlocks: 28000, SampledAt: now}, now)
	}
	return f
}

// served reports the prompt's blocks as stored on the endpoint picked.
func (f *fleet) served(res *director.Result, prompt string, now time.Time) {
	if f.feed == nil || res == nil {
		return
	}
	toks, _ := bytes4{}.AppendPromptTokens(nil, nil, prompt)
	n := len(toks) / 16
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = uint64(res.Endpoint.ID())<<48 ^ uint64(toks[i*16])<<16 ^ uint64(i) // the engine's own naming
	}
	f.feed.Publish(res.Primary, now, []kvevents.Event{{Kind: kvevents.BlockStored, Hashes: hashes, Tokens: toks[:16*n], BlockSize: 16}})
}

// pickTimes are one pipeline's pick durations, of wall-clock time and of
// the picking thread's CPU time (which, on a busy machine, leaves out the
// waits for a core), and how many requests late binding held.
type pickTimes struct {
	wall, cpu []time.Duration
	held      int
}

// schedule makes the first decision for req that the ext_proc server asks
// for (ScheduleQueued, no place yet), times it, and completes the pick at
// once. A request late binding holds is let go; schedule returns nil.
func (f *fleet) schedule(b *testing.B, req scheduling.Request, now time.Time, t *pickTimes) *director.Result {
	start, c0 := time.Now(), cputime.Thread()
	res, place, err := f.d.ScheduleQueued(context.Background(), &req, false, now, nil)
	t.cpu = append(t.cpu, cputime.Thread()-c0)
	t.wall = append(t.wall, time.Since(start))
	if err != nil {
		b.Fatal(err)
	}
	if place != nil {
		t.held++
		place.Leave()
		return nil
	}
	f.d.ObserveCompletion(res, 10, now)
	return res
}

// quantile returns the q-quantile of d (sorting d).
func quantile(d []time.Duration, q float64) float64 {
	slices.Sort(d)
	return float64(d[int(float64(len(d)-1)*q)].Nanoseconds()) / 1e3
}

// BenchmarkSchedulePrecise measures one scheduling decision (the full
// pipeline, as director.BenchmarkSchedule does) with an 8k-token prompt and
// the precise scorer, against igw's default pipeline without it: both fleets
// pick each request in turn in the same loop, so that a busy machine slows
// both alike. With the scorer each pick tokenizes the prompt (the
// simulator's 4 bytes a token), keys its 512 blocks and looks them up in an
// index the warm-up picks filled (via KV events, as the servers would
// report). The token-ids variant passes the prompt's token IDs with the
// request, as the discrete-event benchmark does, so the scorer does not
// tokenize. The decision is the one the ext_proc server asks for first, so
// late binding judges it (held-%: the requests it held). It reports the
// precise pick's p50 and p99 in µs, of wall-clock
// time and of CPU time, the baseline's p99s and CPU p50, and the ratios of
// the p99s (precise / baseline). Allocations count both picks.
func BenchmarkSchedulePrecise(b *testing.B) {
	ps := plugintest.TenantPrompts(256)
	ids := make([][]uint32, len(ps))
	for i, p := range ps {
		ids[i], _ = bytes4{}.AppendPromptTokens(nil, nil, p)
	}
	for _, n := range []int{16, 128} {
		for _, withIDs := range []bool{false, true} {
			name := fmt.Sprintf("endpoints=%d", n)
			if withIDs {
				name += "/token-ids"
			}
			b.Run(name, func(b *testing.B) {
				base, precise := newFleet(b, config.Default, n), newFleet(b, withPrecise, n)
				now := time.Unix(1000, 0)
				// Warm the indexes with picks that complete at once: 2000 open
				// 8k-token requests would be overload, which the default
				// admission bounds shed.
				var warm pickTimes
				for i := range 2000 {
					req := scheduling.Request{Model: "m", Prompt: ps[i%len(ps)]}
					base.schedule(b, req, now, &warm)
					precise.served(precise.schedule(b, req, now, &warm), req.Prompt, now)
				}
				b.ReportMetric(float64(precise.hub.Index().Blocks()), "index-blocks")
				var pt, bt pickTimes
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					req := scheduling.Request{Model: "m", Prompt: ps[i%len(ps)]}
					if withIDs {
						req.TokenIDs = ids[i%len(ps)]
					}
					precise.schedule(b, req, now, &pt)
					base.schedule(b, req, now, &bt)
				}
				b.StopTimer()
				p99, cpuP99 := quantile(pt.wall, 0.99), quantile(pt.cpu, 0.99)
				baseP99, baseCPUP99 := quantile(bt.wall, 0.99), quantile(bt.cpu, 0.99)
				b.ReportMetric(quantile(pt.wall, 0.5), "p50-µs")
				b.ReportMetric(p99, "p99-µs")
				b.ReportMetric(quantile(pt.cpu, 0.5), "cpu-p50-µs")
				b.ReportMetric(cpuP99, "cpu-p99-µs")
				b.ReportMetric(quantile(bt.cpu, 0.5), "base-cpu-p50-µs")
				b.ReportMetric(baseP99, "base-p99-µs")
				b.ReportMetric(baseCPUP99, "base-cpu-p99-µs")
				b.ReportMetric(p99/baseP99, "p99/base")
				b.ReportMetric(cpuP99/baseCPUP99, "cpu-p99/base")
				b.ReportMetric(100*float64(pt.held)/float64(b.N), "held-%")
			})
		}
	}
}
