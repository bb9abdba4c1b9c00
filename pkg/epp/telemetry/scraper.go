package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// Sink receives samples; the director's UpdateMetrics is one.
type Sink interface {
	UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool
}

// Scraper polls every endpoint of a store. Each endpoint has its own loop, so
// one slow server delays only its own samples (which then go stale and are
// treated per the stale policy).
type Scraper struct {
	Store    *datastore.Store
	Sink     Sink
	Interval time.Duration
	Timeout  time.Duration
	// Path is the metrics path on the endpoint's port ("/metrics" when empty).
	Path   string
	Client *http.Client
	Log    *slog.Logger
	// Now is the wall clock (time.Now when nil); only the scraper reads it.
	Now func() time.Time
	// Observe, when set, is told the outcome and duration of every scrape.
	Observe func(endpoint string, err error, took time.Duration)
	// MaxBodyBytes bounds one scrape (16 MiB when zero).
	MaxBodyBytes int64
}

// Run scrapes until ctx ends, following endpoint changes at every interval.
func (s *Scraper) Run(ctx context.Context) error {
	if s.Interval <= 0 {
		return fmt.Errorf("scrape interval must be positive")
	}
	workers := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, cancel := range workers {
			cancel()
		}
		wg.Wait()
	}()
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
	var buf []*datastore.EndpointState
	for {
		buf = s.Store.Endpoints(buf[:0])
		live := make(map[string]bool, len(buf))
		for _, st := range buf {
			key := st.Key()
			live[key] = true
			if _, ok := workers[key]; ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			workers[key] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.loop(wctx, st)
			}()
		}
		for key, cancel := range workers {
			if !live[key] {
				cancel()
				delete(workers, key)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *Scraper) loop(ctx context.Context, st *datastore.EndpointState) {
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
	for {
		s.ScrapeOnce(ctx, st)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// defaultClient keeps connections to each server open between scrapes.
var defaultClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}

func (s *Scraper) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ScrapeOnce fetches, parses and stores one sample of st.
func (s *Scraper) ScrapeOnce(ctx context.Context, st *datastore.EndpointState) error {
	start := s.now()
	err := s.scrape(ctx, st, start)
	if s.Observe != nil {
		s.Observe(st.Key(), err, s.now().Sub(start))
	}
	return err
}

func (s *Scraper) scrape(ctx context.Context, st *datastore.EndpointState, start time.Time) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = s.Interval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := s.Path
	if path == "" {
		path = "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.Key()+path, nil)
	if err != nil {
		return err
	}
	client := s.Client
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("scrape %s: status %d", st.Key(), resp.StatusCode)
	}
	limit := s.MaxBodyBytes
	if limit <= 0 {
		limit = 16 << 20
	}
	m, rep, err := Parse(io.LimitReader(resp.Body, limit))
	if err != nil {
		return fmt.Errorf("scrape %s: %w", st.Key(), err)
	}
	if rep.LegacyKV && st.MarkLegacyKV() {
		log := s.Log
		if log == nil {
			log = slog.Default()
		}
		log.Warn("model server reports KV-cache use only under the legacy metric name; using it",
			"endpoint", st.Key(), "metric", "vllm:gpu_cache_usage_perc")
	}
	// The sample describes the server as of the request, not the response.
	m.SampledAt = start
	s.Sink.UpdateMetrics(st.Key(), m, start)
	return nil
}
