package hub

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/cputime"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

var benchRegions = membertest.BenchRegions

// proxyBench is a hub's standalone front over n member gateways on
// loopback, each answering at once, with summaries whose digests hold
// 20,000 blocks (some of them the leading blocks of the benchmark's
// conversations), as the picker's own benchmark has them; the summaries are
// given to the picker directly, so no poll runs during the measurement.
type proxyBench struct {
	hub     *Hub
	front   *httptest.Server
	members []*httptest.Server
	bodies  [][]byte
	client  *http.Client

	mu       sync.Mutex
	overhead []time.Duration // the front's own time per request (wall clock)
	cpu      []time.Duration // the front's handler thread's CPU time per request
}

func newProxyBench(tb testing.TB, n int) *proxyBench {
	tb.Helper()
	pb := &proxyBench{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
	answer := []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":8192,"completion_tokens":1,"total_tokens":8193}}`)
	config := "region: us-east-1\nmembers:\n"
	token := tokenFile(tb)
	for i := range n {
		m := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		}))
		tb.Cleanup(m.Close)
		pb.members = append(pb.members, m)
		config += fmt.Sprintf("- {name: m%02d, region: %s, address: %q, summaryURLs: [%q], tokenFile: %q}\n",
			i, benchRegions[i%len(benchRegions)], m.Listener.Addr().String(), m.URL+"/summary", token)
	}
	c, err := ParseConfig([]byte(config))
	if err != nil {
		tb.Fatal(err)
	}
	o := NewOptions()
	o.Resolved = c
	h, err := New(o, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	pb.hub = h
	rng := rand.New(rand.NewPCG(1, 1))
	prompts := membertest.BenchPrompts(16)
	for _, prompt := range prompts {
		pb.bodies = append(pb.bodies, fmt.Appendf(nil, `{"model":"llama","messages":[{"role":"user","content":%q}],"max_tokens":1}`, prompt))
	}
	now := time.Now()
	for i, m := range c.Members {
		e := membertest.BenchModel(rng, "llama", prompts[i%len(prompts)], 8+i%56)
		s := &globalsummary.Summary{Version: 1, Cluster: m.Name, Region: m.Region, GeneratedAt: now, Models: []globalsummary.Model{e}}
		for range 2 {
			if err := h.picker.UpdateSummary(m.Name, s, time.Duration(1+i%len(benchRegions)*10)*time.Millisecond, now); err != nil {
				tb.Fatal(err)
			}
		}
	}
	h.overheadHook = func(d time.Duration) {
		pb.mu.Lock()
		pb.overhead = append(pb.overhead, d)
		pb.mu.Unlock()
	}
	front := h.Front()
	pb.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The handler's goroutine on one thread, so that the thread's CPU
		// clock is the request's: reading and parsing the body, the pick,
		// writing the answer (the transport's socket loops run elsewhere).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 := cputime.Thread()
		front.ServeHTTP(w, r)
		cpu := cputime.Thread() - cpu0
		pb.mu.Lock()
		pb.cpu = append(pb.cpu, cpu)
		pb.mu.Unlock()
	}))
	tb.Cleanup(pb.front.Close)
	return pb
}

// post sends body to url and reads the answer; it returns the round trip.
func (pb *proxyBench) post(tb testing.TB, url string, body []byte) time.Duration {
	start := time.Now()
	resp, err := pb.client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d", resp.StatusCode)
	}
	return took
}

// run makes n requests through the hub and n straight to a member, one
// after the other, and returns both sets of round trips and the front's own
// time on each of its requests, sorted.
func (pb *proxyBench) run(tb testing.TB, n int) (viaHub, direct, overhead, cpu []time.Duration) {
	pb.mu.Lock()
	pb.overhead, pb.cpu = pb.overhead[:0], pb.cpu[:0]
	pb.mu.Unlock()
	for i := range n {
		body := pb.bodies[i%len(pb.bodies)]
		viaHub = append(viaHub, pb.post(tb, pb.front.URL+"/v1/chat/completions", body))
		direct = append(direct, pb.post(tb, pb.members[i%len(pb.members)].URL+"/v1/chat/completions", body))
	}
	slices.Sort(viaHub)
	slices.Sort(direct)
	// The front records a request's figures after its answer is written, so
	// the last may land just after the client has read it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		pb.mu.Lock()
		overhead, cpu = slices.Clone(pb.overhead), slices.Clone(pb.cpu)
		pb.mu.Unlock()
		if (len(overhead) >= n && len(cpu) >= n) || time.Now().After(deadline) {
			break
		}
	}
	slices.Sort(overhead)
	slices.Sort(cpu)
	return viaHub, direct, overhead, cpu
}

