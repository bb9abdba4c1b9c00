// Package metrics holds the endpoint picker's Prometheus metrics: igw's own
// (igw_epp_*) and, beside them, the Gateway API Inference Extension's names
// (inference_objective_*, inference_pool_*, inference_extension_*; compat.go).
// Names are constants so dashboards, alerts and tests refer to one spelling.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/igw-dev/igw/pkg/epp/director"
)

// Metric names.
const (
	SchedulingDecisions      = "igw_epp_scheduling_decisions_total"
	SchedulingDuration       = "igw_epp_scheduling_duration_seconds"
	RequestPathLatency       = "igw_epp_request_path_latency_seconds"
	Responses                = "igw_epp_responses_total"
	EndpointPicks            = "igw_epp_endpoint_picks_total"
	EndpointTTFT             = "igw_epp_endpoint_time_to_first_token_seconds"
	EndpointPredictedTTFT    = "igw_epp_endpoint_predicted_time_to_first_token_seconds"
	EndpointInterToken       = "igw_epp_endpoint_inter_token_seconds"
	EndpointPrefillRate      = "igw_epp_endpoint_prefill_tokens_per_second"
	EndpointDecodeStep       = "igw_epp_endpoint_decode_step_seconds"
	Tokens                   = "igw_epp_tokens_total"
	Scrapes                  = "igw_epp_scrapes_total"
	ScrapeDuration           = "igw_epp_scrape_duration_seconds"
	ModelListReads           = "igw_epp_model_list_reads_total"
	Endpoints                = "igw_epp_endpoints"
	ConfigReloads            = "igw_epp_config_reloads_total"
	ConfigValid              = "igw_epp_config_valid"
	ConfigLastReloadUnixTime = "igw_epp_config_last_successful_reload_timestamp_seconds"
	Leader                   = "igw_epp_leader"
	StandbyRefusals          = "igw_epp_standby_refused_streams_total"
)

// Metrics is one registry with every collector.
type Metrics struct {
	Registry *prometheus.Registry

	Decisions          *prometheus.CounterVec   // reason
	SchedulingDuration prometheus.Histogram     //
	RequestPathLatency prometheus.Histogram     //
	Responses          *prometheus.CounterVec   // code
	Picks              *prometheus.CounterVec   // endpoint
	TTFT               *prometheus.HistogramVec // endpoint
	PredictedTTFT      *prometheus.HistogramVec // endpoint
	InterToken         *prometheus.HistogramVec // endpoint
	PrefillRate        *prometheus.GaugeVec     // endpoint
	DecodeStep         *prometheus.GaugeVec     // endpoint
	Tokens             *prometheus.CounterVec   // kind: prompt, completion, cached
	Scrapes            *prometheus.CounterVec   // result: ok, error
	ScrapeDuration     prometheus.Histogram
	ModelListReads     *prometheus.CounterVec // result: ok, error
	Endpoints          prometheus.Gauge
	ConfigReloads      *prometheus.CounterVec // result: success, failure
	ConfigValid        prometheus.Gauge
	ConfigLastReload   prometheus.Gauge
	Leader             prometheus.Gauge   // 1 while this replica serves picks
	StandbyRefusals    prometheus.Counter // ext_proc streams a standby refused

	objective *objectiveMetrics
	pool      *poolCollector
}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 4, 8, 16, 32}

