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

// withPrecise is igw's default configuration plus the precise scorer.
const withPrecise = `
plugins:
- name: predicted-latency
  type: predicted-latency
  parameters: {prefillWorkWeight: 1}
- name: precise
  type: precise-prefix-cache
  parameters: {tokenizers: {"*": test-bytes4}}
filters: [model-served-filter]
scorers:
- {plugin: predicted-latency, weight: 1}
- {plugin: running-requests, weight: 0.2}
- {plugin: precise, weight: 1}
picker: max-score-picker
`

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
		f.d.UpdateMetrics(st.Key(), datastore.Metrics{Waiting: i % 7, Running: i % 13, KVCacheKnown: true,
			KVCacheUsage: float64(i%10) / 10, BlockSizeTokens: 16, NumGPUBlocks: 28000, SampledAt: now}, now)
	}
	return f
}

// served reports the prompt's blocks as stored on the endpoint picked.
func (f *fleet) served(res *director.Result, prompt string, now time.Time) {
	if f.feed == nil {
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

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// BenchmarkSchedulePrecise measures one scheduling decision (the full
// pipeline, as director.BenchmarkSchedule does) with an 8k-token prompt,
// with and without the precise scorer, in the same run. With it each pick
// tokenizes the prompt (the simulator's 4 bytes a token), keys 512 blocks
// and looks them up in an index the earlier picks filled (via KV events).
// The token-ids variant passes the prompt's token IDs with the request, as
// the discrete-event benchmark does, so the scorer does not tokenize. It
// reports p50 and p99 in µs, of wall-clock time and of the picking thread's
// CPU time (which, on a busy machine, leaves out the waits for a core).
func BenchmarkSchedulePrecise(b *testing.B) {
	ps := plugintest.TenantPrompts(256)
	ids := make([][]uint32, len(ps))
	for i, p := range ps {
		ids[i], _ = bytes4{}.AppendPromptTokens(nil, nil, p)
	}
	for _, cfg := range []struct {
		name, yaml string
		withIDs    bool
	}{{"igw-default", config.Default, false}, {"igw-default+precise", withPrecise, false}, {"igw-default+precise/token-ids", withPrecise, true}} {
		for _, n := range []int{16, 128} {
			b.Run(fmt.Sprintf("%s/endpoints=%d", cfg.name, n), func(b *testing.B) {
				f := newFleet(b, cfg.yaml, n)
				ctx, now := context.Background(), time.Unix(1000, 0)
				var open []*director.Result
				for i := range 2000 {
					res, err := f.d.Schedule(ctx, &scheduling.Request{Model: "m", Prompt: ps[i%len(ps)]}, false, now)
					if err != nil {
						b.Fatal(err)
					}
					f.served(res, ps[i%len(ps)], now)
					open = append(open, res)
				}
				for _, r := range open {
					f.d.ObserveCompletion(r, 10, now)
				}
				if f.feed != nil {
					b.ReportMetric(float64(f.hub.Index().Blocks()), "index-blocks")
				}
				lat, cpu := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					req := scheduling.Request{Model: "m", Prompt: ps[i%len(ps)]}
					if cfg.withIDs {
						req.TokenIDs = ids[i%len(ps)]
					}
					start, c0 := time.Now(), cputime.Thread()
					res, err := f.d.Schedule(ctx, &req, false, now)
					cpu = append(cpu, cputime.Thread()-c0)
					lat = append(lat, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					f.d.ObserveCompletion(res, 10, now)
				}
				b.StopTimer()
				tail := p99(lat) // sorts lat
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(tail.Nanoseconds())/1e3, "p99-µs")
				cpuTail := p99(cpu)
				b.ReportMetric(float64(cpu[len(cpu)/2].Nanoseconds())/1e3, "cpu-p50-µs")
				b.ReportMetric(float64(cpuTail.Nanoseconds())/1e3, "cpu-p99-µs")
			})
		}
	}
}
