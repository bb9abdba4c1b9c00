package director_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

const legacyBlend = `
scorers:
- {plugin: queue, weight: 2}
- {plugin: kv-cache-utilization, weight: 2}
- {plugin: prefix-cache, weight: 3}
`

// roundRobin is the trivial baseline: the cheapest possible pick over the
// same endpoint list.
type roundRobin struct {
	store *datastore.Store
	next  int
	buf   []*datastore.EndpointState
}

func (r *roundRobin) pick() string {
	r.buf = r.store.Endpoints(r.buf[:0])
	r.next++
	return r.buf[r.next%len(r.buf)].Key()
}

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// BenchmarkSchedule measures one scheduling decision (snapshot, filters,
// scorers, prefix lookup and index update, pick, accounting) with an
// 8k-token prompt, against a round-robin pick measured in the same run.
// The decision is the first one the ext_proc server and the standalone
// gateway ask for (ScheduleQueued with no place yet), so late binding
// judges it: a request it holds is let go at once, and held-% says how
// many were. It reports p99 in µs and the ratio p99/round-robin p99.
func BenchmarkSchedule(b *testing.B) {
	prompts := plugintest.TenantPrompts(256)
	for _, cfg := range []struct{ name, yaml string }{{"igw-default", config.Default}, {"legacy-blend", legacyBlend}} {
		for _, n := range []int{16, 128, 1024} {
			b.Run(fmt.Sprintf("%s/endpoints=%d", cfg.name, n), func(b *testing.B) {
				d := newDirector(b, cfg.yaml, n, director.Options{Staleness: time.Hour})
				now := t0
				for i, k := range keys(d) {
					d.UpdateMetrics(k, datastore.Metrics{Waiting: i % 3, Running: i % 13, KVCacheKnown: true,
						KVCacheUsage: float64(i%10) / 10, BlockSizeTokens: 16, NumGPUBlocks: 28000, SampledAt: now}, now)
				}
				ctx := context.Background()
				// Warm the prefix index and accounting like a running fleet:
				// 2,000 picks, of which one per endpoint stays in flight. The
				// fleet is busy but within the overload bounds (every 32 KB
				// prompt is some 8k tokens): deeper queues, or all 2,000 in
				// flight, are an overload the picker sheds.
				var open []*director.Result
				for i := range 2000 {
					res, err := d.Schedule(ctx, &scheduling.Request{Model: "m", Prompt: prompts[i%len(prompts)]}, false, now)
					if err != nil {
						b.Fatal(err)
					}
					open = append(open, res)
					if len(open) > n {
						finish(d, open[0], now)
						open = open[1:]
					}
				}
				for _, r := range open {
					finish(d, r, now)
				}
				rr := &roundRobin{store: d.Store()}
				lat := make([]time.Duration, 0, b.N)
				base := make([]time.Duration, 0, b.N)
				held := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					req := scheduling.Request{Model: "m", Prompt: prompts[i%len(prompts)]}
					start := time.Now()
					res, place, err := d.ScheduleQueued(ctx, &req, false, now, nil)
					lat = append(lat, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					if place != nil {
						held++
						place.Leave()
					} else {
						finish(d, res, now)
					}
					start = time.Now()
					_ = rr.pick()
					base = append(base, time.Since(start))
				}
				b.StopTimer()
				sched, rrp := p99(lat), p99(base)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(sched.Nanoseconds())/1e3, "p99-µs")
				b.ReportMetric(float64(rrp.Nanoseconds())/1e3, "rr-p99-µs")
				b.ReportMetric(float64(sched)/float64(max(rrp, 1)), "p99/rr")
				b.ReportMetric(100*float64(held)/float64(b.N), "held-%")
			})
		}
	}
}

// finish ends a pick as a served request does: its first token, then its
// completion. Ended without a first token, the pick would count as still
// waiting there until the next telemetry sample.
func finish(d *director.Director, r *director.Result, now time.Time) {
	d.ObserveFirstToken(r, now)
	d.ObserveCompletion(r, 10, now)
}