// New registers every metric on a fresh registry (plus Go and process collectors).
func New() *Metrics {
	r := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	m := &Metrics{Registry: r, objective: newObjectiveMetrics(), pool: newPoolCollector()}
	m.Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SchedulingDecisions,
		Help: "Scheduling decisions by reason (scored, shed, no-endpoints, ...)."}, []string{"reason"})
	m.SchedulingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: SchedulingDuration,
		Help: "Time to make one scheduling decision.", Buckets: prometheus.ExponentialBuckets(5e-6, 2, 14)})
	m.RequestPathLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: RequestPathLatency,
		Help:    "Time the picker holds a request: from the last request body chunk to the last reply sent.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14)})
	m.Responses = prometheus.NewCounterVec(prometheus.CounterOpts{Name: Responses,
		Help: "Requests by final HTTP status (upstream or the picker's own)."}, []string{"code"})
	m.Picks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: EndpointPicks,
		Help: "Requests sent to each endpoint as destination."}, []string{"endpoint"})
	m.TTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: EndpointTTFT,
		Help: "Time from pick to the first streamed output event, per endpoint.", Buckets: latencyBuckets}, []string{"endpoint"})
	m.PredictedTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: EndpointPredictedTTFT,
		Help: "Time to first token the timing model predicted at pick (see PredictedTTFT), per endpoint.", Buckets: latencyBuckets}, []string{"endpoint"})
	m.InterToken = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: EndpointInterToken,
		Help: "Time between streamed output events, per endpoint.", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 12)}, []string{"endpoint"})
	m.PrefillRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: EndpointPrefillRate,
		Help: "Prefill rate the picker has learned for each endpoint."}, []string{"endpoint"})
	m.DecodeStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: EndpointDecodeStep,
		Help: "Decode step time the picker has learned for each endpoint."}, []string{"endpoint"})
	m.Tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: Tokens,
		Help: "Tokens reported in responses' usage, by kind (prompt, completion, cached)."}, []string{"kind"})
	m.Scrapes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: Scrapes,
		Help: "Telemetry scrapes by result."}, []string{"result"})
	m.ScrapeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: ScrapeDuration,
		Help: "Time of one telemetry scrape.", Buckets: prometheus.ExponentialBuckets(1e-4, 2, 14)})
	m.ModelListReads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: ModelListReads,
		Help: "Reads of the model servers' model lists (GET /v1/models) by result; a failed read keeps the last list."}, []string{"result"})
	m.Endpoints = prometheus.NewGauge(prometheus.GaugeOpts{Name: Endpoints, Help: "Endpoints known to the picker."})
	m.ConfigReloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: ConfigReloads,
		Help: "Configuration loads by result; a failure keeps the last good configuration."}, []string{"result"})
	m.ConfigValid = prometheus.NewGauge(prometheus.GaugeOpts{Name: ConfigValid,
		Help: "1 when the configuration file on disk is the one in effect, 0 when it was rejected."})
	m.ConfigLastReload = prometheus.NewGauge(prometheus.GaugeOpts{Name: ConfigLastReloadUnixTime,
		Help: "When the configuration in effect was loaded."})
	m.Leader = prometheus.NewGauge(prometheus.GaugeOpts{Name: Leader,
		Help: "1 while this replica is the active picker (it holds the leader Lease; always 1 without --leader-elect), 0 on a standby."})
	m.StandbyRefusals = prometheus.NewCounter(prometheus.CounterOpts{Name: StandbyRefusals,
		Help: "ext_proc streams refused with UNAVAILABLE because this replica is a standby; more than a trickle means the proxy reaches standbys."})
	for _, c := range []prometheus.Collector{m.Decisions, m.SchedulingDuration, m.RequestPathLatency, m.Responses,
		m.Picks, m.TTFT, m.PredictedTTFT, m.InterToken, m.PrefillRate, m.DecodeStep, m.Tokens, m.Scrapes, m.ScrapeDuration,
		m.ModelListReads, m.Endpoints, m.ConfigReloads, m.ConfigValid, m.ConfigLastReload, m.Leader, m.StandbyRefusals,
		m.pool, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	for _, c := range m.objective.collectors() {
		f(c)
	}
	for _, reason := range director.Reasons {
		m.Decisions.WithLabelValues(reason)
	}
	for _, res := range []string{"success", "failure"} {
		m.ConfigReloads.WithLabelValues(res)
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Result is the result label of a scrape or model list read: "ok" or "error".
func Result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// Code is the label value of an HTTP status.
func Code(status int) string { return strconv.Itoa(status) }

// ForgetEndpoint drops the per-endpoint series of a removed endpoint.
func (m *Metrics) ForgetEndpoint(key string) {
	m.Picks.DeleteLabelValues(key)
	m.TTFT.DeleteLabelValues(key)
	m.PredictedTTFT.DeleteLabelValues(key)
	m.InterToken.DeleteLabelValues(key)
	m.PrefillRate.DeleteLabelValues(key)
	m.DecodeStep.DeleteLabelValues(key)
}
