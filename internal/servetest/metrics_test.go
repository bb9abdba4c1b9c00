package servetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSeriesAndValueReadAGatheredRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total"}, []string{"code", "model"})
	sizes := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sizes"})
	reg.MustRegister(requests, sizes)
	requests.WithLabelValues("200", "a").Add(3)
	requests.WithLabelValues("500", "a").Add(2)
	sizes.Observe(1)
	sizes.Observe(5)

	families := Gather(t, reg)
	if got := Value(Series(t, families, "requests_total", map[string]string{"code": "500"})); got != 2 {
		t.Errorf("requests_total{code=500} = %v, want 2", got)
	}
	if got := Label(Series(t, families, "requests_total", map[string]string{"code": "200"}), "model"); got != "a" {
		t.Errorf("model label %q, want a", got)
	}
	if got := Value(Series(t, families, "sizes", nil)); got != 2 {
		t.Errorf("histogram value %v, want its 2 observations", got)
	}
	if m := FindSeries(families, "requests_total", map[string]string{"code": "404"}); m != nil || Value(m) != 0 {
		t.Errorf("a series never counted: %v, value %v; want none and 0", m, Value(m))
	}
	if m := FindSeries(families, "absent", nil); m != nil {
		t.Errorf("an absent family gave %v", m)
	}
}
