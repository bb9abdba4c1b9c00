package metrics

import (
	"time"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// The methods below record one request's life in the inference extension's
// per-model metrics (and the predicted time to first token in igw's own);
// the ext_proc server calls them beside its igw_epp_* recording. model is
// the name the client sent; target_model_name carries the same name, since
// the picker never rewrites the model. Every method is a no-op on nil.

// Scheduled records one scheduling decision that took took; picked says
// whether it chose an endpoint.
func (m *Metrics) Scheduled(took time.Duration, picked bool) {
	if m == nil {
		return
	}
	m.objective.schedulerE2E.Observe(took.Seconds())
	status := "failure"
	if picked {
		status = "success"
	}
	m.objective.schedulerAttempts.WithLabelValues(status).Inc()
}

// Routed records a request sent to an endpoint by res.
func (m *Metrics) Routed(model string, requestBytes int64, res *director.Result) {
	if m == nil {
		return
	}
	l := m.objective.label(model)
	m.objective.requests.WithLabelValues(l, l).Inc()
	m.objective.requestSizes.WithLabelValues(l, l).Observe(float64(requestBytes))
	m.objective.running.WithLabelValues(l).Inc()
	if res == nil || res.Endpoint == nil || res.Request == nil {
		return
	}
	p := PredictedTTFT(res)
	m.objective.ptt.WithLabelValues(l, l).Observe(p)
	m.PredictedTTFT.WithLabelValues(res.Primary).Observe(p)
}

// Rejected records a request the picker answered itself with status.
func (m *Metrics) Rejected(model string, requestBytes int64, status int) {
	if m == nil {
		return
	}
	l := m.objective.label(model)
	m.objective.requests.WithLabelValues(l, l).Inc()
	m.objective.requestSizes.WithLabelValues(l, l).Observe(float64(requestBytes))
	m.objective.errors.WithLabelValues(l, l, errorCode(status)).Inc()
}

// FirstToken records a routed request's time from pick to first output event.
func (m *Metrics) FirstToken(model string, ttft time.Duration) {
	if m == nil {
		return
	}
	l := m.objective.label(model)
	m.objective.ttft.WithLabelValues(l, l).Observe(ttft.Seconds())
}

// Outcome is how a routed request ended.
type Outcome struct {
	// Status is the upstream's HTTP status (0 when no response headers came).
	Status int
	// Complete is false when the stream broke before the response ended.
	Complete bool
	// Duration is from the request's headers to the response's end.
	Duration      time.Duration
	ResponseBytes int64
	// Usage is the response's OpenAI usage, when it carried one.
	Usage *Usage
}

// Usage is the token counts of a response's usage object.
type Usage struct{ PromptTokens, CompletionTokens, CachedTokens int }

// Finished records the end of a request Routed recorded.
func (m *Metrics) Finished(model string, o Outcome) {
	if m == nil {
		return
	}
	l := m.objective.label(model)
	m.objective.running.WithLabelValues(l).Dec()
	switch {
	case !o.Complete:
		m.objective.errors.WithLabelValues(l, l, ErrorAborted).Inc()
		return
	case o.Status >= 400:
		m.objective.errors.WithLabelValues(l, l, ErrorModelServer).Inc()
		return
	}
	m.objective.duration.WithLabelValues(l, l).Observe(o.Duration.Seconds())
	m.objective.responseSizes.WithLabelValues(l, l).Observe(float64(o.ResponseBytes))
	if u := o.Usage; u != nil {
		m.objective.inputTokens.WithLabelValues(l, l).Observe(float64(u.PromptTokens))
		m.objective.outputTokens.WithLabelValues(l, l).Observe(float64(u.CompletionTokens))
		m.objective.cachedTokens.WithLabelValues(l, l).Observe(float64(u.CachedTokens))
		if u.CompletionTokens > 0 {
			m.objective.ntpot.WithLabelValues(l, l).Observe(o.Duration.Seconds() / float64(u.CompletionTokens))
		}
	}
}

// PredictedTTFT is the time to first token the timing model expects for a
// pick at the moment it was made: the picker's own prefill backlog ahead of
// the request plus its uncached prompt, at the endpoint's learned prefill
// rate, plus an engine step per prefill chunk. It leaves out what the
// predicted-latency scorer adds for KV-cache pressure and adapter loads, so
// the gap to the observed time shows those and the model's error together.
func PredictedTTFT(res *director.Result) float64 {
	work := res.Request.WorkAhead + float64(res.Request.UncachedTokens)
	return latency.Model{ChunkTokens: res.Request.ChunkTokens}.PrefillSeconds(res.Endpoint.Speed(), work)
}
