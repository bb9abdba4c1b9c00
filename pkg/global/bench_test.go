package global

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/wire"
)

var benchRegions = membertest.BenchRegions

// allPlugins runs every filter and scorer the global registry has: a pin
// over the eight regions (so it keeps everyone, but does the work), health
// and served-model filters, the global scorers with a full delay table, and
// the endpoint picker's load scorers on member views: DefaultConfig with the
// pins, the delays and the other scorers added.
func allPlugins() string {
	var delays []string
	for i, a := range benchRegions {
		for _, b := range benchRegions[i+1:] {
			delays = append(delays, fmt.Sprintf("{from: %s, to: %s, delay: %dms}", a, b, 10+5*len(delays)%120))
		}
	}
	return `
plugins:
- {name: region-pin, type: region-pin, parameters: {pins: [{model: llama, regions: [` + strings.Join(benchRegions, ", ") + `]}]}}
- {name: region-proximity, type: region-proximity, parameters: {delays: [` + strings.Join(delays, ", ") + `]}}` +
		strings.Replace(DefaultConfig, "picker:", `- {plugin: region-proximity, weight: 0.1}
- {plugin: queue, weight: 0.1}
- {plugin: kv-cache-utilization, weight: 0.1}
- {plugin: running-requests, weight: 0.1}
picker:`, 1)
}

// benchFleet is n members over the eight regions, each with a summary whose
// digest holds 20,000 blocks (a 256 Ki-bit filter), some of them the leading
// blocks of the benchmark's conversations; every eighth member is in slow
// start.
type benchFleet struct {
	p         *Picker
	summaries []*globalsummary.Summary
	members   []Member
	prompts   []string
}

func newBenchFleet(b testing.TB, n int, config string) *benchFleet {
	b.Helper()
	f := &benchFleet{}
	rng := rand.New(rand.NewPCG(1, 1))
	f.prompts = membertest.BenchPrompts(16)
	for i := range n {
		f.members = append(f.members, Member{Name: fmt.Sprintf("m%02d", i), Region: benchRegions[i%len(benchRegions)], Address: fmt.Sprintf("gw%02d.example:443", i)})
	}
	p := newTestPicker(b, config, 7, f.members)
	f.p = p
	for i, m := range f.members {
		e := membertest.BenchModel(rng, "llama", f.prompts[i%len(f.prompts)], 8+i%56)
		f.summaries = append(f.summaries, &globalsummary.Summary{Version: 1, Cluster: m.Name, Region: m.Region, Models: []globalsummary.Model{e}})
		_ = p.ObserveRTT(m.Name, time.Duration(1+i%len(benchRegions)*10)*time.Millisecond)
	}
	f.poll(t0)
	// Every eighth member was ejected and is back, in slow start.
	for i := 0; i < n; i += 8 {
		name := f.members[i].Name
		mem, _ := p.member(name)
		for range 3 {
			mem.health.ObserveRequest(health.Reset, t0)
		}
		mem.health.ProbeSucceeded(t0.Add(3 * time.Second))
	}
	return f
}

func (f *benchFleet) poll(now time.Time) {
	for i, s := range f.summaries {
		s.GeneratedAt = now
		_ = f.p.UpdateSummary(f.members[i].Name, s, 0, now)
	}
}

// pickTimes are the durations of timed picks, each sorted: wall clock, and
// the thread's CPU time (empty where unknown).
type pickTimes struct{ wall, cpu []time.Duration }

// timePicks makes n picks (a summary every 500, half a second of virtual
// time at 1 ms a pick, from 4 s on) and times each.
func (f *benchFleet) timePicks(n int) pickTimes {
	runtime.LockOSThread() // the thread's CPU clock is the pick's
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	out := pickTimes{wall: make([]time.Duration, 0, n), cpu: make([]time.Duration, 0, n)}
	reqs := make([]scheduling.Request, len(f.prompts))
	for i, p := range f.prompts {
		reqs[i] = scheduling.Request{Model: "llama", Prompt: p, Headers: map[string]string{wire.HeaderClientRegion: benchRegions[i%len(benchRegions)]}}
	}
	for i := range n {
		now := t0.Add(4*time.Second + time.Duration(i)*time.Millisecond)
		if i%500 == 0 {
			f.poll(now)
		}
		req := &reqs[i%len(reqs)]
		cpu0, cpuKnown := threadCPU()
		start := time.Now()
		d, apiErr := f.p.Pick(ctx, req, false, now)
		out.wall = append(out.wall, time.Since(start))
		if cpu1, ok := threadCPU(); ok && cpuKnown {
			out.cpu = append(out.cpu, cpu1-cpu0)
		}
		if apiErr != nil {
			panic(apiErr)
		}
		f.p.ObserveFirstByte(d, now)
		f.p.ObserveCompletion(d, now)
	}
	slices.Sort(out.wall)
	slices.Sort(out.cpu)
	return out
}

func (t *pickTimes) add(o pickTimes) {
	t.wall = append(t.wall, o.wall...)
	t.cpu = append(t.cpu, o.cpu...)
	slices.Sort(t.wall)
	slices.Sort(t.cpu)
}

func quantile(sorted []time.Duration, q float64) float64 {
	return float64(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))].Nanoseconds())
}

// BenchmarkGlobalPick is one global pick at 32 members with every plugin on,
// an 8k-token prompt hashed for the digests. It reports the p50 and p99 of
// the picks it timed, and the p99 of a baseline measured in the same run:
// the same picker and members with one scorer (queue) and no filters. Each
// pick is timed by the wall clock and by its thread's CPU time (cpu-p99-ns,
// Linux): on a shared machine the wall clock also counts waits for a core.
//
//	go test ./pkg/global/ -run XXX -bench GlobalPick -benchtime 20000x
func BenchmarkGlobalPick(b *testing.B) {
	for _, n := range []int{32} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			base := newBenchFleet(b, n, "scorers: [{plugin: queue, weight: 1}]\n")
			baseline := base.timePicks(2500)
			f := newBenchFleet(b, n, allPlugins())
			f.timePicks(1000) // warm the cycle pool
			b.ReportAllocs()
			b.ResetTimer()
			picks := f.timePicks(b.N)
			b.StopTimer()
			// The baseline's second half after, so that both see the machine alike.
			baseline.add(base.timePicks(2500))
			p99, base99 := quantile(picks.wall, 0.99), quantile(baseline.wall, 0.99)
			b.ReportMetric(quantile(picks.wall, 0.50), "p50-ns")
			b.ReportMetric(p99, "p99-ns")
			b.ReportMetric(p99/base99, "p99-x-baseline")
			if len(picks.cpu) > 0 && len(baseline.cpu) > 0 {
				cpu99 := quantile(picks.cpu, 0.99)
				b.ReportMetric(cpu99, "cpu-p99-ns")
				b.ReportMetric(cpu99/max(1, quantile(baseline.cpu, 0.99)), "cpu-p99-x-baseline")
			}
		})
	}
}
