package telemetry

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/wire"
)

// Sink receives samples; the director's UpdateMetrics is one.
type Sink interface {
	UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool
}

// Scraper polls every endpoint of a store. Each endpoint has its own loop, so
// one slow server delays only its own samples (which then go stale and are
// treated per the stale policy).
type Scraper struct {
	Poll // its Path is wire.MetricsPath when empty, its MaxBodyBytes 16 MiB
	Sink Sink
	Log  *slog.Logger
}

// Run scrapes until ctx ends, following endpoint changes.
func (s *Scraper) Run(ctx context.Context) error { return s.run(ctx, "scrape", s.ScrapeOnce) }

// ScrapeOnce fetches, parses and stores one sample of st.
func (s *Scraper) ScrapeOnce(ctx context.Context, st *datastore.EndpointState) error {
	return s.observed(st.Key(), func(start time.Time) error { return s.scrape(ctx, st, start) })
}

func (s *Scraper) scrape(ctx context.Context, st *datastore.EndpointState, start time.Time) error {
	g := s.getter(wire.MetricsPath, 16<<20)
	var m datastore.Metrics
	var rep Report
	if err := g.get(ctx, st.Key(), func(body io.Reader) (err error) {
		m, rep, err = Parse(body)
		return err
	}); err != nil {
		return err
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
