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
	// The adapter mapping file's and the model list file's loads and sizes.
	adapterFile, modelListFile fileMetrics

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
		adapterFile: newFileMetrics(MetricAdapterReloads, "Adapter mapping file loads, by result.",
			MetricAdapters, "LoRA adapters in the mapping in use."),
		modelListFile: newFileMetrics(MetricModelListReloads, "Model list file loads, by result.",
			MetricModelListModels, "Models and adapters in the model list GET /v1/models answers with."),
		models: labelbound.New(MaxModelLabels),
	}
	reg.MustRegister(m.requests, m.parse, m.bodyBytes, m.adapterFile.loads, m.adapterFile.entries,
		m.modelListFile.loads, m.modelListFile.entries)
	return m
}

// fileMetrics count a watched file's loads, by result, and the entries of
// the one in use.
type fileMetrics struct {
	loads   *prometheus.CounterVec
	entries prometheus.Gauge
}

func newFileMetrics(loadsName, loadsHelp, entriesName, entriesHelp string) fileMetrics {
	return fileMetrics{
		loads:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: loadsName, Help: loadsHelp}, []string{"result"}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Name: entriesName, Help: entriesHelp}),
	}
}

// adapterMapping and modelList are the files' metrics; nil when m is.
func (m *Metrics) adapterMapping() *fileMetrics {
	if m == nil {
		return nil
	}
	return &m.adapterFile
}

func (m *Metrics) modelList() *fileMetrics {
	if m == nil {
		return nil
	}
	return &m.modelListFile
}

// loaded counts one load of the file.
func (f *fileMetrics) loaded(err error) {
	if f != nil {
		f.loads.WithLabelValues(reloadResult(err)).Inc()
	}
}

// holds records the entries of the file in use.
func (f *fileMetrics) holds(n int) {
	if f != nil {
		f.entries.Set(float64(n))
	}
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

func reloadResult(err error) string {
	if err != nil {
		return ReloadFailed
	}
	return ReloadApplied
}
