package metrics

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/igw-dev/igw/internal/labelbound"
)

// Names the Gateway API Inference Extension's endpoint picker (now the llm-d
// router's) exports, which the picker exports too, with the same labels, so
// that dashboards, alerts and autoscalers written for it work unchanged. The
// mapping onto igw's own metrics is in the package README.
const (
	ObjectiveRequests           = "inference_objective_request_total"
	ObjectiveRequestErrors      = "inference_objective_request_error_total"
	ObjectiveRequestDuration    = "inference_objective_request_duration_seconds"
	ObjectiveRequestSizes       = "inference_objective_request_sizes"
	ObjectiveResponseSizes      = "inference_objective_response_sizes"
	ObjectiveInputTokens        = "inference_objective_input_tokens"
	ObjectiveOutputTokens       = "inference_objective_output_tokens"
	ObjectivePromptCachedTokens = "inference_objective_prompt_cached_tokens"
	ObjectiveNTPOT              = "inference_objective_normalized_time_per_output_token_seconds"
	ObjectiveRunningRequests    = "inference_objective_running_requests"
	ObjectiveTTFT               = "inference_objective_request_ttft_seconds"
	ObjectivePredictedTTFT      = "inference_objective_request_predicted_ttft_seconds"

	PoolAverageKVCache         = "inference_pool_average_kv_cache_utilization"
	PoolAverageQueueSize       = "inference_pool_average_queue_size"
	PoolAverageRunningRequests = "inference_pool_average_running_requests"
	PoolPerPodQueueSize        = "inference_pool_per_pod_queue_size"
	PoolReadyPods              = "inference_pool_ready_pods"

	SchedulerE2EDuration = "inference_extension_scheduler_e2e_duration_seconds"
	SchedulerAttempts    = "inference_extension_scheduler_attempts_total"
	ExtensionInfo        = "inference_extension_info"
)

// Label names of the compatible metrics.
const (
	LabelModelName       = "model_name"
	LabelTargetModelName = "target_model_name"
	LabelErrorCode       = "error_code"
	LabelPoolName        = "name"
	LabelModelServerPod  = "model_server_pod"
)

// Values of error_code, as the inference extension names its error classes.
const (
	ErrorBadRequest         = "BadRequest"
	ErrorResourceExhausted  = "ResourceExhausted"
	ErrorServiceUnavailable = "ServiceUnavailable"
	ErrorInternal           = "Internal"
	ErrorModelServer        = "ModelServerError"
	// ErrorAborted: the stream broke before the response ended (the client
	// went away or the connection failed); igw's own name, the extension has none.
	ErrorAborted = "Aborted"
)

// MaxModelLabels bounds the distinct model_name values: the name comes from
// the client's body, and an unbounded label would let clients grow the
// series without limit. A route serves at most 16 models and 64 adapters, so
// the bound is only reached by clients naming models the route does not serve;
// those are counted under OtherModelLabel.
const (
	MaxModelLabels  = 128
	OtherModelLabel = labelbound.Other
)

var (
	// The buckets follow the inference extension's, so that quantiles compare.
	objectiveLatencyBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10,
		15, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	tokenBuckets        = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576}
	outputTokenBuckets  = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}
	requestSizeBuckets  = prometheus.ExponentialBuckets(64, 2, 25) // 64 B .. 1 GiB
	responseSizeBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}
	ntpotBuckets        = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}
	schedulerBuckets    = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1}
)

// objectiveMetrics are the per-model metrics of the inference extension.
type objectiveMetrics struct {
	requests, errors                                          *prometheus.CounterVec
	duration, requestSizes, responseSizes                     *prometheus.HistogramVec
	inputTokens, outputTokens, cachedTokens, ntpot, ttft, ptt *prometheus.HistogramVec
	running                                                   *prometheus.GaugeVec
	schedulerE2E                                              prometheus.Histogram
	schedulerAttempts                                         *prometheus.CounterVec
	info                                                      *prometheus.GaugeVec

	models *labelbound.Set
}

func newObjectiveMetrics() *objectiveMetrics {
	model := []string{LabelModelName, LabelTargetModelName}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, model)
	}
	o := &objectiveMetrics{models: labelbound.New(MaxModelLabels)}
	o.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: ObjectiveRequests,
		Help: "Requests the picker decided about (routed or answered itself), by model."}, model)
	o.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: ObjectiveRequestErrors,
		Help: "Requests that failed, by model and error class (the picker's own answers, model server errors, broken streams)."},
		[]string{LabelModelName, LabelTargetModelName, LabelErrorCode})
	o.duration = hist(ObjectiveRequestDuration, "Time from the request's headers to the response's end, by model.", objectiveLatencyBuckets)
	o.requestSizes = hist(ObjectiveRequestSizes, "Request body size in bytes, by model.", requestSizeBuckets)
	o.responseSizes = hist(ObjectiveResponseSizes, "Response body size in bytes, by model.", responseSizeBuckets)
	o.inputTokens = hist(ObjectiveInputTokens, "Prompt tokens of each response's usage, by model.", tokenBuckets)
	o.outputTokens = hist(ObjectiveOutputTokens, "Completion tokens of each response's usage, by model.", outputTokenBuckets)
	o.cachedTokens = hist(ObjectivePromptCachedTokens, "Cached prompt tokens of each response's usage, by model.", tokenBuckets)
	o.ntpot = hist(ObjectiveNTPOT, "Request duration divided by its completion tokens, by model.", ntpotBuckets)
	o.ttft = hist(ObjectiveTTFT, "Time from pick to the first streamed output event, by model.", objectiveLatencyBuckets)
	o.ptt = hist(ObjectivePredictedTTFT, "Time to first token the picker's timing model predicted at pick, by model.", objectiveLatencyBuckets)
	o.running = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ObjectiveRunningRequests,
		Help: "Requests routed and not finished, by model."}, []string{LabelModelName})
	o.schedulerE2E = prometheus.NewHistogram(prometheus.HistogramOpts{Name: SchedulerE2EDuration,
		Help: "Time to make one scheduling decision (the same observations as " + SchedulingDuration + ").", Buckets: schedulerBuckets})
	o.schedulerAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SchedulerAttempts,
		Help: "Scheduling decisions by status: success (an endpoint was picked) or failure."}, []string{"status"})
	o.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ExtensionInfo,
		Help: "Always 1; the labels name the build (VCS revision and module version, when the build recorded them)."},
		[]string{"commit", "build_ref"})
	for _, s := range []string{"success", "failure"} {
		o.schedulerAttempts.WithLabelValues(s)
	}
	o.info.WithLabelValues(buildInfo()).Set(1)
	return o
}

func (o *objectiveMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.requests, o.errors, o.duration, o.requestSizes, o.responseSizes, o.inputTokens,
		o.outputTokens, o.cachedTokens, o.ntpot, o.ttft, o.ptt, o.running, o.schedulerE2E, o.schedulerAttempts, o.info}
}

// label bounds a client-supplied model name (see MaxModelLabels).
func (o *objectiveMetrics) label(model string) string {
	return o.models.Label(model)
}

func buildInfo() (commit, ref string) {
	commit, ref = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return commit, ref
	}
	if bi.Main.Version != "" {
		ref = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			commit = s.Value
		}
	}
	return commit, ref
}

// errorCode classifies a picker's own answer by its HTTP status.
func errorCode(status int) string {
	switch {
	case status == 429:
		return ErrorResourceExhausted
	case status == 503:
		return ErrorServiceUnavailable
	case status >= 400 && status < 500:
		return ErrorBadRequest
	default:
		return ErrorInternal
	}
}
