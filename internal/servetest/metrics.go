package servetest

import (
	"bytes"
	"testing"

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