// processCPU is the process's CPU time per request over n requests to url
// (client, hub and members are all this process).
func (pb *proxyBench) processCPU(tb testing.TB, url string, n int) float64 {
	cpu0 := cputime.Process()
	for i := range n {
		pb.post(tb, url, pb.bodies[i%len(pb.bodies)])
	}
	return float64((cputime.Process() - cpu0).Nanoseconds()) / float64(n)
}

func quantile(sorted []time.Duration, q float64) float64 {
	return float64(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))].Nanoseconds())
}

// BenchmarkHubAddedLatency is the hub's added latency at 32 members: an 8k
// token chat request through the standalone front (read the body, parse it,
// pick a member with igw-global's pipeline over 32 digests, proxy, stream the
// answer back) against the same request sent straight to a member, each
// pair one after the other over loopback keep-alive connections.
// overhead-p99-ns is the front's own time on a request (pick and proxy: all
// but its waits for the member), the bar being 1 ms, and cpu-p99-ns the CPU
// time of the handler's thread on it; added-p50/p99-ns are the wall-clock
// round trips' differences. On a shared machine the wall-clock figures also
// count every wait for a core; CPU time does not. added-cpu-ns is the whole
// process's CPU per request through the hub minus straight to a member
// (the hub's work on both sockets included), over 1000 requests each.
//
//	go test ./pkg/global/hub/ -run XXX -bench HubAddedLatency -benchtime 5000x
func BenchmarkHubAddedLatency(b *testing.B) {
	pb := newProxyBench(b, 32)
	pb.run(b, 200) // connections and pools warm
	b.ResetTimer()
	viaHub, direct, overhead, cpu := pb.run(b, b.N)
	b.StopTimer()
	b.ReportMetric(quantile(cpu, 0.5), "cpu-p50-ns")
	b.ReportMetric(quantile(cpu, 0.99), "cpu-p99-ns")
	b.ReportMetric(pb.processCPU(b, pb.front.URL+"/v1/chat/completions", 1000)-pb.processCPU(b, pb.members[0].URL+"/v1/chat/completions", 1000), "added-cpu-ns")
	b.ReportMetric(quantile(overhead, 0.5), "overhead-p50-ns")
	b.ReportMetric(quantile(overhead, 0.99), "overhead-p99-ns")
	b.ReportMetric(quantile(viaHub, 0.5), "hub-p50-ns")
	b.ReportMetric(quantile(viaHub, 0.99), "hub-p99-ns")
	b.ReportMetric(quantile(direct, 0.5), "direct-p50-ns")
	b.ReportMetric(quantile(direct, 0.99), "direct-p99-ns")
	b.ReportMetric(quantile(viaHub, 0.5)-quantile(direct, 0.5), "added-p50-ns")
	b.ReportMetric(quantile(viaHub, 0.99)-quantile(direct, 0.99), "added-p99-ns")
}

// TestHubAddedLatencySetup checks the benchmark's setup, not its timing
// (the benchmark measures that): every request through the front is
// answered and timed, and the 32 members are in rotation.
func TestHubAddedLatencySetup(t *testing.T) {
	pb := newProxyBench(t, 32)
	viaHub, direct, overhead, cpu := pb.run(t, 64)
	if len(viaHub) != 64 || len(direct) != 64 || len(overhead) != 64 || len(cpu) != 64 {
		t.Fatalf("timed %d/%d/%d/%d of 64 requests", len(viaHub), len(direct), len(overhead), len(cpu))
	}
	in := 0
	for _, m := range pb.hub.Status().Members {
		if m.InRotation {
			in++
		}
	}
	if in != 32 {
		t.Errorf("%d of 32 members in rotation", in)
	}
}
