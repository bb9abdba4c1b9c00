package servetest

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics reads the Prometheus text exposition at url into its metric
// families, by name; an answer that does not parse fails t.
func Metrics(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(Get(t, url).Body))
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	return families
}

// Gather reads g's metric families, by name; a gathering error fails t.
func Gather(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	gathered, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	families := make(map[string]*dto.MetricFamily, len(gathered))
	for _, f := range gathered {
		families[f.GetName()] = f
	}
	return families
}

// FindSeries returns the first series of family name whose labels include
// want, or nil when there is none (a vector's series appears only once used).
func FindSeries(families map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
next:
	for _, m := range families[name].GetMetric() {
		for k, v := range want {
			if Label(m, k) != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// Series is FindSeries for a series that must be there: its absence fails t.
func Series(t testing.TB, families map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	m := FindSeries(families, name, want)
	if m == nil {
		t.Fatalf("%s has no series with labels %v: %v", name, want, families[name].GetMetric())
	}
	return m
}

// Value is a series' one number: a gauge's, counter's or untyped metric's
// value, a histogram's or summary's sample count; 0 for no series.
func Value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetSummary() != nil:
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}

// Label is m's value of label name ("" when it has none).
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
