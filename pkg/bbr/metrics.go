package bbr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/igw-dev/igw/internal/labelbound"
)

// Metric names.
const (
	MetricRequests         = "igw_bbr_requests_total"
	MetricParseDuration    = "igw_bbr_parse_duration_seconds"
	MetricRequestBodyBytes = "igw_bbr_request_body_bytes"
	MetricAdapterReloads   = "igw_bbr_adapter_mapping_reloads_total"
	MetricAdapters         = "igw_bbr_adapter_mapping_adapters"
	MetricModelListReloads = "igw_bbr_model_list_reloads_total"
	MetricModelListModels  = "igw_bbr_model_list_models"
)

// Values of the outcome label of MetricRequests.
const (
	OutcomeRouted       = "routed"        // model read from the body
	OutcomeDefaultModel = "default_model" // no model in the body; the default was used
	OutcomePassThrough  = "pass_through"  // not a JSON request with a body
	OutcomeInvalidJSON  = "invalid_json"  // 400: not a valid JSON object
	OutcomeMissingModel = "missing_model" // 400: no model and no default
	OutcomeInvalidModel = "invalid_model" // 400: model not a string, or not usable as a header
	OutcomeTooLarge     = "too_large"     // 413
)

// Values of the result label of MetricAdapterReloads and MetricModelListReloads.
const (
	ReloadApplied = "applied" // a changed mapping was loaded
	ReloadFailed  = "failed"  // the file was missing or invalid; the last good one stays
)

// MaxModelLabels bounds the distinct model label values: the model comes from
// clients, and an unbounded label would let them grow the metric without limit.
// Models seen after the bound are counted under OtherModelLabel.
const (
	MaxModelLabels  = 500
	OtherModelLabel = labelbound.Other
)

// Metrics are the router's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	requests  *prometheus.CounterVec
	parse     prometheus.Histogram
	bodyBytes prometheus.Histogram
	reloads   *prometheus.CounterVec
	adapters  prometheus.Gauge
	// The model list file's loads and size.
	listReloads *prometheus.CounterVec
	listed      prometheus.Gauge

	models *labelbound.Set
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Requests seen by the body-based router, by model (empty unless routed) and outcome.",
		}, []string{"model", "outcome"}),
		parse: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricParseDuration,
			Help:    "Time spent scanning request bodies for the model, per request.",
			Buckets: prometheus.ExponentialBucketsRange(2e-6, 0.25, 18),
		}),
		bodyBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricRequestBodyBytes,
			Help:    "Size of the request bodies scanned.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 12), // 256 B to 1 GiB
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAdapterReloads,
			Help: "Adapter mapping file loads, by result.",
		}, []string{"result"}),
		adapters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricAdapters,
			Help: "LoRA adapters in the mapping in use.",
		}),
		listReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricModelListReloads,
			Help: "Model list file loads, by result.",
		}, []string{"result"}),
		listed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricModelListModels,
			Help: "Models and adapters in the model list GET /v1/models answers with.",
		}),
		models: labelbound.New(MaxModelLabels),
	}
	reg.MustRegister(m.requests, m.parse, m.bodyBytes, m.reloads, m.adapters, m.listReloads, m.listed)
	return m
}

// request counts one request's outcome.
func (m *Metrics) request(outcome, model string) {
	if m != nil {
		m.requests.WithLabelValues(m.modelLabel(model), outcome).Inc()
	}
}

// scanned records the time spent scanning one body, and its size.
func (m *Metrics) scanned(parse time.Duration, bodyBytes int) {
	if m != nil {
		m.parse.Observe(parse.Seconds())
		m.bodyBytes.Observe(float64(bodyBytes))
	}
}

func (m *Metrics) modelLabel(model string) string {
	if model == "" {
		return ""
	}
	return m.models.Label(model)
}

func (m *Metrics) reloaded(err error) {
	if m != nil {
		m.reloads.WithLabelValues(reloadResult(err)).Inc()
	}
}

func (m *Metrics) modelListReloaded(err error) {
	if m != nil {
		m.listReloads.WithLabelValues(reloadResult(err)).Inc()
	}
}

func reloadResult(err error) string {
	if err != nil {
		return ReloadFailed
	}
	return ReloadApplied
}

func (m *Metrics) adaptersInUse(n int) {
	if m != nil {
		m.adapters.Set(float64(n))
	}
}

func (m *Metrics) modelsListed(n int) {
	if m != nil {
		m.listed.Set(float64(n))
	}
}
