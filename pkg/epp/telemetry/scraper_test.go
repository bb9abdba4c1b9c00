package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

type recordingSink struct {
	mu      sync.Mutex
	samples map[string][]datastore.Metrics
}

func (r *recordingSink) UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples[key] = append(r.samples[key], m)
	return true
}

func (r *recordingSink) last(key string) (datastore.Metrics, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples[key]
	if len(s) == 0 {
		return datastore.Metrics{}, 0
	}
	return s[len(s)-1], len(s)
}

func endpointOf(t *testing.T, srv *httptest.Server) datastore.Endpoint {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return datastore.Endpoint{Address: host, Port: p}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servetest.WaitFor(t, what, 5*time.Second, cond)
}

func TestScraperFollowsEndpointsAndWarnsOnceOnLegacyKV(t *testing.T) {
	var waiting atomic.Int64
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("vllm:num_requests_waiting " + strconv.FormatInt(waiting.Load(), 10) + "\nvllm:num_requests_running 1\nvllm:gpu_cache_usage_perc 0.5\n"))
	}))
	defer legacy.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("not metrics at all {"))
	}))
	defer broken.Close()

	store := datastore.NewStore(latency.DefaultPriors)
	a, b := endpointOf(t, legacy), endpointOf(t, broken)
	store.SetEndpoints([]datastore.Endpoint{a, b})
	sink := &recordingSink{samples: map[string][]datastore.Metrics{}}
	var logs bytes.Buffer
	var errs atomic.Int64
	s := &Scraper{Sink: sink, Log: slog.New(slog.NewTextHandler(&logs, nil)), Poll: Poll{Store: store, Interval: 10 * time.Millisecond, Timeout: time.Second,
		Observe: func(endpoint string, err error, _ time.Duration) {
			if err != nil && endpoint == b.Key() {
				errs.Add(1)
			}
		}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "three samples", func() bool { _, n := sink.last(a.Key()); return n >= 3 })
	waiting.Store(9)
	waitFor(t, "the new queue length", func() bool { m, _ := sink.last(a.Key()); return m.Waiting == 9 })
	m, _ := sink.last(a.Key())
	if !m.KVCacheKnown || m.KVCacheUsage != 0.5 || m.SampledAt.IsZero() {
		t.Fatalf("sample %+v", m)
	}
	if n := strings.Count(logs.String(), "legacy metric name"); n != 1 {
		t.Fatalf("legacy warning logged %d times:\n%s", n, logs.String())
	}
	waitFor(t, "errors from the broken endpoint", func() bool { return errs.Load() >= 2 })
	if _, n := sink.last(b.Key()); n != 0 {
		t.Fatal("a broken scrape produced a sample")
	}
	// Removing the endpoint stops its scrapes.
	store.SetEndpoints([]datastore.Endpoint{b})
	time.Sleep(50 * time.Millisecond)
	_, before := sink.last(a.Key())
	time.Sleep(100 * time.Millisecond)
	if _, after := sink.last(a.Key()); after != before {
		t.Fatalf("removed endpoint still scraped: %d -> %d", before, after)
	}
}
