package options

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/wire"
)

// Telemetry are the options of reading each endpoint's state (its metrics
// scrape, its model list) and of what an endpoint with old telemetry is.
// The EPP and the standalone gateway, which runs a picker per pool, take the
// same flags.
type Telemetry struct {
	ScrapeInterval   time.Duration
	ScrapeTimeout    time.Duration
	MetricsPath      string
	MetricsStaleness time.Duration
	StalePolicy      string

	// ModelsInterval is how often each endpoint's model list (GET /v1/models)
	// is read; 0 turns the reads off. ModelsTimeout bounds one read.
	ModelsInterval time.Duration
	ModelsTimeout  time.Duration
}

// DefaultTelemetry returns the defaults.
func DefaultTelemetry() Telemetry {
	return Telemetry{
		ScrapeInterval:   50 * time.Millisecond,
		MetricsPath:      wire.MetricsPath,
		MetricsStaleness: 200 * time.Millisecond,
		StalePolicy:      string(director.StaleSaturated),
		ModelsInterval:   5 * time.Second,
		ModelsTimeout:    2 * time.Second,
	}
}

// AddFlags registers the flags on fs.
func (t *Telemetry) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&t.ScrapeInterval, "scrape-interval", t.ScrapeInterval, "How often each endpoint's metrics are scraped.")
	fs.DurationVar(&t.ScrapeTimeout, "scrape-timeout", t.ScrapeTimeout, "Timeout of one scrape (default: the scrape interval).")
	fs.StringVar(&t.MetricsPath, "metrics-path", t.MetricsPath, "Path of the model servers' Prometheus metrics (trtllm-serve: /prometheus/metrics).")
	fs.DurationVar(&t.MetricsStaleness, "metrics-staleness", t.MetricsStaleness, "Age after which an endpoint's telemetry is stale.")
	fs.StringVar(&t.StalePolicy, "stale-policy", t.StalePolicy, "What a stale endpoint is: saturated (kept, scored worst, sheddable) or filter (removed).")
	fs.DurationVar(&t.ModelsInterval, "models-interval", t.ModelsInterval, "How often each endpoint's model list (GET /v1/models: served models and registered LoRA adapters) is read, so adapter requests avoid pods that lack the adapter; 0 turns it off.")
	fs.DurationVar(&t.ModelsTimeout, "models-timeout", t.ModelsTimeout, "Timeout of one model list read.")
}

// Complete fills the scrape timeout, which defaults to the interval.
func (t *Telemetry) Complete() {
	if t.ScrapeTimeout <= 0 {
		t.ScrapeTimeout = t.ScrapeInterval
	}
}

// Validate rejects inconsistent options: the first bad interval or
// timeout, and a bad stale policy beside it.
func (t *Telemetry) Validate() error {
	var errs []error
	switch {
	case t.ScrapeInterval <= 0:
		errs = append(errs, fmt.Errorf("--scrape-interval must be positive"))
	case t.ScrapeTimeout <= 0:
		errs = append(errs, fmt.Errorf("--scrape-timeout must be positive"))
	case t.MetricsStaleness < 0:
		errs = append(errs, fmt.Errorf("--metrics-staleness must not be negative"))
	case t.ModelsInterval < 0:
		errs = append(errs, fmt.Errorf("--models-interval must not be negative (0 turns the model list reads off)"))
	case t.ModelsInterval > 0 && t.ModelsTimeout <= 0:
		errs = append(errs, fmt.Errorf("--models-timeout must be positive"))
	}
	if p := director.StalePolicy(t.StalePolicy); p != director.StaleSaturated && p != director.StaleFilter {
		errs = append(errs, fmt.Errorf("--stale-policy must be saturated or filter, got %q", t.StalePolicy))
	}
	return errors.Join(errs...)
}
