package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/frontdoor"
)

// The front door under load, live: the figures are logged (go test -v -run
// 'AtScale|WithinTheBufferBudget' ./pkg/gateway) and the bounds asserted.

// TestSlowUploadsAtScaleAreCut opens 3,000 connections, then starts a
// chunked upload on each that trickles a byte every 200 ms: every one is
// answered 408 once the body-read timeout passes (never before), and
// afterwards no connection or goroutine is left behind. The cut times are
// logged, not bounded tightly: on a loaded machine scheduling adds to them.
func TestSlowUploadsAtScaleAreCut(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 3,000 connections")
	}
	const (
		uploads = 3000
		timeout = time.Second
	)
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--body-read-timeout", timeout.String(),
		"--read-header-timeout", "60s") // the connections wait while the others are dialed
	baseline := runtime.NumGoroutine()

	conns := make([]net.Conn, uploads)
	dials := make(chan struct{}, 128) // the listen backlog is finite
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			dials <- struct{}{}
			defer func() { <-dials }()
			c, err := net.DialTimeout("tcp", g.Addr(), 30*time.Second)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	waitFor(t, "the gateway holds every connection", func() bool { return g.OpenConnections() == uploads })

	// One goroutine trickles a chunk into every upload once its headers are sent.
	started := make([]atomic.Bool, uploads)
	trickling := make(chan struct{})
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-trickling:
				return
			case <-tick.C:
			}
			for i, c := range conns {
				if !started[i].Load() {
					continue
				}
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = io.WriteString(c, "1\r\n \r\n")
			}
		}
	}()
	var (
		mu       sync.Mutex
		took     []time.Duration
		statuses = map[int]int{}
		failures []string
	)
	t0 := time.Now()
	for i, c := range conns {
		wg.Go(func() {
			start := time.Now()
			_, _ = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
			started[i].Store(true)
			r, err := readRaw(c, timeout+20*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err.Error())
				return
			}
			took = append(took, time.Since(start))
			statuses[r.status]++
		})
	}
	wg.Wait()
	all := time.Since(t0)
	close(trickling)
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "every connection closed", func() bool { return g.OpenConnections() == 0 })
	var goroutines int
	waitFor(t, "the goroutines are gone", func() bool {
		goroutines = runtime.NumGoroutine()
		return goroutines <= baseline+20
	})

	slices.Sort(took)
	if len(failures) > 0 {
		t.Errorf("%d uploads got no answer, first: %s", len(failures), failures[0])
	}
	if statuses[http.StatusRequestTimeout] != uploads {
		t.Errorf("answers %v, want %d × 408", statuses, uploads)
	}
	if len(took) > 0 {
		t.Logf("%d slow chunked uploads on %d open connections, --body-read-timeout %v: answers %v; cut after min %v, "+
			"median %v, p99 %v, max %v (all in %v); after: %d connections open, %d goroutines (%d before)",
			uploads, uploads, timeout, statuses, took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond),
			took[len(took)*99/100].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), all.Round(time.Millisecond),
			g.OpenConnections(), goroutines, baseline)
		if took[0] < timeout {
			t.Errorf("an upload was cut after %v, before the timeout %v", took[0], timeout)
		}
	}
}

// TestLargeBodiesStayWithinTheBufferBudget sends 16 bodies of 63 MiB at once,
// twice, to igw-gateway with a 256 MiB buffering budget: those that fit are served,
// the others get 503 with Retry-After, and the process's peak resident memory
// (VmHWM) grows by no more than the budget.
func TestLargeBodiesStayWithinTheBufferBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 1 GiB")
	}
	const (
		budget   = 256 << 20
		bodySize = 63 << 20
		bodies   = 16
		waves    = 2
	)
	var served atomic.Int64
	sink := &upstream{name: "sink"}
	sink.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		served.Add(n)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"a"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(sink.Close)
	p := startGatewayProcess(t, "--endpoints-file", endpointsFile(t, sink), "--served-model-name", "m",
		"--max-buffered-bytes", strconv.Itoa(budget), "--models-interval", "0")
	before := vmHWM(t, p.Pid())

	head, tail := `{"model":"m","max_tokens":1,"prompt":"`, `"}`
	body := []byte(head + strings.Repeat("x", bodySize-len(head)-len(tail)) + tail)
	var (
		mu      sync.Mutex
		answers = map[string]int{}
	)
	var wg sync.WaitGroup
	t0 := time.Now()
	// Two waves: the second allocates while the first's bodies are garbage.
	for range waves {
		for range bodies {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				answer := ""
				if err != nil {
					answer = "error: " + err.Error()
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answer = strconv.Itoa(resp.StatusCode)
					if resp.StatusCode != http.StatusOK {
						r := response{resp.StatusCode, resp.Header, string(b)}
						_, code, _ := openAIError(t, r)
						answer += " " + code + " Retry-After " + resp.Header.Get("Retry-After")
					}
				}
				mu.Lock()
				answers[answer]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	took := time.Since(t0)
	peak := vmHWM(t, p.Pid())
	t.Logf("%d waves of %d concurrent %d MiB bodies, --max-buffered-bytes %d MiB (each body counted twice): answers %v in %v; "+
		"%d MiB reached the server; gateway VmHWM %d MiB (%d MiB before), budget %d MiB, memory limit %d MiB",
		waves, bodies, bodySize>>20, budget>>20, answers, took.Round(time.Millisecond), served.Load()>>20, peak>>20, before>>20,
		budget>>20, (budget+frontdoor.MemoryHeadroom)>>20)
	for a, n := range answers {
		if a != "200" && a != "503 buffer_budget_exhausted Retry-After 1" {
			t.Errorf("%d × %q, want 200 or a 503 with Retry-After", n, a)
		}
	}
	if answers["200"] == 0 {
		t.Error("no body was served: the test proves nothing")
	}
	// What the process grew by is the bodies and prompts it held, the
	// budget, plus a little for the proxy's buffers.
	if grown := peak - before; grown > budget+32<<20 {
		t.Errorf("gateway VmHWM grew by %d MiB, over the budget %d MiB (+32 MiB)", grown>>20, budget>>20)
	}
}

// vmHWM is the peak resident memory of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
